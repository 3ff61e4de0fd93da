from __future__ import annotations

import argparse
import json
import sys

from ..errors import EXIT_INTERRUPTED, VerifyFailure
from ..display import run_summary
from ..runner import engine_info, resolve_engine, run
from ..scratch import SCRATCH_PATH, ensure_scratch
from ..spec import spec_from_values
from .options import add_job_arguments, add_target_argument, job_values


class RunCommand:
    name = "run"
    help = "measure reads from one file or block device"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_target_argument(parser)
        add_job_arguments(parser)
        parser.add_argument("--json", action="store_true", help="print the full result as JSON instead of a table")

    def run(self, args: argparse.Namespace) -> int:
        values = job_values(args)
        spec = spec_from_values(values).validate()
        if args.path is None:
            if engine_info(resolve_engine(spec))["reads_file"]:
                ensure_scratch()
            spec = spec.replace(path=SCRATCH_PATH)
        else:
            spec = spec.replace(path=args.path)
        result = run(spec)
        if result is None:  # an MPI rank other than 0: rank 0 reports for all
            return 0
        for note in result.warnings:
            print(f"gdsbench: warning: {note}", file=sys.stderr)
        if args.json:
            json.dump(result.to_dict(), sys.stdout, indent=1)
            print()
        else:
            print(run_summary(result))
        if result.interrupted:
            return EXIT_INTERRUPTED
        if result.verify_mismatches:
            print(f"gdsbench: error: {VerifyFailure.__doc__.strip()} "
                  f"({result.verify_mismatches} blocks, first at offset {result.first_mismatch_offset})", file=sys.stderr)
            return VerifyFailure.exit_code
        return 0
