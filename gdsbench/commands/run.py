from __future__ import annotations

import argparse
import json
import sys

from gdsbench.commands.options import add_job_arguments, add_remote_arguments, add_target_argument, job_values
from gdsbench.execution.runner import resolve_engine, run
from gdsbench.execution.scratch import SCRATCH_PATH, ensure_scratch
from gdsbench.job.errors import EXIT_INTERRUPTED, UsageError, VerifyFailure
from gdsbench.job.spec import opens_target, spec_from_values
from gdsbench.reporting import prom
from gdsbench.reporting.display import run_summary


class RunCommand:
    name = "run"
    help = "measure reads from one file or block device"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_target_argument(parser)
        add_remote_arguments(parser)
        add_job_arguments(parser)
        parser.add_argument("--json", action="store_true", help="print the full result as JSON instead of a table")
        parser.add_argument("--metrics", metavar="FILE.prom", help="also write the run's figures as gauges for "
                            "node_exporter's textfile collector")
        parser.add_argument("--fio-job", metavar="FILE", help="take the job's options from an fio job file (each "
                            "option said as the flag it became; flags given here win)")
        parser.add_argument("--fio-section", metavar="NAME", help="with --fio-job: which job of the file (where it "
                                                                  "has several)")

    def run(self, args: argparse.Namespace) -> int:
        if args.fio_job:
            args = self.from_fio_job(args)
        elif args.fio_section:
            raise UsageError("--fio-section: only with --fio-job FILE")
        if args.metrics and not args.metrics.endswith(".prom"):
            raise UsageError(f"--metrics {args.metrics}: node_exporter's textfile collector reads only *.prom files; "
                             "name it so")
        spec = spec_from_values(job_values(args))  # each value checked as it is parsed; the rest in run()
        if args.path is None:
            if opens_target(resolve_engine(spec)):
                ensure_scratch()
            spec = spec.replace(path=SCRATCH_PATH)
        else:
            spec = spec.replace(path=args.path)
        failure = None
        try:
            result = run(spec)
        except VerifyFailure as e:  # the measurement is shown all the same, then the error
            failure, result = e, e.result
        if result is None:  # an MPI rank other than 0: rank 0 reports for all
            return 0
        for note in result.warnings:
            print(f"gdsbench: warning: {note}", file=sys.stderr)
        if args.metrics:
            prom.write(prom.run_metrics(result), args.metrics)
        if args.json:
            json.dump(result.to_dict(), sys.stdout, indent=1)
            print()
        else:
            print(run_summary(result))
        if result.interrupted:
            return EXIT_INTERRUPTED
        if failure is not None:
            print(f"gdsbench: error: {failure}", file=sys.stderr)
            return failure.exit_code
        return 0

    @staticmethod
    def from_fio_job(args: argparse.Namespace) -> argparse.Namespace:
        """The arguments again, with the job file's options read first as the flags they mean, so the
        command line's own flags (read after them) win; which option became which is said once."""
        from gdsbench.execution import mpi
        from gdsbench.job import fio_job

        job = fio_job.translate(args.fio_job, args.fio_section)
        if mpi.is_root():
            print(f"gdsbench: {args.fio_job}: " + "; ".join(job.mapped), file=sys.stderr)
            for note in job.notes:
                print(f"gdsbench: note: {args.fio_job}: {note}", file=sys.stderr)
        own = args.argv[args.argv.index("run") + 1:]
        path = [job.path] if job.path and args.path is None else []
        again = args.command_parser.parse_args([*path, *job.flags, *own])
        again.fio_job = again.fio_section = None
        return again
