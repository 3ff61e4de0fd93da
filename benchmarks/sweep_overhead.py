#!/usr/bin/env python3
"""Harness cost of a sweep: time per point beyond the point's own measurement,
and memory as the number of points grows.

Overhead: a 20-point null-engine sweep (5 block sizes x 4 queue depths, 100 ms
each) is timed end to end, several times; overhead per point is
(sweep wall time - the 20 measured windows) / 20. It covers planning, the page
cache and residency checks, thread start-up, the progress line and the
durable writes (JSONL + Parquet + CSV) of every point.

Memory: sweeps of 20, 100 and 200 points (10 ms each) under tracemalloc; the
memory still held at the end, per point, should stay flat and close to the
size of the results themselves.

    .venv/bin/python benchmarks/sweep_overhead.py          # about 30 seconds
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, write_outputs  # noqa: E402

from gdsbench.results.store import POINTS_JSONL  # noqa: E402
from gdsbench.sweep import session  # noqa: E402
from gdsbench.sweep.grid import SweepSpec  # noqa: E402

TARGET_MS = 50.0


def timed_sweep(results: str, grid: dict, runtime: str) -> tuple[float, float, int]:
    """(wall seconds, measured seconds, points) of one sweep, start to finish."""
    spec = SweepSpec(grid=grid, fixed={"engine": "null", "runtime": runtime}, name="overhead")
    t0 = time.perf_counter()
    store, g, plans = session.start(spec, results)
    session.run(store, g, plans, show_progress=False)
    wall = time.perf_counter() - t0
    measured = sum(r["elapsed_ns"] for r in store.records()) / 1e9
    return wall, measured, len(g.points)


def grid_of(n: int) -> dict:
    """A grid of n null-engine points: block sizes x queue depths."""
    qds = [1, 2, 4, 8]
    return {"bs": [f"{4 * (i + 1)}K" for i in range(n // len(qds))], "qd": qds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gdsbench-overhead-")

    overheads = []
    for _ in range(args.repeats):
        wall, measured, n = timed_sweep(tmp, grid_of(20), "100ms")
        overheads.append((wall - measured) / n * 1e3)
    median = statistics.median(overheads)
    rows = [["20 points x 100 ms, null engine", f"{median:.1f} ms", f"{min(overheads):.1f}-{max(overheads):.1f} ms",
             f"<= {TARGET_MS:.0f} ms", "PASS" if median <= TARGET_MS else "FAIL"]]
    overhead_table = markdown_table(["sweep", "overhead per point (median)", "min-max", "target", "verdict"], rows)

    mem_rows, raw_mem = [], []
    for n in (20, 100, 200):
        tracemalloc.start()
        _, _, points = timed_sweep(tmp, grid_of(n), "10ms")
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        run_dirs = sorted(os.listdir(tmp))
        results_bytes = os.path.getsize(os.path.join(tmp, run_dirs[-1], POINTS_JSONL))
        raw_mem.append({"points": points, "held": held, "peak": peak, "results_bytes": results_bytes})
        mem_rows.append([points, f"{held / 1024:.0f} KiB", f"{held / points / 1024:.1f} KiB",
                         f"{peak / points / 1024:.1f} KiB", f"{results_bytes / points / 1024:.1f} KiB"])
    memory_table = markdown_table(["points", "held after the sweep", "held per point", "peak per point",
                                   "results per point (JSONL)"], mem_rows)
    # Memory may grow with points only by what the results themselves take:
    # (held at the largest sweep - held at the smallest) per added point must
    # not exceed the results' own size per point.
    first, last = raw_mem[0], raw_mem[-1]
    growth = (last["held"] - first["held"]) / (last["points"] - first["points"])
    flat = growth <= last["results_bytes"] / last["points"]
    notes = [f"Overhead: {args.repeats} sweeps; overhead = (wall time - sum of measured windows) / points.",
             "Memory: Python allocations traced by tracemalloc (numpy and pandas buffers included). "
             f"Held memory grows by {growth:.0f} B per added point, against {last['results_bytes'] / last['points']:.0f} B "
             "of results per point: " + ("within the results' own size." if flat else "MORE than the results.")]
    table = overhead_table + "\n\n" + memory_table
    print(table)
    paths = write_outputs("sweep_overhead", "Sweep harness overhead and memory", table, notes,
                          {"overhead_ms_per_point": overheads, "memory": raw_mem})
    print("\nwrote " + ", ".join(paths))
    return 0 if median <= TARGET_MS and flat else 1


if __name__ == "__main__":
    sys.exit(main())
