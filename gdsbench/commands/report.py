from __future__ import annotations

import argparse
import sys

from gdsbench.commands.options import add_results_argument


class ReportCommand:
    name = "report"
    help = "write PNG charts and a self-contained HTML page for a run"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("run", metavar="RUN", help="run directory, or run id under --results")
        add_results_argument(parser)
        parser.add_argument("--out", metavar="DIR", help="where to write the report (default: RUN/report): "
                            "a new or empty folder, or one gdsbench wrote")
        parser.add_argument("--point", type=int, default=None, metavar="N",
                            help="point whose throughput timeline to draw (default: the best bandwidth point)")

    def run(self, args: argparse.Namespace) -> int:
        from gdsbench.commands.pages import page_builder
        from gdsbench.job.errors import UsageError
        from gdsbench.results.kinds import kind_of
        from gdsbench.results.store import RunStore, resolve_run

        run_dir = resolve_run(args.run, args.results)
        store = RunStore.open(run_dir)
        for note in store.notes:
            print(f"gdsbench: note: {note}", file=sys.stderr)
        kind = kind_of(store.info())
        build = page_builder(kind)
        if not kind.picks_point:
            if args.point is not None:
                raise UsageError(f"--point {args.point}: {run_dir} is a {kind.name} run, and --point picks a point of a "
                                 "sweep run; drop --point")
            store.records()
            for problem in store.problems:  # a sweep's page lists them in its summary, printed below
                print(f"gdsbench: warning: {problem}", file=sys.stderr)
        built = build(run_dir, args.out, args.point) if kind.picks_point else build(run_dir, args.out)
        for what, value in built.summary.items():
            print(f"{what}: {value}")
        print(f"report: {built.html_path}")
        return 0
