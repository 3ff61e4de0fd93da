#!/usr/bin/env python3
"""Local disk against S3 on this machine, as a user compares two tiers: the
same sweep on a file on the disk (O_DIRECT) and on the same file served by
rclone's S3 server on loopback (which reads it from the same disk, through
this host's page cache), then `gdsbench compare`; and `gdsbench train` on one
unet3d-shaped dataset prepared on each, at the same accelerator counts.

The page cache is dropped before each sweep and before each train (root): every
accelerator count is a train of its own, so neither tier's second count reads
what the first left in memory (the S3 server reads through this host's page
cache, so dropping it drops the server's cache too). The trains alternate disk,
S3 and repeat (--repeats, default 3); each row is the median with the min-max
over repeats. gdsbench cannot drop the server's cache between points of the S3
sweep, and says so in every row: its first-read and re-read figures
(first_pass_*, reread_*) show what that cache did.

    .venv/bin/python benchmarks/remote_tier.py      # about 12 minutes, as root
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import drop_caches, markdown_table, median, write_outputs  # noqa: E402
from servers import S3_ENV, rclone, stop  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GDSBENCH = os.path.join(os.path.dirname(sys.executable), "gdsbench")
GRID = ["--bs", "64K,1M,4M", "--qd", "1,8", "--runtime", "3s"]
WORKLOAD = ["--workload", "unet3d", "--files", "128", "--record-bytes", "4M", "--batch", "4", "--compute-time",
            "100ms", "--read-threads", "4"]


def gdsbench(*args, env=None) -> subprocess.CompletedProcess:
    proc = subprocess.run([GDSBENCH, *map(str, args)], env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"gdsbench {' '.join(map(str, args))} failed: {proc.stderr.strip()[-800:]}")
    return proc


def last_run(results: str, name: str) -> str:
    """The newest run folder named NAME (a run id is its start time, then its name; compare pages are not runs)."""
    run_id = re.compile(rf"\d{{8}}-\d{{6}}-{re.escape(name)}")
    runs = sorted(d for d in os.listdir(results) if run_id.fullmatch(d))
    return os.path.join(results, runs[-1])


def train_row(run: str) -> dict:
    with open(os.path.join(run, "points.jsonl")) as f:
        (row,) = map(json.loads, f)
    return row


def spread(rows: list[dict], key: str, fmt: str) -> str:
    """The median and the min-max over repeats, as printed."""
    values = sorted(r[key] for r in rows)
    return f"{median(values):{fmt}} ({values[0]:{fmt}}-{values[-1]:{fmt}})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(ROOT, "results"))
    ap.add_argument("--accelerators", default="1,2,4,8")
    ap.add_argument("--repeats", type=int, default=3, help="trains of each tier and count (default 3)")
    args = ap.parse_args()
    work = os.path.join(ROOT, "results", "scratch", "remote-tier")  # on the disk being compared
    shutil.rmtree(work, ignore_errors=True)
    folder = os.path.join(work, "served")
    os.makedirs(os.path.join(folder, "bucket"))
    local_file = os.path.join(folder, "bucket", "tier.dat")
    gdsbench("prepare", local_file, "--size", "1G")
    server, endpoint = rclone(folder, work)
    env = dict(os.environ, **S3_ENV, AWS_ENDPOINT_URL=endpoint)
    try:
        drop_caches()
        gdsbench("sweep", local_file, *GRID, "--name", "disk", "--results", args.results)
        drop_caches()
        gdsbench("sweep", "s3://bucket/tier.dat", *GRID, "--name", "s3", "--results", args.results, env=env)
        disk, s3 = last_run(args.results, "disk"), last_run(args.results, "s3")
        page = os.path.join(args.results, "compare-disk-vs-s3")
        compared = gdsbench("compare", disk, s3, "--out", page)
        local_set = os.path.join(work, "unet3d")
        gdsbench("prepare", local_set, *WORKLOAD)
        gdsbench("prepare", "s3://bucket/unet3d/", *WORKLOAD, env=env)
        counts = [int(n) for n in args.accelerators.split(",")]
        trained: dict[str, dict[int, list[dict]]] = {"disk": {n: [] for n in counts}, "s3": {n: [] for n in counts}}
        train_results = os.path.join(work, "train-runs")  # one run per count and repeat: the table keeps their rows
        for repeat in range(args.repeats):
            for n in counts:
                for tier, where, run_env in (("disk", local_set, None), ("s3", "s3://bucket/unet3d/", env)):
                    drop_caches()
                    name = f"train-{tier}-{n}-{repeat}"
                    gdsbench("train", where, *WORKLOAD, "--accelerators", n, "--name", name, "--results",
                             train_results, env=run_env)
                    trained[tier][n].append(train_row(last_run(train_results, name)))
    finally:
        stop(server)
        shutil.rmtree(work, ignore_errors=True)
    rows = [[n, spread(trained["disk"][n], "au_percent", ".1f"), spread(trained["disk"][n], "read_mib_per_s", ".0f"),
             spread(trained["s3"][n], "au_percent", ".1f"), spread(trained["s3"][n], "read_mib_per_s", ".0f"),
             f"{median([r['chunk_latency_p50_ns'] for r in trained['s3'][n]]) / 1e6:.2f} / "
             f"{median([r['chunk_latency_p50_ns'] for r in trained['disk'][n]]) / 1e6:.2f}"]
            for n in counts]
    headline = [line for line in compared.stdout.splitlines() if line.strip()]
    notes = [f"sweeps: {os.path.relpath(disk, ROOT)} and {os.path.relpath(s3, ROOT)}; their comparison: "
             f"{os.path.relpath(page, ROOT)}/compare.html", *(f"compare says: {line}" for line in headline[:1]),
             f"train: {' '.join(WORKLOAD)}; each count a train of its own after `echo 3 > /proc/sys/vm/drop_caches`, "
             f"alternating disk and S3, {args.repeats} repeats: median (min-max); chunk p50 is the median over "
             "repeats",
             "rclone reads the object from the same disk, through this host's page cache: after the first read of "
             "a block, the S3 tier serves it from memory (the sweep rows' reread_* figures; the train rows note it)"]
    header = ["accelerators", "disk AU %", "disk MiB/s read", "S3 AU %", "S3 MiB/s read", "chunk p50 ms (S3 / disk)"]
    md, _ = write_outputs("remote_tier", "Local disk against S3 (rclone on loopback) on this machine: train",
                          markdown_table(header, rows), notes,
                          {"train": trained, "repeats": args.repeats, "compare": compared.stdout},
                          tools=("rclone", "boto3", "libcurl"))
    print(markdown_table(header, rows))
    print("\n".join(notes))
    print(f"wrote {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
