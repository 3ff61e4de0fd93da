#!/usr/bin/env python3
"""gdsbench train against DLIO 2.0 itself, on the same files.

DLIO (MLPerf Storage's emulator) runs unet3d_h100 scaled down through
../shared/dlio/run_unet3d.sh: its own npz files, its own PyTorch data loader,
MPI ranks as accelerators. gdsbench train reads the same files (a directory
without a manifest: every file one sample, read whole), with the same batch,
read threads, prefetch, compute time and accelerator counts, buffered as
DLIO reads them, the page cache dropped before every run.

The storage must be the bottleneck for the two to be comparable, so the disk
is slowed with the blkio throttle (--throttle-mib, default 100 MiB/s): a real
slower tier. Runs alternate DLIO, gdsbench, DLIO, ... for each count; each
figure is the median of --repeats runs. A count is judged where DLIO's own
runs agree with each other (spread within the tolerance): AU within 5 points
and throughput within 10%. One more pair, unthrottled at the largest count,
shows what DLIO measures on this 2-core host when the storage is fast.

    bash ../shared/dlio/setup.sh /tmp/dlio-venv     # once (about 70 s)
    .venv/bin/python benchmarks/vs_dlio.py         # about 20 minutes, as root
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Throttle, drop_caches, markdown_table, median, write_outputs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(ROOT, "..", "shared", "dlio", "run_unet3d.sh")
AU_POINTS, THROUGHPUT = 5.0, 0.10  # the targets
RUN_LIMIT_S = 600
STDEV_SHARE = 68341808 / 146600628  # unet3d_h100's record_length_stdev / record_length, as the recipe scales it


def timed(cmd: list[str], env: dict | None = None) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run (at most RUN_LIMIT_S); (the process, wall seconds, CPU seconds of it and everything it started)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=RUN_LIMIT_S)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{cmd[0]} ... ran past {RUN_LIMIT_S} s (a DLIO rank that failed leaves the others "
                         "waiting at its barrier): see its train.log") from None
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc, wall, cpu


def dlio(args, throttle: Throttle, ranks: int) -> dict:
    env = dict(os.environ, VENV=args.venv, OUT_ROOT=os.path.join(args.data, "out"), DROP_CACHE="1")
    cmd = ["bash", RECIPE, os.path.join(args.data, "dataset"), str(ranks), str(args.compute), str(args.record),
           str(args.files), "4"]
    proc, wall, cpu = timed(throttle.wrap(cmd), env)
    if proc.returncode:
        raise SystemExit(f"DLIO failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"au": out["au_percent"], "mib_per_s": out["mib_per_s"], "wall_s": wall, "cpu_s": cpu, "raw": out}


def gdsbench(args, throttle: Throttle, ranks: int) -> dict:
    drop_caches()
    cmd = [sys.executable, "-m", "gdsbench", "train", os.path.join(args.data, "dataset", "train"), "--workload", "unet3d",
           "--record-bytes", str(args.record), "--record-stdev", str(int(args.record * STDEV_SHARE)), "--batch", "7",
           "--read-threads", "4", "--compute-time", f"{args.compute}s", "--accelerators", str(ranks), "--buffered",
           "--allow-cached", "--results", os.path.join(args.data, "gdsbench-runs"), "--json"]
    proc, wall, cpu = timed(throttle.wrap(cmd))
    if proc.returncode:
        raise SystemExit(f"gdsbench train failed:\n{proc.stderr[-3000:]}")
    row = json.loads(proc.stdout)[0]
    return {"au": row["au_percent"], "mib_per_s": row["mib_per_s"], "wall_s": wall, "cpu_s": cpu,
            "raw": {k: row[k] for k in ("au_percent", "mib_per_s", "read_mib_per_s", "samples_per_s", "steps_per_epoch",
                                        "cached_fraction", "straggler_mean_s", "wait_p99_s")}}


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) if values else float("nan")


def judge(d: list[dict], g: list[dict]) -> tuple[str, str]:
    """(verdict, why): PASS/FAIL where DLIO's own runs agree within the tolerance, else NOISE."""
    d_au, g_au = median([x["au"] for x in d]), median([x["au"] for x in g])
    d_mb, g_mb = median([x["mib_per_s"] for x in d]), median([x["mib_per_s"] for x in g])
    own = spread([x["au"] for x in d])
    own_mb = spread([x["mib_per_s"] for x in d]) / d_mb if d_mb else float("inf")
    ok = abs(g_au - d_au) <= AU_POINTS and abs(g_mb / d_mb - 1) <= THROUGHPUT
    if own > 2 * AU_POINTS or own_mb > 2 * THROUGHPUT:
        return "NOISE", f"DLIO's own runs spread by {own:.1f} points of AU and {own_mb:.0%} of throughput"
    return ("PASS" if ok else "FAIL"), ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--venv", default="/tmp/dlio-venv", help="DLIO's virtual environment (../shared/dlio/setup.sh)")
    ap.add_argument("--data", default="/root/dlio-vs-gdsbench", help="where the dataset and DLIO's output go")
    ap.add_argument("--record", type=int, default=2 * 1024 * 1024, help="mean sample (file) size in bytes")
    ap.add_argument("--files", type=int, default=1120)
    ap.add_argument("--compute", type=float, default=0.35, help="compute seconds per step")
    # DLIO 2.0 needs counts that divide the samples: with 1120 files and 3 ranks, the last rank's share
    # (ceil(1120 / 3) = 374 indexes) runs past the end, it dies with an IndexError and the others wait forever
    ap.add_argument("--counts", default="1,2,4,5")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--throttle-mib", type=int, default=100)
    ap.add_argument("--no-unthrottled", action="store_true", help="skip the unthrottled pair")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.venv, "bin", "dlio_benchmark")):
        raise SystemExit(f"no DLIO at {args.venv}: run `bash ../shared/dlio/setup.sh {args.venv}` first")
    os.makedirs(args.data, exist_ok=True)
    counts = [int(x) for x in args.counts.split(",")]
    raw: dict = {"args": vars(args), "counts": {}}
    rows = []
    with Throttle(args.data, args.throttle_mib * 1024 * 1024, "vs-dlio") as throttle:
        for n in counts:
            d, g = [], []
            for _ in range(args.repeats):  # A B A B: drift falls on both
                d.append(dlio(args, throttle, n))
                g.append(gdsbench(args, throttle, n))
                print(f"{n} accelerators: DLIO AU {d[-1]['au']:.1f}% {d[-1]['mib_per_s']:.0f} MiB/s; gdsbench AU "
                      f"{g[-1]['au']:.1f}% {g[-1]['mib_per_s']:.0f} MiB/s", file=sys.stderr, flush=True)
            verdict, why = judge(d, g)
            raw["counts"][n] = {"dlio": d, "gdsbench": g, "verdict": verdict, "why": why}
            d_mb, g_mb = median([x["mib_per_s"] for x in d]), median([x["mib_per_s"] for x in g])
            rows.append([n, f"{median([x['au'] for x in d]):.1f} ({spread([x['au'] for x in d]):.1f})",
                         f"{median([x['au'] for x in g]):.1f} ({spread([x['au'] for x in g]):.1f})",
                         f"{median([x['au'] for x in g]) - median([x['au'] for x in d]):+.1f}",
                         f"{d_mb:.0f}", f"{g_mb:.0f}", f"{g_mb / d_mb:.3f}",
                         f"{median([x['cpu_s'] for x in d]):.0f} / {median([x['cpu_s'] for x in g]):.0f}",
                         verdict + (f": {why}" if why else "")])
    if not args.no_unthrottled:
        with Throttle(args.data, None, "none") as fast:
            n = counts[-1]
            d, g = dlio(args, fast, n), gdsbench(args, fast, n)
            raw["unthrottled"] = {"accelerators": n, "dlio": d, "gdsbench": g}
            rows.append([f"{n}, unthrottled", f"{d['au']:.1f}", f"{g['au']:.1f}", f"{g['au'] - d['au']:+.1f}",
                         f"{d['mib_per_s']:.0f}", f"{g['mib_per_s']:.0f}", f"{g['mib_per_s'] / d['mib_per_s']:.3f}",
                         f"{d['cpu_s']:.0f} / {g['cpu_s']:.0f}", "not judged: the disk is not the bottleneck"])
    table = markdown_table(["accelerators", "DLIO AU % (range)", "gdsbench AU % (range)", "AU difference (points)",
                            "DLIO MiB/s", "gdsbench MiB/s", "ratio", "CPU-s DLIO / gdsbench", "verdict"], rows)
    notes = [f"unet3d_h100 scaled: {args.files} files of {args.record / 2**20:.1f} MiB (sd {STDEV_SHARE:.3f} of the "
             f"mean, as the recipe scales it), batch 7, 4 read threads, compute {args.compute} s per step, 1 epoch; "
             f"the disk throttled to {args.throttle_mib} MiB/s (blkio) unless the row says otherwise",
             "both read the same DLIO-generated files, buffered, after `echo 3 > /proc/sys/vm/drop_caches`",
             f"targets: AU within {AU_POINTS:.0f} points, throughput (DLIO's MiB/s: samples/s x record size) within "
             f"{THROUGHPUT:.0%}; medians of {args.repeats} runs each, alternated DLIO, gdsbench, ...",
             "NOISE: DLIO's own runs spread by more than twice the tolerance, so it cannot tell",
             "CPU-s: the whole process tree of each run (DLIO: mpirun, its ranks and their data-loader workers)"]
    md, _ = write_outputs("vs_dlio", "gdsbench train against DLIO 2.0 (unet3d, scaled)", table, notes, raw)
    print(open(md).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
