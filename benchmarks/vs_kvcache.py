#!/usr/bin/env python3
"""gdsbench kvcache against MLPerf Storage v3.0's KV-cache benchmark (the reference), the same
model, users, duration, budgets and seed on the same disk:

    reference          kv-cache.py --gpu-mem-gb 0 --cpu-mem-gb 0 (every entry to storage): np.save and
                       np.load of one .npy a key through the page cache, each read after
                       posix_fadvise(DONTNEED), each write fsync'd
    gdsbench O_DIRECT  gdsbench kvcache --host-mem 0: io_uring, O_DIRECT, 1 MiB chunks, --qd 8
    gdsbench buffered  the same with --engine psync --buffered: page-cache reads after dropping the
                       file's pages, as the reference reads

Each repeat runs the three in turn (A B C A B C ...); each figure is the median of its repeats with
its range. Compared: the bytes a write and a read move and the reads a write (the workload's
shape: the same users from the same seed, their requests drawn alike), storage read bandwidth,
P95 read and write latency (the storage's own time: the reference's "device" figures, gdsbench's
engine times), and tokens a second.

The reference is not vendored: get kv_cache_benchmark/kv-cache.py of mlcommons/storage at
17335a710fd8 (its first v3.0 version; the same file is russfellows/mlc-storage's 0c2561d), and a
Python with numpy to run it:

    .venv/bin/python benchmarks/vs_kvcache.py --reference /tmp/kvref/kv-cache.py \\
        --reference-python /tmp/kvref/venv/bin/python     # about 7 minutes, as root
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import drop_caches, markdown_table, median, write_outputs  # noqa: E402

MiB = 1 << 20
SIDES = ("reference", "gdsbench O_DIRECT", "gdsbench buffered")
GDSBENCH_FLAGS = {"gdsbench O_DIRECT": ["--engine", "io_uring", "--direct", "--qd", "8"],
                  "gdsbench buffered": ["--engine", "psync", "--buffered"]}


def run_reference(args, directory: str) -> dict:
    out = os.path.join(directory, "out.json")
    cache = os.path.join(directory, "cache")
    cmd = [args.reference_python, args.reference, "--model", args.model, "--num-users", str(args.users),
           "--duration", str(args.duration), "--gpu-mem-gb", "0", "--cpu-mem-gb", "0", "--cache-dir", cache,
           "--generation-mode", "none", "--seed", str(args.seed), "--output", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=args.duration * 10 + 300)
    with open(out) as f:
        s = json.load(f)["summary"]
    c = s["cache_stats"]
    return {"write_bytes": c["total_write_bytes"], "writes": c["write_iops"], "read_bytes": c["total_read_bytes"],
            "reads": c["read_iops"], "read_p95_ms": c["nvme_read_device_p95_ms"],
            "write_p95_ms": c["nvme_write_device_p95_ms"], "tokens_per_s": s["avg_throughput_tokens_per_sec"],
            "requests": s["total_requests"], "seconds": float(args.duration)}


GENERATION_PROBE = """
import time, numpy as np
n = 64 << 20  # elements of float16: 128 MiB, a chatbot's entry
best = float("inf")
for _ in range(3):
    t = time.perf_counter()
    np.random.default_rng(1).uniform(-1.0, 1.0, size=n).astype(np.float16)
    best = min(best, time.perf_counter() - t)
print(128 / best)
"""


def reference_generation_mib_s(args) -> float:
    """How fast the reference makes an entry's data (KVCacheGenerator.generate: uniform float64 cast to
    float16), inside each prefill before its timed write: MiB/s, best of 3, in its own Python."""
    res = subprocess.run([args.reference_python, "-c", GENERATION_PROBE], capture_output=True, text=True, check=True)
    return float(res.stdout)


def run_gdsbench(args, directory: str, side: str) -> dict:
    cmd = [sys.executable, "-m", "gdsbench", "kvcache", directory, "--model", args.model, "--users",
           str(args.users), "--duration", f"{args.duration}s", "--host-mem", "0", "--generation-mode", "none",
           "--seed", str(args.seed), *GDSBENCH_FLAGS[side], "--results", os.path.join(directory, "runs"), "--json"]
    if getattr(args, "requests", None):  # the tests' fixed amount of work (the reference has no such flag)
        cmd += ["--requests", str(args.requests)]
    res = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=args.duration * 10 + 300)
    f = json.loads(res.stdout)
    storage = f["tiers"]["storage"]
    return {"write_bytes": storage["write"]["bytes"], "writes": storage["write"]["ops"],
            "read_bytes": storage["read"]["bytes"], "reads": storage["read"]["ops"],
            "read_p95_ms": storage["read"]["device"]["p95_ms"], "write_p95_ms": storage["write"]["device"]["p95_ms"],
            "tokens_per_s": f["tokens_per_s"], "requests": f["requests_completed"], "seconds": f["duration_s"]}


FIGURES = [  # (row, unit, from a run's figures)
    ("bytes a write (mean)", "MiB", lambda r: r["write_bytes"] / r["writes"] / MiB),
    ("bytes a read (mean)", "MiB", lambda r: r["read_bytes"] / r["reads"] / MiB),
    ("reads a write", "", lambda r: r["reads"] / r["writes"]),
    ("storage read bandwidth", "MiB/s", lambda r: r["read_bytes"] / r["seconds"] / MiB),
    ("storage read p95 (device)", "ms", lambda r: r["read_p95_ms"]),
    ("storage write p95 (device)", "ms", lambda r: r["write_p95_ms"]),
    ("tokens a second", "tok/s", lambda r: r["tokens_per_s"]),
]


def shown(values: list[float]) -> str:
    """A median and its range: 1,024 (998-1,100), or 2.45 (2.3-2.6)."""
    values = sorted(values)
    mid = median(values)
    fmt = (lambda v: f"{v:,.0f}") if mid >= 100 else (lambda v: f"{v:.3g}")
    return f"{fmt(mid)} ({fmt(values[0])}-{fmt(values[-1])})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", required=True, help="kv-cache.py (mlcommons/storage 17335a7)")
    ap.add_argument("--reference-python", required=True, help="a Python with numpy")
    ap.add_argument("--model", default="llama3.1-8b")
    ap.add_argument("--users", type=int, default=4)
    ap.add_argument("--duration", type=int, default=30, help="seconds a run")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default="/var/tmp", help="where the runs' entries go (the disk measured)")
    ap.add_argument("--name", default="vs_kvcache", help="the table's name under results/benchmarks/")
    args = ap.parse_args()
    with open(args.reference, "rb") as f:
        reference_sha = hashlib.sha256(f.read()).hexdigest()
    generation = reference_generation_mib_s(args)
    runs: dict[str, list[dict]] = {side: [] for side in SIDES}
    for repeat in range(args.repeats):
        for side in SIDES:
            directory = tempfile.mkdtemp(prefix="gdsbench-vs-kvcache-", dir=args.dir)
            try:
                drop_caches()
                runs[side].append(run_reference(args, directory) if side == "reference"
                                  else run_gdsbench(args, directory, side))
            finally:
                shutil.rmtree(directory, ignore_errors=True)
            print(repeat, side, json.dumps(runs[side][-1]), flush=True)
    rows = []
    for name, unit, figure in FIGURES:
        ref = [figure(r) for r in runs["reference"]]
        row = [name, unit, shown(ref)]
        for side in SIDES[1:]:
            ours = [figure(r) for r in runs[side]]
            row += [shown(ours), f"{median(ours) / median(ref):.2f}"]
        rows.append(row)
    header = ["figure", "unit", "reference: median (range)", "gdsbench O_DIRECT", "/ reference", "gdsbench buffered",
              "/ reference"]
    users = f"{args.users} user{'s' if args.users != 1 else ''}"
    notes = [f"{args.model}, {users}, {args.duration} s a run, --generation-mode none, seed {args.seed}, "
             f"no GPU or host-memory tier (every entry to storage, under {args.dir}); {args.repeats} repeats, the "
             "three sides in turn, the page cache dropped before each run.",
             f"The reference: kv-cache.py, sha256 {reference_sha[:16]}..., run by {args.reference_python}.",
             "Both run the same users from the seed, each request's bytes by the same arithmetic (the tests check "
             "gdsbench's), but not the same mix of requests in the duration: the reference's users are open loop "
             "(each queues its next request without waiting for the last, and its workers serve the queue by QoS "
             "priority), gdsbench's wait for each request, so with several users the two finish different shares "
             "of each user's requests and the shape rows differ; with one user they come from one user's draws.",
             f"The reference makes each entry's data before writing it (uniform float64 cast to float16), at "
             f"{generation:,.0f} MiB/s on this machine (measured by this script, best of 3): outside its timed "
             "write, but inside each request, so it bounds the reference's request rate and tokens a second.",
             "The reference counts every operation it did by the end, gdsbench each that ended within the duration "
             "(its requests and tokens: those that ended within it).",
             "Latency rows are the storage's own time: the reference's np.save + fsync and np.load (its 'device' "
             "figures), gdsbench's engine time (first chunk issued to last landed, fsync included)."]
    raw = {"runs": runs, "reference_sha256": reference_sha, "settings": vars(args),
           "reference_generation_mib_s": generation}
    write_outputs(args.name, "gdsbench kvcache against MLPerf Storage v3.0's KV-cache benchmark",
                  markdown_table(header, rows), notes, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
