#!/usr/bin/env python3
"""How close each of gdsbench's paths gets to this machine's limit for it, in one table:

    path                         gdsbench (its own reported figure)     the limit it is held against
    harness floor, null 4 KiB    the null engine's time per request     fio's null engine, the same job
    page-cache read, 1 MiB       psync reading a file in the page cache one thread's memcpy of 1 MiB pieces
    HTTP over loopback, 4 MiB    the curl engine from nginx, 8 in flight curl reading the whole object in one
                                 (the object in /dev/shm: no disk)       stream, its whole process (vs_clients'
                                                                          measure_ceiling)

Each row alternates gdsbench and its limit (A B A B ..., 5 repeats by default); each figure is the
median of its repeats, and the ratio gdsbench / limit is the median of the repeats' side-by-side
ratios with a distribution-free interval (benchmarks/stats.py). For the null row the figure is
nanoseconds per request (lower is better; the ratio is the limit's time over gdsbench's, so 1.0
means as cheap as fio). gdsbench's figures are the ones it reports (its measured window); fio's and
the memcpy's are timed the same way inside their own runs, and curl's whole process is timed from
outside over a stream of a second or more (its start-up a few ms of it).

    .venv/bin/python benchmarks/limits.py            # about 3 minutes, as root (it drops the page cache)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
import vs_clients  # noqa: E402
from common import markdown_table, median, write_outputs  # noqa: E402
from stats import paired_verdict  # noqa: E402
from vs_fio import ROWS, run_fio, run_gdsbench, warm_up  # noqa: E402

import gdsbench  # noqa: E402

MiB, GiB = 1 << 20, 1 << 30
RUNTIME, RAMP = 2.0, 0.3  # seconds of each fio and gdsbench run


def fio_row(name: str):
    return next(r for r in ROWS if r.name == name)


def null_pair(seed: int, _work: dict) -> tuple[float, float]:
    """ns per request: gdsbench's null engine, then fio's, the same 4 KiB QD1 job (vs_fio's row)."""
    row = fio_row("null 4K")
    ours = run_gdsbench(row, None, RUNTIME, RAMP, seed)["iops"]
    theirs = run_fio(row, None, RUNTIME, RAMP, seed)["iops"]
    return 1e9 / ours, 1e9 / theirs


def page_cache_pair(seed: int, work: dict) -> tuple[float, float]:
    """GiB/s: gdsbench's psync reading 1 MiB pieces of a file in the page cache, then one thread's
    memcpy of 1 MiB pieces (numpy copyto: glibc's memcpy), each for RUNTIME seconds."""
    row = fio_row("psync 1M seq warm cache")
    warm_up(work["file"])
    ours = run_gdsbench(row, work["file"], RUNTIME, RAMP, seed)["bandwidth"] / GiB
    src, dst = np.ones(64 * MiB, dtype=np.uint8), np.zeros(MiB, dtype=np.uint8)
    moved, started = 0, time.perf_counter()
    while time.perf_counter() - started < RUNTIME:
        for at in range(0, len(src), MiB):
            np.copyto(dst, src[at:at + MiB])
        moved += len(src)
    return ours, moved / (time.perf_counter() - started) / GiB


def loopback_pair(seed: int, work: dict) -> tuple[float, float]:
    """MiB/s: gdsbench's curl engine reading the object in 4 MiB ranges, 8 in flight, then curl's one
    stream of the whole object (vs_clients.measure_ceiling, one run)."""
    res = subprocess.run([sys.executable, "-m", "gdsbench", "run", work["url"], "--bs", "4M", "--qd", "8",
                          "--io-size", str(work["object"]), "--seed", str(seed), "--json"], capture_output=True,
                         text=True, check=True)
    ours = json.loads(res.stdout)["bandwidth_bytes_per_s"] / MiB
    ceiling = vs_clients.measure_ceiling(work["nginx_pid"], work["url"], work["object"], work["dir"])
    return ours, ceiling["mib_s"]


ROW_SPECS = [  # (path, figure, lower is better, the pair, gdsbench's side, the limit's side)
    ("harness floor: null engine, 4 KiB, QD1", "ns per request", True, null_pair, "gdsbench null",
     "fio null (fio-3.33)"),
    ("page-cache read: psync, 1 MiB", "GiB/s", False, page_cache_pair, "gdsbench psync, warm file",
     "memcpy of 1 MiB pieces, one thread"),
    ("HTTP over loopback: 4 MiB ranges, 8 in flight", "MiB/s", False, loopback_pair,
     "gdsbench curl engine from nginx (/dev/shm)", "curl, one stream of the whole object"),
]


def shown(value: float) -> str:
    """A figure as the table prints it: 2,480 or 83.2 or 10.8."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    work_dir = tempfile.mkdtemp(prefix="gdsbench-limits-")
    shm = tempfile.mkdtemp(prefix="gdsbench-limits-", dir="/dev/shm")
    os.makedirs(os.path.join(shm, "bucket"))
    work = {"dir": work_dir, "file": os.path.join(work_dir, "warm.dat"), "object": 2 * GiB}
    gdsbench.prepare(work["file"], GiB)
    gdsbench.prepare(os.path.join(shm, "bucket", "data.dat"), work["object"])
    proc, base = servers.nginx(shm, work_dir)
    work.update(nginx_pid=proc.pid, url=f"{base}/bucket/data.dat")
    table, raw = [], {"rows": []}
    try:
        for path, unit, lower_better, pair, ours_name, limit_name in ROW_SPECS:
            runs = [pair(seed, work) for seed in range(1, args.repeats + 1)]
            ours, limit = [r[0] for r in runs], [r[1] for r in runs]
            ratios = [(b / a) if lower_better else (a / b) for a, b in runs]
            judged = paired_verdict(ratios, 0.0)
            lo, hi = judged["interval"]
            table.append([path, unit, f"{shown(median(ours))} ({ours_name})", f"{shown(median(limit))} ({limit_name})",
                          f"{judged['median']:.2f} ({lo:.2f}-{hi:.2f}, {judged['interval_is']})"])
            raw["rows"].append({"path": path, "unit": unit, "gdsbench": ours, "limit": limit, "ratios": ratios,
                                "judged": judged})
            print(" | ".join(table[-1]), flush=True)
    finally:
        servers.stop(proc)
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(work_dir, ignore_errors=True)
    header = ["path", "figure", "gdsbench (median)", "the limit (median)", "gdsbench / limit: median (interval)"]
    notes = [f"{args.repeats} repeats per row, gdsbench and its limit alternated (A B A B ...); fio and gdsbench "
             f"runs {RUNTIME:g} s after a {RAMP:g} s ramp, the memcpy {RUNTIME:g} s.",
             "The null row's ratio is fio's time per request over gdsbench's (1.0: as cheap as fio); the others' "
             "gdsbench's figure over the limit's.",
             "The HTTP row's limit is curl's one stream, not a bound on every client: nginx and curl share this "
             "machine's two cores with gdsbench, and 8 streams may go faster or slower than one."]
    write_outputs("limits", "How close each path gets to this machine's limit", markdown_table(header, table),
                  notes, raw, tools=("fio", "curl", "nginx"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
