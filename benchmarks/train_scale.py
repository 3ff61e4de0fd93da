#!/usr/bin/env python3
"""Past this machine, on paper: what gdsbench train itself costs as the
number of accelerators grows to 1,024, so a user with a real cluster knows
gdsbench is not the bottleneck.

  barrier      the native step barrier (shared memory, futex) with K parties:
               K threads spread over 16 processes, all arriving at once, S
               steps; the cost of one step is the time per step. (Under
               mpirun the barrier is MPI's own.)
  aggregation  metrics.summarise and the AU-over-time series for K synthetic
               accelerators of 100 steps each, and the size of one record as
               it crosses a pipe (or MPI's gather) to the parent.
  emulation    gdsbench train with K accelerator processes on a tmpfs dataset
               (reads cost almost nothing) and 200 ms of compute per step: the
               AU lost is the harness's own cost, start-up apart.

    .venv/bin/python benchmarks/train_scale.py          # about 3 minutes
"""

from __future__ import annotations

import argparse
import json
import mmap
import multiprocessing as mp
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, write_outputs  # noqa: E402

from gdsbench import _native  # noqa: E402
from gdsbench.train import metrics, workloads  # noqa: E402
from gdsbench.train.pipeline import AcceleratorRecord, EpochRecord  # noqa: E402

PROCESSES = 16


def _party(path: str, threads: int, steps: int, out) -> None:
    with open(path, "r+b") as f:
        memory = mmap.mmap(f.fileno(), _native.BARRIER_BYTES)
    barrier = _native.StepBarrier(memory)
    took = []

    def loop() -> None:
        barrier.wait()  # every party started (spawning and imports are not timed)
        start = time.monotonic()
        for _ in range(steps):
            barrier.wait()
        took.append(time.monotonic() - start)

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    out.put(max(took))


def barrier_cost(parties: int, steps: int) -> float:
    """Seconds per step of `parties` parties all arriving at once (timed after a first
    step that every party has reached)."""
    fd, path = tempfile.mkstemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    os.ftruncate(fd, mmap.PAGESIZE)
    memory = mmap.mmap(fd, mmap.PAGESIZE)
    os.close(fd)
    _native.StepBarrier(memory, parties)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = min(PROCESSES, parties)
    split = [parties // procs + (1 if i < parties % procs else 0) for i in range(procs)]
    children = [ctx.Process(target=_party, args=(path, n, steps, out)) for n in split]
    for c in children:
        c.start()
    took = max(out.get() for _ in children)
    for c in children:
        c.join()
    memory.close()
    os.unlink(path)
    return took / steps


def synthetic(rank: int, steps: int, rng) -> AcceleratorRecord:
    compute = np.full(steps, 0.1)
    wait = rng.exponential(0.01, steps)
    start = np.cumsum(np.r_[0, 0.1 + wait[:-1]])
    e = EpochRecord(start_ns=0, end_ns=int((start[-1] + 0.1 + wait[-1]) * 1e9),
                    step_start_ns=(start * 1e9).astype(np.int64), loaded_ns=((start + wait) * 1e9).astype(np.int64),
                    computed_ns=((start + wait + 0.1) * 1e9).astype(np.int64),
                    released_ns=((start + wait + 0.1) * 1e9).astype(np.int64), compute_s=compute,
                    barrier_wait_ns=(rng.exponential(0.001, steps) * 1e9).astype(np.int64),
                    batch_bytes=np.full(steps, 7 << 20))
    h = _native.LatencyHistogram()
    h.add(rng.integers(10_000, 1_000_000, 700).astype(np.uint64))
    return AcceleratorRecord(rank, "host", [e], bytes_read=steps * (7 << 20), samples_read=steps * 7, latency=h)


def aggregation_cost(k: int, steps: int = 100) -> tuple[float, int]:
    rng = np.random.default_rng(k)
    records = [synthetic(r, steps, rng) for r in range(k)]
    size = len(pickle.dumps(records[0]))
    w = workloads.BUILT_IN["unet3d"]
    start = time.perf_counter()
    metrics.summarise(records, w)
    metrics.au_over_time(records)
    return time.perf_counter() - start, size


def emulation(k: int, dataset: str) -> dict:
    cmd = [sys.executable, "-m", "gdsbench", "train", dataset, "--workload", "unet3d", "--record-bytes", "64K",
           "--record-stdev", "0", "--batch", "2", "--read-threads", "1", "--compute-time", "200ms", "--steps", "20",
           "--accelerators", str(k), "--buffered", "--allow-cached", "--warm", "--json",
           "--results", os.path.join(os.path.dirname(dataset), "runs")]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    row = json.loads(proc.stdout)[0]
    return {"au": row["au_percent"], "wall_s": time.monotonic() - start, "emulated_s": row["wall_s"],
            "straggler_mean_s": row["straggler_mean_s"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parties", default="2,8,32,128,512,1024")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--aggregate", default="1,8,64,256,1024")
    ap.add_argument("--emulate", default="1,4,16,64")
    args = ap.parse_args()
    raw: dict = {"barrier": {}, "aggregation": {}, "emulation": {}}
    rows = []
    for k in map(int, args.parties.split(",")):
        cost = barrier_cost(k, args.steps)
        raw["barrier"][k] = cost
        rows.append(["barrier", k, f"{cost * 1e6:.0f} µs per step", f"{args.steps} steps, {min(PROCESSES, k)} processes"])
        print(rows[-1], file=sys.stderr, flush=True)
    for k in map(int, args.aggregate.split(",")):
        seconds, size = aggregation_cost(k)
        raw["aggregation"][k] = {"seconds": seconds, "record_bytes": size}
        rows.append(["aggregation", k, f"{seconds * 1e3:.0f} ms once per run", f"one record {size / 1024:.0f} KiB "
                     "(100 steps)"])
        print(rows[-1], file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        dataset = os.path.join(d, "ds")
        most = max(map(int, args.emulate.split(",")))
        subprocess.run([sys.executable, "-m", "gdsbench", "prepare", dataset, "--workload", "unet3d", "--files",
                        str(2 * 20 * most), "--record-bytes", "64K", "--record-stdev", "0"], check=True,
                       capture_output=True)
        for k in map(int, args.emulate.split(",")):
            out = emulation(k, dataset)
            raw["emulation"][k] = out
            rows.append(["emulation", k, f"AU {out['au']:.2f}%", f"{out['emulated_s']:.1f} s emulated, "
                         f"{out['wall_s']:.1f} s with start-up; stragglers {out['straggler_mean_s'] * 1e3:.1f} ms/step"])
            print(rows[-1], file=sys.stderr, flush=True)
    table = markdown_table(["what", "accelerators", "cost", "notes"], rows)
    notes = ["barrier: threads stand in for accelerator processes beyond 16 (a thread waits on the same shared-memory "
             "futex a process does); all parties arrive together, so the figure is the barrier's own round trip on "
             "2 cores, which is shared by up to 1,024 threads",
             "aggregation: synthetic records (labelled so in the script), as each accelerator sends one at the end "
             "of a run; it is not on any step's path",
             "emulation: tmpfs dataset, 64 KiB samples, batch 2, 1 read thread, 200 ms compute, 20 steps: AU below "
             "100% is the harness's own cost (sleep overshoot, barrier, Python between steps)"]
    md, _ = write_outputs("train_scale", "gdsbench train's own cost as accelerators grow", table, notes, raw)
    print(open(md).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
