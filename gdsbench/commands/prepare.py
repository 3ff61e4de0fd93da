from __future__ import annotations

import argparse

from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_size, parse_size
from gdsbench.system.prepare import prepare
from gdsbench.system.scratch import progress_printer


class PrepareCommand:
    name = "prepare"
    help = "write a test file whose every 4 KiB block carries its offset and a checksum"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("path", metavar="PATH", help="file to create (never an existing file gdsbench did not create)")
        parser.add_argument("--size", required=True, help="file size, e.g. 4GiB (a multiple of 4K)")
        parser.add_argument("--seed", type=int, default=1, help="seed of the payload (default: 1)")
        parser.add_argument("--force", action="store_true", help="rewrite even if an identical gdsbench file exists")
        parser.add_argument("--files", type=int, default=None, metavar="N",
                            help="write N files PATH.0 ... PATH.N-1, one per process (for --layout per-proc)")

    def run(self, args: argparse.Namespace) -> int:
        size = parse_size(args.size, "--size")
        if args.files is not None and args.files < 1:
            raise UsageError(f"--files {args.files}: must be at least 1")
        paths = [args.path] if args.files is None else [f"{args.path}.{i}" for i in range(args.files)]
        for path in paths:
            done = prepare(path, size, seed=args.seed, force=args.force, progress=progress_printer(f"writing {path}"))
            print(f"{'kept existing' if done.reused else 'wrote'} {done.path} ({format_size(done.size)})")
        return 0
