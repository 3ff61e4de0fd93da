from __future__ import annotations

import argparse
import json
import sys

from gdsbench.commands.fio_flags import add_fio_job_arguments, with_fio_job
from gdsbench.commands.options import (
    add_job_arguments,
    add_metrics_argument,
    add_remote_arguments,
    add_target_argument,
    job_values,
)
from gdsbench.execution.runner import run, with_target
from gdsbench.job.errors import EXIT_INTERRUPTED, UsageError, VerifyFailure
from gdsbench.job.spec import spec_from_values
from gdsbench.reporting import prom
from gdsbench.reporting.display import run_summary


class RunCommand:
    name = "run"
    help = "measure reads (or, with --rw write, writes) of one file, block device or object"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_target_argument(parser)
        add_remote_arguments(parser)
        add_job_arguments(parser)
        parser.add_argument("--json", action="store_true", help="print the full result as JSON instead of a table")
        add_metrics_argument(parser, "the run's figures")
        add_fio_job_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        args = with_fio_job(args, "run")
        spec = spec_from_values(job_values(args))  # each value checked as it is parsed; the rest in run()
        spec = with_target(spec)
        failure = None
        try:
            result = run(spec)
        except VerifyFailure as e:  # the measurement is shown all the same, then the error
            failure, result = e, e.result
        if result is None:  # an MPI rank other than 0: rank 0 reports for all
            return 0
        for note in result.warnings:
            print(f"gdsbench: warning: {note}", file=sys.stderr)
        if args.json:
            json.dump(result.to_dict(), sys.stdout, indent=1)
            print()
        else:
            print(run_summary(result))
        sys.stdout.flush()  # the measurement is out before anything else can fail
        problem = None
        if args.metrics:
            metrics = prom.run_metrics(result)
            problem = prom.unwritten(metrics, args.metrics)
        if problem:
            print(f"gdsbench: error: {problem}; the result is printed above", file=sys.stderr)
        if result.interrupted:
            return EXIT_INTERRUPTED
        if failure is not None:
            print(f"gdsbench: error: {failure}", file=sys.stderr)
            return failure.exit_code
        return UsageError.exit_code if problem else 0  # a report that was not written is never a pass
