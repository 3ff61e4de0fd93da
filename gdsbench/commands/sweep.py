from __future__ import annotations

import argparse
import os
import shlex
import sys

from gdsbench.commands.fio_flags import add_fio_job_arguments, with_fio_job
from gdsbench.commands.options import (
    add_job_arguments,
    add_remote_arguments,
    add_results_argument,
    add_target_argument,
    job_values,
    sweep_values,
)
from gdsbench.commands.pages import build_page
from gdsbench.execution.scratch import SCRATCH_PATH, ensure_scratch
from gdsbench.job.errors import EXIT_INTERRUPTED, GdsbenchError, UsageError
from gdsbench.job.spec import BY_KEY, opens_target


def run_argument(store, results: str) -> str:
    """How a later command names this run, as printed in a hint: its id and --results where they
    find it, else its path (a run resumed by path may lie outside --results)."""
    if os.path.abspath(os.path.join(results, store.run_id)) == os.path.abspath(store.path):
        return f"{shlex.quote(store.run_id)} --results {shlex.quote(results)}"
    return shlex.quote(os.path.abspath(store.path))


class SweepCommand:
    name = "sweep"
    help = "measure a grid of jobs (block sizes, queue depths, threads, ...), saved point by point, then report"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_target_argument(parser)
        add_remote_arguments(parser)
        parser.add_argument("--file", metavar="SWEEP.toml", help="read the grid and options from a TOML sweep file")
        parser.add_argument("--repeat", type=int, default=None, metavar="N",
                            help="measure each point N times; the median is reported, repeats >5%% apart flagged")
        parser.add_argument("--name", default=None, help="name of the run (its directory is <results>/<date>-<name>)")
        add_results_argument(parser)
        parser.add_argument("--resume", metavar="RUN_ID", help="finish an interrupted run without repeating its saved points")
        parser.add_argument("--no-report", action="store_true", help="do not write the HTML report at the end")
        add_job_arguments(parser, lists=True)
        add_fio_job_arguments(parser)

    def _spec(self, args: argparse.Namespace):
        from gdsbench.sweep.grid import SweepSpec, load_sweep_file

        grid, fixed = sweep_values(args)
        spec = load_sweep_file(args.file) if args.file else SweepSpec(grid={}, fixed={})
        for key in grid:
            spec.fixed.pop(key, None)
        for key in fixed:
            spec.grid.pop(key, None)
        file_keys = tuple({*spec.grid, *spec.fixed} - {*grid, *fixed})  # messages name these as the file does
        grid = {**spec.grid, **grid}
        fixed = {**spec.fixed, **fixed}
        if args.path:
            fixed["path"] = args.path
        if "path" not in fixed and any(opens_target(e) for e in grid.get("engine", [fixed.get("engine", "auto")])):
            ensure_scratch()
            fixed["path"] = SCRATCH_PATH
        repeat = args.repeat if args.repeat is not None else spec.repeat
        return SweepSpec(grid=grid, fixed=fixed, repeat=repeat, name=args.name or spec.name, file_keys=file_keys)

    def run(self, args: argparse.Namespace) -> int:
        from gdsbench.execution import mpi
        from gdsbench.reporting import report
        from gdsbench.results.store import resolve_run
        from gdsbench.sweep import session
        from gdsbench.sweep.grid import plan_line

        args = with_fio_job(args, "sweep")  # its options fixed, any list given here swept
        if args.resume is not None:
            if not args.resume.strip():  # "" would otherwise start a new sweep
                raise UsageError("--resume: give the id of the run to finish (its folder's name under --results, or "
                                 "its path), as the interrupted sweep printed it")
            found = resolve_run(args.resume, args.results) if mpi.is_root() else None  # a run that is not there first
            given = [flag for flag, value in (("PATH", args.path), ("--file", args.file), ("--repeat", args.repeat),
                                              ("--name", args.name)) if value is not None]
            given = list(dict.fromkeys(given + [BY_KEY[k].flag for k in job_values(args)]))  # PATH is a job value too
            if given:
                raise UsageError(f"--resume finishes the run as it was planned, so {', '.join(given)} cannot change it; "
                                 "drop them, or start a new sweep")
            store, grid, plans = session.resume(found)
        else:
            if args.repeat is not None and args.repeat < 1:
                raise UsageError(f"--repeat {args.repeat}: must be at least 1")
            given = self._spec(args)
            store, grid, plans = session.start(given, args.results)
            if store and grid.points:
                print(f"gdsbench: {plan_line(given, grid)}", file=sys.stderr)
        for s in grid.skipped if mpi.is_root() else []:
            values = " ".join(f"{k}={v}" for k, v in s["values"].items())
            print(f"gdsbench: skipped {values}: {s['reason']}", file=sys.stderr)
        for problem in store.problems if store else []:
            print(f"gdsbench: warning: {problem}", file=sys.stderr)
        resume_hint = f"gdsbench sweep --resume {run_argument(store, args.results)}" if store else ""
        try:
            outcome = session.run(store, grid, plans)
        except GdsbenchError as e:
            if store and store.holder() is None:  # what was measured is saved: say how to go on (unless another
                # gdsbench writes this run now: it was refused, and a resume would be refused too)
                e.args = (f"{e}; the points measured before it are saved, finish with: {resume_hint}",)
            raise
        if store is None:  # an MPI rank other than 0
            return 0
        print(f"{outcome.points_done} of {outcome.points_total} measurements saved in {store.path}")
        if outcome.interrupted:
            print(f"gdsbench: interrupted; finish with: {resume_hint}", file=sys.stderr)
            return EXIT_INTERRUPTED
        if not args.no_report:
            try:
                built = build_page(store)
            except KeyboardInterrupt:
                print(f"gdsbench: interrupted while writing the report; the run is complete. Write it with: "
                      f"gdsbench report {run_argument(store, args.results)}", file=sys.stderr)
                return EXIT_INTERRUPTED
            for what in (report.SIMULATED, "best bandwidth", "best IOPS"):
                if what in built.summary:
                    print(f"{what}: {built.summary[what]}")
            print(f"report: {built.html_path}")
        return 0
