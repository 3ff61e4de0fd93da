#!/usr/bin/env python3
"""What many hosts cost gdsbench itself, apart from the storage:

1. Aggregation at scale: 1,024 and 8,192 synthetic rank records (each a
   thread with a latency histogram of 1,000 reads and a timeline), made into
   one result as rank 0 does under mpirun (aggregate, the result, its per-host
   breakdown over 64 ranks per host). Median of 5.
2. The step barrier `train` uses under MPI (MPI_Barrier) across 3 hosts
   against 1: three ranks, one on each of three namespaced hosts (veth and TCP
   between them, tests/hosts.py) or all three on one, 500 barriers each,
   alternated, 3 repeats; waiting as gdsbench sets it on a host with more ranks
   than cores (yielding) and as Open MPI does by default (spinning). Needs
   root; skipped otherwise.
3. `predict` across hosts against the emulation: the three hosts, each
   reading the disk through a link of its own of 20 MiB/s (a blkio cgroup per
   host, so the hosts' links, not the disk, are the limit), six accelerators
   (two a host) of a unet3d-shaped dataset that each want about 20 MiB/s.
   Emulated AU (`train` under mpirun) against `predict` probed from one host
   (how it was made before: rank 0's probe alone) and from all three at once
   (each host's first rank). Alternated, 3 repeats. Needs root.

    .venv/bin/python benchmarks/hosts_scale.py        # about three minutes
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))  # the hosts the tests make (tests/hosts.py)
from common import markdown_table, median, write_outputs  # noqa: E402

from gdsbench import _native  # noqa: E402
from gdsbench.execution.aggregate import aggregate  # noqa: E402
from gdsbench.execution.record import RunRecord, ThreadRecord  # noqa: E402
from gdsbench.job.result import Result, per_host  # noqa: E402
from gdsbench.job.spec import JobSpec  # noqa: E402
from gdsbench.job.units import format_duration  # noqa: E402

BARRIER_LOOP = """
import time
from gdsbench.execution import mpi
comm = mpi.world()  # as train's step barrier finds it (MpiBarrier: comm.Barrier())
for _ in range(100):
    comm.Barrier()
took = []
for _ in range({n}):
    t = time.perf_counter_ns()
    comm.Barrier()
    took.append(time.perf_counter_ns() - t)
took.sort()
if comm.Get_rank() == 0:
    print(took[len(took) // 2], took[len(took) * 99 // 100])
"""


def synthetic_ranks(n: int, rng) -> tuple[list[RunRecord], list[dict]]:
    runs, infos = [], []
    for rank in range(n):
        latency = _native.LatencyHistogram()
        latency.add(rng.integers(50_000, 5_000_000, 1000).astype(np.uint64))
        end = int(rng.integers(900_000_000, 1_000_000_000))
        thread = dataclasses.replace(ThreadRecord.empty(), latency=latency, bytes=1000 << 20, ops=1000,
                                     last_complete_ns=end, timeline_bytes=np.full(10, 100 << 20, np.uint64))
        runs.append(RunRecord(threads=[thread], interrupted=False, start_skew_ns=0, process_cpu_user_s=0.5,
                              process_cpu_sys_s=0.5, window_cpu_user_s=0.4, window_cpu_sys_s=0.4, wall_ns=end,
                              start_realtime_ns=10**18 + int(rng.integers(0, 100_000)), first_done_ns=0))
        infos.append({"host": f"node{rank // 64:04d}", "pid": 1000 + rank, "rank": rank, "path": "/mnt/x",
                      "offset": rank << 30, "size": 1 << 30})
    return runs, infos


def aggregation_rows(repeats: int) -> tuple[list[list], dict]:
    rng = np.random.default_rng(1)
    spec = JobSpec(path="/mnt/x", bs=1 << 20, interval_ns=100_000_000)
    rows, raw = [], {}
    for n in (1024, 8192):
        runs, infos = synthetic_ranks(n, rng)
        took = []
        for _ in range(repeats):
            t = time.perf_counter()
            record = aggregate(runs, infos, spec.interval_ns, aligned=True)
            result = Result.from_run(spec, record, data_path="synthetic")
            result.summary()
            hosts = per_host(result.procs)
            took.append(time.perf_counter() - t)
        assert result.bytes == n * (1000 << 20) and len(hosts) == n // 64
        raw[n] = took
        rows.append([f"{n:,} ranks ({n // 64} hosts)", format_duration(median(took) * 1e9),
                     format_duration(median(took) * 1e9 / n), f"{(max(took) - min(took)) / median(took):.0%}"])
    return rows, raw


def barrier_rows(repeats: int, count: int) -> tuple[list[list], dict, str | None]:
    from hosts import Hosts, why_not

    why = why_not()
    if why:
        return [], {}, why
    loop = BARRIER_LOOP.format(n=count)
    # yield: what gdsbench asks for where a host has more ranks than cores (the namespaced hosts share this
    # machine's cores, which no rank can see, so it is given here); spin: Open MPI's default
    waits = {"yield": {"OMPI_MCA_mpi_yield_when_idle": "1"}, "spin": {"OMPI_MCA_mpi_yield_when_idle": "0"}}
    raw: dict[str, list] = {}
    with Hosts(3) as hosts:
        one = Hosts.__new__(Hosts)  # the same hosts, every rank placed on h1
        one.__dict__.update(hosts.__dict__, n=1, names=["h1"])
        for _ in range(repeats):  # one host, three hosts, alternated
            for wait, env in waits.items():
                for name, where, ranks in (("one host", one, 3), ("three hosts", hosts, 1)):
                    out = subprocess.run(where.mpirun(ranks, sys.executable, "-c", loop), env={**hosts.env(), **env},
                                         capture_output=True, text=True, timeout=300)
                    if out.returncode:
                        raise SystemExit(f"mpirun ({name}) failed: {out.stderr[-1000:]}")
                    p50, p99 = map(int, out.stdout.split()[-2:])
                    raw.setdefault(f"{name}, {wait}", []).append({"p50_ns": p50, "p99_ns": p99})
    rows = [[name, format_duration(median([r["p50_ns"] for r in runs])),
             format_duration(median([r["p99_ns"] for r in runs])), len(runs)] for name, runs in raw.items()]
    for wait in waits:
        ratio = median([r["p50_ns"] for r in raw[f"three hosts, {wait}"]]) / \
            median([r["p50_ns"] for r in raw[f"one host, {wait}"]])
        rows.append([f"three hosts / one host, {wait} (p50)", f"{ratio:.2f}x", "", ""])
    return rows, raw, None


LINK = 20 << 20  # each host's own read limit, bytes/s
SHAPE = ["--workload", "unet3d", "--record-bytes", "256K", "--record-stdev", "64K", "--batch", "4", "--read-threads",
         "2", "--compute-time", "50ms"]  # batch 4 x ~258 KiB / 50 ms: about 20 MiB/s per accelerator at full AU


def predict_rows(repeats: int, folder: str) -> tuple[list[list], dict, str | None]:
    from hosts import Hosts, why_not

    why = why_not()
    if why:
        return [], {}, why
    dataset = os.path.join(folder, "unet3d")
    gdsbench = [sys.executable, "-m", "gdsbench"]
    subprocess.run([*gdsbench, "prepare", dataset, "--files", "1200", *SHAPE], check=True, capture_output=True)
    raw: dict[str, list] = {"emulated": [], "predicted, one host's probe": [], "predicted, three hosts' probe": []}

    def run(cmd):
        out = subprocess.run(cmd, env=hosts.env(), capture_output=True, text=True, timeout=600)
        if out.returncode:
            raise SystemExit(f"{' '.join(cmd[-12:])} failed: {out.stderr[-1000:]}")
        return json.loads(out.stdout)

    with Hosts(3, read_bps=LINK) as hosts:
        for _ in range(repeats):  # emulated, one host's probe, three hosts' probe, alternated
            (row,) = run(hosts.mpirun(2, *gdsbench, "train", dataset, *SHAPE, "--results", folder, "--json"))
            raw["emulated"].append({"au_percent": row["au_percent"], "steps": row["steps_per_epoch"]})
            for name, cmd in (("predicted, one host's probe", hosts.on("h1", *gdsbench, "predict", dataset, *SHAPE,
                                                                         "--also", "6", "--json")),
                              ("predicted, three hosts' probe", hosts.mpirun(2, *gdsbench, "predict", dataset, *SHAPE,
                                                                             "--also", "6", "--json"))):
                d = run(cmd)
                raw[name].append({"au_percent": next(a["au_percent"] for a in d["au"] if a["accelerators"] == 6),
                                  "max_accelerators": d["max_accelerators"], "seconds": d["seconds"],
                                  "probe_mib_per_s": [round(p["rate_bytes_per_s"] / 2**20, 1) for p in d["probe"]]})
    emulated = median([r["au_percent"] for r in raw["emulated"]])
    rows = []
    for name, runs in raw.items():
        au = median([r["au_percent"] for r in runs])
        rows.append([name, f"{au:.1f}%", "" if name == "emulated" else f"{au - emulated:+.1f}",
                     ", ".join(f"{r['au_percent']:.1f}" for r in runs),
                     str(runs[0].get("max_accelerators", "")), " / ".join(map(str, runs[0].get("probe_mib_per_s", [])))])
    return rows, raw, None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--barriers", type=int, default=500)
    args = ap.parse_args()
    agg_rows, agg_raw = aggregation_rows(5)
    table = "## Aggregation on rank 0\n\n" + markdown_table(["ranks", "time (median of 5)", "per rank", "spread"],
                                                            agg_rows)
    bar_rows, bar_raw, why = barrier_rows(args.repeats, args.barriers)
    table += "\n\n## The step barrier (MPI_Barrier), three ranks\n\n" + (markdown_table(
        ["placement", "p50 per barrier (median over repeats)", "p99", "repeats"], bar_rows) if bar_rows else
        f"not measured: {why}")
    folder = tempfile.mkdtemp(prefix="gdsbench-hosts-scale-")  # under /tmp: the disk the hosts' links throttle
    try:
        pred_rows, pred_raw, pred_why = predict_rows(args.repeats, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    table += ("\n\n## Six accelerators on three hosts, each host's link 20 MiB/s: AU at 6\n\n" + (markdown_table(
        ["", "AU at 6 (median)", "vs emulated (points)", "each repeat", "answer (first repeat)",
         "probe MiB/s by point (first repeat)"], pred_rows) if pred_rows else f"not measured: {pred_why}"))
    notes = ["Aggregation: aggregate() with aligned starts, Result.from_run, its summary and per_host, on "
             "synthetic records (1,000 reads each, a 10-interval timeline), as rank 0 does after gathering; it runs "
             "after the measured window, so it adds to a run's wall time only.",
             "Barrier: the hosts are network namespaces on this one machine (one kernel, 2 cores shared by all three "
             "ranks): the three-host figure adds veth and TCP (Open MPI's tcp BTL), the one-host one uses shared "
             "memory. Real NICs add their own latency; this shows what crossing a TCP stack costs.",
             "spin: Open MPI's default wait (OMPI_MCA_mpi_yield_when_idle=0); yield: =1. With more ranks than cores "
             "each spinning rank holds a core its peer needs, and a barrier takes scheduler quanta; gdsbench asks for "
             "yielding where a host has more ranks than cores (execution/mpi.py), unless the user set it. The "
             "namespaced hosts share this machine's 2 cores, which no rank can see, so both are given explicitly.",
             f"Each barrier loop: 100 warm-up barriers, then {args.barriers:,} timed on rank 0.",
             "Predict across hosts: 1,200 files of 258 KiB (sd 47 KiB), unet3d's loader with batch 4, 2 read threads "
             "and 50 ms compute, two accelerators on each of the three hosts; each host reads the disk through its "
             "own blkio cgroup of 20 MiB/s (tests/hosts.py, Hosts(read_bps=...)), a stand-in for a host's link to "
             "shared storage. One host's probe is `gdsbench predict` run on h1 alone, which is what rank 0's probe "
             "saw before every host probed; the three hosts' probe is `mpirun gdsbench predict`, each host's first "
             "rank reading its own share at once. Emulated: `mpirun gdsbench train` with the same shape."]
    print(table)
    md, _ = write_outputs("hosts_scale", "Many hosts: aggregation at scale, the step barrier and predict across hosts",
                          table, notes, {"aggregation_s": agg_raw, "barrier": bar_raw, "barrier_skipped": why,
                                         "predict": pred_raw, "predict_skipped": pred_why}, tools=("mpi",))
    print(f"\nwritten: {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
