from __future__ import annotations

import argparse
import os
import sys

from gdsbench.commands.options import add_results_argument


class CompareCommand:
    name = "compare"
    help = "compare runs of the same grid on different tiers: ratios, a headline, overlaid charts"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("runs", metavar="RUN", nargs="+", help="runs (directories or run ids); ratios are against the first")
        add_results_argument(parser)
        parser.add_argument("--out", metavar="DIR", help="where to write the page (default: <results>/compare-<runs>): "
                            "a new or empty folder, or one gdsbench wrote")

    def run(self, args: argparse.Namespace) -> int:
        from gdsbench.reporting import compare
        from gdsbench.results.store import resolve_run

        dirs = [resolve_run(r, args.results) for r in args.runs]
        c = compare.compare(dirs)
        out = args.out or os.path.join(args.results, "compare-" + "-vs-".join(r.label for r in c.runs))
        path = compare.write(c, out, chosen=bool(args.out))
        for summary, details in zip(c.summaries, c.details):
            print(summary)
            for clause in details:
                print(f"  {clause}")
        print(compare.HEADLINE_RULE)
        for run in c.runs:
            for note in run.df.attrs.get("notes", []):
                print(f"gdsbench: note: {note}", file=sys.stderr)
            for problem in run.df.attrs.get("problems", []):
                print(f"gdsbench: warning: {problem}", file=sys.stderr)
        if c.coverage:
            print(f"gdsbench: note: {c.coverage}", file=sys.stderr)
        if c.tiers:  # two tiers compared on purpose: what makes them tiers, said once
            print(f"gdsbench: note: the compared tiers differ in: {'; '.join(c.tiers)}", file=sys.stderr)
        for d in c.differences:
            print(f"gdsbench: warning: runs differ: {d}", file=sys.stderr)
        header, rows = compare.text_table(c)
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        for row in [header] + rows:
            print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip())
        print(f"page: {path}")
        return 0
