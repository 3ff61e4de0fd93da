#!/usr/bin/env python3
"""Aggregate throughput as processes are added: 1, 2, 4 and 8 processes on
the null engine (the harness alone) and on a file in the page cache (reads
that cost CPU but no device time), with scaling efficiency against one
process, the start skew, the cost of aggregating the parts, and the peak
memory of each process.

Scaling efficiency = aggregate rate / (processes x the one-process rate).
On a machine with C cores it cannot exceed C / processes once processes > C:
the table says how many cores there were.

    .venv/bin/python benchmarks/scaling.py        # about a minute
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, write_outputs  # noqa: E402

import gdsbench  # noqa: E402
from gdsbench.execution import processes  # noqa: E402
from gdsbench.job.units import format_count, format_duration, format_rate, format_size  # noqa: E402

PROCS = [1, 2, 4, 8]
WARM_FILE = os.path.join("results", "scratch", "scaling-warm.dat")


def measure(spec: gdsbench.JobSpec, repeats: int) -> tuple[gdsbench.Result, float]:
    """The median-bandwidth result of `repeats` runs, and the median aggregation time."""
    results, aggregation = [], []
    original = processes.aggregate

    def timed(*args, **kw):
        t = time.perf_counter()
        out = original(*args, **kw)
        aggregation.append(time.perf_counter() - t)
        return out

    processes.aggregate = timed
    try:
        for _ in range(repeats):
            results.append(gdsbench.run(spec, record_environment=False))
    finally:
        processes.aggregate = original
    results.sort(key=lambda r: r.bandwidth)
    return results[len(results) // 2], statistics.median(aggregation) if aggregation else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runtime", type=float, default=1.5)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    os.makedirs(os.path.dirname(WARM_FILE), exist_ok=True)
    gdsbench.prepare(WARM_FILE, 1 << 30)
    with open(WARM_FILE, "rb") as f:  # into the page cache
        while f.read(1 << 24):
            pass
    cases = {
        "null engine, 4 KiB": dict(engine="null", bs=4096, metric="iops"),
        "page-cache file, psync 128 KiB": dict(path=WARM_FILE, engine="psync", bs=128 << 10, direct=False, warm=True,
                                               metric="bandwidth"),
    }
    rows, raw = [], {"cpus": os.cpu_count(), "cases": {}}
    for name, case in cases.items():
        metric = case.pop("metric")
        base = None
        raw["cases"][name] = []
        for procs in PROCS:
            spec = gdsbench.JobSpec(procs=procs, runtime_ns=int(args.runtime * 1e9), ramp_ns=200_000_000, **case)
            r, agg_s = measure(spec, args.repeats)
            rate = r.iops if metric == "iops" else r.bandwidth
            base = base or rate
            rss = max((p.get("max_rss_bytes", 0) for p in r.procs), default=0)
            rows.append([name, procs, format_count(rate) + " IOPS" if metric == "iops" else format_rate(rate),
                         f"{rate / (procs * base):.0%}", format_duration(r.start_skew_ns),
                         format_duration(agg_s * 1e9) if procs > 1 else "-",
                         format_size(rss) if rss else "(in process)"])
            raw["cases"][name].append({"procs": procs, "rate": rate, "efficiency": rate / (procs * base),
                                       "start_skew_ns": r.start_skew_ns, "aggregation_s": agg_s,
                                       "max_rss_bytes": [p.get("max_rss_bytes") for p in r.procs]})
            print(" | ".join(str(c) for c in rows[-1]), flush=True)
    table = markdown_table(["workload", "processes", "aggregate rate", "scaling efficiency", "start skew",
                            "aggregation time", "peak memory per process"], rows)
    notes = [f"{os.cpu_count()} CPUs: beyond that many processes, efficiency is bounded by cores, not by gdsbench.",
             f"Median of {args.repeats} runs per row, {args.runtime:g} s each after a 200 ms ramp; processes are "
             "spawned, set up, and started together behind a barrier; one process runs in the calling process.",
             "Aggregation time: merging the parts' histograms and figures after the run (not inside the measured window)."]
    print("\n" + table)
    write_outputs("scaling", "Scaling with processes", table, notes, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
