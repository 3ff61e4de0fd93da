from __future__ import annotations

import argparse

from ..prepare import prepare
from ..scratch import progress_printer
from ..units import format_size, parse_size


class PrepareCommand:
    name = "prepare"
    help = "write a test file whose every 4 KiB block carries its offset and a checksum"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("path", metavar="PATH", help="file to create (never an existing file gdsbench did not create)")
        parser.add_argument("--size", required=True, help="file size, e.g. 4GiB (a multiple of 4K)")
        parser.add_argument("--seed", type=int, default=1, help="seed of the payload (default: 1)")
        parser.add_argument("--force", action="store_true", help="rewrite even if an identical gdsbench file exists")

    def run(self, args: argparse.Namespace) -> int:
        size = parse_size(args.size, "--size")
        done = prepare(args.path, size, seed=args.seed, force=args.force, progress=progress_printer(f"writing {args.path}"))
        verb = "kept existing" if done.reused else "wrote"
        print(f"{verb} {done.path} ({format_size(done.size)})")
        return 0
