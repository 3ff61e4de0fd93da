#!/usr/bin/env python3
"""How close each of gdsbench's paths gets to this machine's limit for it, in one table:

    path                         gdsbench (its own reported figure)     the limit it is held against
    harness floor, null 4 KiB    the null engine's time per request     fio's null engine, the same job
    page-cache read, 1 MiB       psync reading a file in the page cache one thread's memcpy of 1 MiB pieces
    HTTP over loopback, 4 MiB    the curl engine from nginx, 8 in flight curl reading the whole object in one
                                 (the object in /dev/shm: no disk)       stream, its whole process (vs_clients'
                                                                          measure_ceiling)
    threads = cores: null 4 KiB  the null engine, a thread a core        fio's null engine, a job a core
    threads = cores: page cache  psync 4 KiB random reads of a warm      fio's psync, the same job, a job a core
                                 file, a thread a core

The rows with a thread on every core have a target (gdsbench at least 0.97 of fio): there whatever
gdsbench runs beside its workers during the window takes a core's time from them. The table also
says what that costs: the CPU-seconds a second gdsbench's process spent outside its workers during
its measured window (its own rusage over the window less the workers' own), the harness's price.

Each row alternates gdsbench and its limit (A B A B ..., 5 repeats by default); each figure is the
median of its repeats, and the ratio gdsbench / limit is the median of the repeats' side-by-side
ratios with a distribution-free interval (benchmarks/stats.py). For the null row the figure is
nanoseconds per request (lower is better; the ratio is the limit's time over gdsbench's, so 1.0
means as cheap as fio). gdsbench's figures are the ones it reports (its measured window); fio's and
the memcpy's are timed the same way inside their own runs, and curl's whole process is timed from
outside over a stream of a second or more (its start-up a few ms of it).

    .venv/bin/python benchmarks/limits.py            # about 5 minutes, as root (it drops the page cache)
"""

from __future__ import annotations

import argparse
import dataclasses
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
from vs_fio import ROWS, beside_workers, run_fio, run_gdsbench, warm_up  # noqa: E402

import gdsbench  # noqa: E402

MiB, GiB = 1 << 20, 1 << 30
RUNTIME, RAMP = 2.0, 0.3  # seconds of each fio and gdsbench run
CORES = os.cpu_count() or 1
TARGET = 0.97  # gdsbench / fio where a thread runs on every core (issue 38)


def fio_row(name: str, threads: int = 1):
    """vs_fio's row, or the same job run by `threads` threads (fio: as many jobs, reported as one group)."""
    row = next(r for r in ROWS if r.name == name)
    if threads == 1:
        return row
    return dataclasses.replace(row, fio={**row.fio, "numjobs": threads, "group_reporting": None},
                               gds={**row.gds, "threads": threads})


def null_pair(seed: int, _work: dict) -> tuple[float, float, float | None]:
    """ns per request: gdsbench's null engine, then fio's, the same 4 KiB QD1 job (vs_fio's row)."""
    row = fio_row("null 4K")
    ours = run_gdsbench(row, None, RUNTIME, RAMP, seed)
    theirs = run_fio(row, None, RUNTIME, RAMP, seed)["iops"]
    return 1e9 / ours["iops"], 1e9 / theirs, ours["beside_workers"]


def cores_pair(name: str, file: bool):
    """IOPS of vs_fio's row `name` run by a thread on every core: gdsbench, then fio."""
    def pair(seed: int, work: dict) -> tuple[float, float, float | None]:
        row, path = fio_row(name, CORES), work["file"] if file else None
        if path:
            warm_up(path)
        ours = run_gdsbench(row, path, RUNTIME, RAMP, seed)
        return ours["iops"], run_fio(row, path, RUNTIME, RAMP, seed)["iops"], ours["beside_workers"]
    return pair


def page_cache_pair(seed: int, work: dict) -> tuple[float, float, float | None]:
    """GiB/s: gdsbench's psync reading 1 MiB pieces of a file in the page cache, then one thread's
    memcpy of 1 MiB pieces (numpy copyto: glibc's memcpy), each for RUNTIME seconds."""
    row = fio_row("psync 1M seq warm cache")
    warm_up(work["file"])
    run = run_gdsbench(row, work["file"], RUNTIME, RAMP, seed)
    ours = run["bandwidth"] / GiB
    src, dst = np.ones(64 * MiB, dtype=np.uint8), np.zeros(MiB, dtype=np.uint8)
    moved, started = 0, time.perf_counter()
    while time.perf_counter() - started < RUNTIME:
        for at in range(0, len(src), MiB):
            np.copyto(dst, src[at:at + MiB])
        moved += len(src)
    return ours, moved / (time.perf_counter() - started) / GiB, run["beside_workers"]


def loopback_pair(seed: int, work: dict) -> tuple[float, float, float | None]:
    """MiB/s: gdsbench's curl engine reading the object in 4 MiB ranges, 8 in flight, then curl's one
    stream of the whole object (vs_clients.measure_ceiling, one run)."""
    res = subprocess.run([sys.executable, "-m", "gdsbench", "run", work["url"], "--bs", "4M", "--qd", "8",
                          "--io-size", str(work["object"]), "--seed", str(seed), "--json"], capture_output=True,
                         text=True, check=True)
    figures = json.loads(res.stdout)
    ceiling = vs_clients.measure_ceiling(work["nginx_pid"], work["url"], work["object"], work["dir"])
    return figures["bandwidth_bytes_per_s"] / MiB, ceiling["mib_s"], beside_workers(figures)


ROW_SPECS = [  # (path, figure, lower is better, the pair, gdsbench's side, the limit's side, target or None)
    ("harness floor: null engine, 4 KiB, QD1", "ns per request", True, null_pair, "gdsbench null",
     "fio null (fio-3.33)", None),
    ("page-cache read: psync, 1 MiB", "GiB/s", False, page_cache_pair, "gdsbench psync, warm file",
     "memcpy of 1 MiB pieces, one thread", None),
    ("HTTP over loopback: 4 MiB ranges, 8 in flight", "MiB/s", False, loopback_pair,
     "gdsbench curl engine from nginx (/dev/shm)", "curl, one stream of the whole object", None),
    (f"threads = cores ({CORES}): null engine, 4 KiB, QD1 each", "requests/s", False,
     cores_pair("null 4K", file=False), f"gdsbench null, {CORES} threads", f"fio null, {CORES} jobs", TARGET),
    (f"threads = cores ({CORES}): page-cache read, psync 4 KiB random", "IOPS", False,
     cores_pair("psync 4K rand warm cache", file=True), f"gdsbench psync, {CORES} threads, warm file",
     f"fio psync, {CORES} jobs, the same file", TARGET),
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
        for path, unit, lower_better, pair, ours_name, limit_name, target in ROW_SPECS:
            runs = [pair(seed, work) for seed in range(1, args.repeats + 1)]
            ours, limit, beside = ([r[k] for r in runs] for k in range(3))
            ratios = [(b / a) if lower_better else (a / b) for a, b, _ in runs]
            judged = paired_verdict(ratios, target or 0.0)
            lo, hi = judged["interval"]
            harness = [b for b in beside if b is not None]
            table.append([path, unit, f"{shown(median(ours))} ({ours_name})", f"{shown(median(limit))} ({limit_name})",
                          f"{judged['median']:.2f} ({lo:.2f}-{hi:.2f}, {judged['interval_is']})",
                          f">= {target:g}: {judged['verdict']}" if target else "-",
                          f"{median(harness):.3f} ({min(harness):.3f}-{max(harness):.3f})" if harness else "-"])
            raw["rows"].append({"path": path, "unit": unit, "gdsbench": ours, "limit": limit, "ratios": ratios,
                                "target": target, "judged": judged, "beside_workers_cpu_s_per_s": beside})
            print(" | ".join(table[-1]), flush=True)
    finally:
        servers.stop(proc)
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(work_dir, ignore_errors=True)
    header = ["path", "figure", "gdsbench (median)", "the limit (median)", "gdsbench / limit: median (interval)",
              "target: verdict", "gdsbench beside its workers: CPU-s per s, median (min-max)"]
    notes = [f"{args.repeats} repeats per row, gdsbench and its limit alternated (A B A B ...); fio and gdsbench "
             f"runs {RUNTIME:g} s after a {RAMP:g} s ramp, the memcpy {RUNTIME:g} s.",
             "The null row's ratio is fio's time per request over gdsbench's (1.0: as cheap as fio); the others' "
             "gdsbench's figure over the limit's.",
             "The HTTP row's limit is curl's one stream, not a bound on every client: nginx and curl share this "
             "machine's two cores with gdsbench, and 8 streams may go faster or slower than one.",
             f"Targets: where a thread runs on each of the {CORES} cores, gdsbench at least {TARGET:g} of fio "
             "(PASS: the median there; FAIL: the whole interval below; else NOISE).",
             "'Beside its workers': the CPU-seconds a second gdsbench's process spent outside its worker threads "
             "in the measured window (the process's rusage over the window less the workers' own): progress "
             "polling every 20 ms and the Python that answers it, what the harness costs while it measures. "
             "The null and page-cache rows run gdsbench in this script's process (its Python idle meanwhile), "
             "the HTTP row as its own process."]
    write_outputs("limits", "How close each path gets to this machine's limit", markdown_table(header, table),
                  notes, raw, tools=("fio", "curl", "nginx"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
