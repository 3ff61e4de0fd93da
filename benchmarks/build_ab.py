#!/usr/bin/env python3
"""Two builds of gdsbench against fio: does a change of shape change what users see?

For each of vs_fio.py's rows, runs fio, then both builds, then fio, ... in one
script: fio A B fio B A fio A B ... (the builds' order swapped at every step,
so neither always runs right after fio), each build as a user runs it
(`python -m gdsbench run PATH ... --json`, a process of its own). Each build's
run is compared with the mean of the fio runs either side, as vs_fio.py does,
and the builds with each other run by run. A row is SAME when the new build's
ratio to the old one is within 5%, or its 95% interval holds 1.

The old build is another environment's Python with gdsbench installed (a clone
of an older commit, built with scripts/setup):

    .venv/bin/python benchmarks/build_ab.py --old /path/to/old/.venv/bin/python --old-name 2e8f811
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, median, write_outputs  # noqa: E402
from vs_fio import (  # noqa: E402
    ROWS,
    WRITE_FILE,
    fresh_file,
    median_interval,
    prepare_files,
    release_hugepages,
    reserve_hugepages,
    run_fio,
    run_fio_huge,
    warm_up,
)

from gdsbench.job.units import format_duration, format_rate, parse_size  # noqa: E402

SAME_WITHIN = 0.05


def run_build(python: str, row, path: str | None, runtime: float, ramp: float, seed: int) -> dict:
    flags = []
    for key, value in dict(row.gds, runtime=f"{runtime}s", ramp=f"{ramp}s", seed=seed).items():
        if key == "direct":
            flags.append("--direct" if value else "--buffered")
        elif value is True:
            flags.append(f"--{key.replace('_', '-')}")
        else:
            flags += [f"--{key.replace('_', '-')}", str(value)]
    argv = [python, "-m", "gdsbench", "run", *([path] if path else []), *flags, "--json"]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    r = json.loads(proc.stdout)
    return {"bandwidth": r["bandwidth_bytes_per_s"], "iops": r["iops"], "p50": r["lat_p50_ns"], "p99": r["lat_p99_ns"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="the Python of the environment holding the old build")
    ap.add_argument("--old-name", default="old", help="what to call it in the table (a commit)")
    ap.add_argument("--runtime", type=float, default=2.0)
    ap.add_argument("--ramp", type=float, default=0.5)
    ap.add_argument("--repeats", type=int, default=5, help="runs of each build per row (default 5)")
    ap.add_argument("--disk-size", default="4G")
    ap.add_argument("--rows", default="", help="only rows whose name contains this text")
    ap.add_argument("--name", default="build_ab")
    args = ap.parse_args()

    files, counters = prepare_files(args.disk_size)
    write_bytes = int(parse_size(WRITE_FILE))
    builds = {"old": args.old, "new": sys.executable}
    old_hugepages = reserve_hugepages(32)
    reference = run_fio_huge if old_hugepages is not None else run_fio
    table, raw = [], {"args": vars(args), "rows": []}
    try:
        for row in [r for r in ROWS if args.rows in r.name]:
            path = files.get(row.file)

            def measure(fn, *fn_args, row=row, path=path, seed: int):
                if row.file == "warm":
                    warm_up(path)
                if row.file == "write":  # as vs_fio: one file, made anew before each run, its size told to fio
                    fresh_file(path, write_bytes)
                    row = dataclasses.replace(row, fio={**row.fio, "size": write_bytes})
                return counters.measure(lambda row: fn(*fn_args, row, path, args.runtime, args.ramp, seed), row)

            fio, runs = [measure(reference, seed=1)], {"old": [], "new": []}
            for i in range(args.repeats):  # fio A B fio B A fio ...
                for name in (("old", "new") if i % 2 == 0 else ("new", "old")):
                    runs[name].append(measure(run_build, builds[name], seed=i + 1))
                fio.append(measure(reference, seed=i + 2))
            m = row.metric
            vs_fio = {name: [g[m] / ((a[m] + b[m]) / 2) for a, g, b in zip(fio, runs[name], fio[1:])]
                      for name in runs}
            new_vs_old = {k: [n[k] / o[k] for n, o in zip(runs["new"], runs["old"])] for k in (m, "p50")}
            ratio, interval = median(new_vs_old[m]), median_interval(new_vs_old[m])
            same = abs(ratio - 1) <= SAME_WITHIN or interval[0] <= 1 <= interval[1]
            fmt = (lambda v: f"{v / 1e3:,.1f}k") if m == "iops" else format_rate
            table.append([row.name, m, fmt(median([f[m] for f in fio])),
                          fmt(median([r[m] for r in runs["old"]])), fmt(median([r[m] for r in runs["new"]])),
                          f"{median(vs_fio['old']):.3f}", f"{median(vs_fio['new']):.3f}",
                          f"**{ratio:.3f}** ({interval[0]:.3f}-{interval[1]:.3f})",
                          f"{format_duration(median([r['p50'] for r in runs['old']]))} / "
                          f"{format_duration(median([r['p50'] for r in runs['new']]))}",
                          f"{median(new_vs_old['p50']):.3f}", "SAME" if same else "**DIFFERENT**"])
            raw["rows"].append({"name": row.name, "metric": m, "fio": fio, **runs, "vs_fio": vs_fio,
                                "new_vs_old": new_vs_old, "verdict": "SAME" if same else "DIFFERENT"})
            print(" | ".join(table[-1]), flush=True)
    finally:
        if old_hugepages is not None:
            release_hugepages(old_hugepages)
    md = markdown_table(["job", "metric", "fio", args.old_name, "this build", f"{args.old_name} / fio",
                         "this / fio", "this / old (95% CI)", "p50 old / this", "p50 this / old", "verdict"], table)
    notes = [f"Old build: {args.old_name} ({args.old}); this build: {sys.executable}. Each row: fio, then both builds "
             f"(order swapped at each step), then fio, {args.repeats} runs of each build, {args.runtime:g} s after a "
             f"{args.ramp:g} s ramp; each build's run against the mean of the fio runs either side (as vs_fio.py), "
             "the builds against each other run by run",
             f"SAME: this build's median ratio to the old one within {SAME_WITHIN:.0%}, or its 95% interval holds 1",
             f"fio reference: {'huge-page buffers (--mem=shmhuge)' if old_hugepages is not None else 'default buffers'}"]
    write_outputs(args.name, f"gdsbench {args.old_name} against this build, with fio between", md, notes, raw, tools=("fio",))
    return 0 if all(r["verdict"] == "SAME" for r in raw["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
