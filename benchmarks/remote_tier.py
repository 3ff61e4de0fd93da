#!/usr/bin/env python3
"""Local disk against S3 on this machine, as a user compares two tiers: the
same sweep on a file on the disk (O_DIRECT) and on the same file served by
rclone's S3 server on loopback (which reads it from the same disk, through
this host's page cache), then `gdsbench compare`; and `gdsbench train` on one
unet3d-shaped dataset prepared on each, at the same accelerator counts.

The page cache is dropped before each sweep and each train (root). gdsbench
cannot drop the server's cache between points of the S3 sweep, and says so in
every row: its first-read and re-read figures (first_pass_*, reread_*) show
what that cache did.

    .venv/bin/python benchmarks/remote_tier.py      # about 8 minutes, as root
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import drop_caches, markdown_table, write_outputs  # noqa: E402
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
    runs = sorted(d for d in os.listdir(results) if d.endswith(f"-{name}"))
    return os.path.join(results, runs[-1])


def train_rows(run: str) -> dict[int, dict]:
    with open(os.path.join(run, "points.jsonl")) as f:
        return {r["accelerators"]: r for r in map(json.loads, f)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(ROOT, "results"))
    ap.add_argument("--accelerators", default="1,2,4,8")
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
        trains = {}
        for tier, where, run_env in (("disk", local_set, None), ("s3", "s3://bucket/unet3d/", env)):
            drop_caches()
            gdsbench("train", where, *WORKLOAD, "--accelerators", args.accelerators, "--name", f"train-{tier}",
                     "--results", args.results, env=run_env)
            trains[tier] = last_run(args.results, f"train-{tier}")
    finally:
        stop(server)
        shutil.rmtree(work, ignore_errors=True)
    disk_rows, s3_rows = train_rows(trains["disk"]), train_rows(trains["s3"])
    rows = [[n, f"{disk_rows[n]['au_percent']:.1f} %", f"{disk_rows[n]['read_mib_per_s']:.0f}",
             f"{s3_rows[n]['au_percent']:.1f} %", f"{s3_rows[n]['read_mib_per_s']:.0f}",
             f"{s3_rows[n]['chunk_latency_p50_ns'] / 1e6:.2f} / {disk_rows[n]['chunk_latency_p50_ns'] / 1e6:.2f}"]
            for n in sorted(disk_rows)]
    headline = [line for line in compared.stdout.splitlines() if line.strip()]
    notes = [f"sweeps: {os.path.relpath(disk, ROOT)} and {os.path.relpath(s3, ROOT)}; their comparison: "
             f"{os.path.relpath(page, ROOT)}/compare.html", *(f"compare says: {line}" for line in headline[:1]),
             f"train runs: {os.path.relpath(trains['disk'], ROOT)} and {os.path.relpath(trains['s3'], ROOT)} "
             f"(workload: {' '.join(WORKLOAD)})",
             "rclone reads the object from the same disk, through this host's page cache: after the first read of "
             "a block, the S3 tier serves it from memory (the sweep rows' reread_* figures; the train rows note it)"]
    header = ["accelerators", "disk AU", "disk MiB/s read", "S3 AU", "S3 MiB/s read", "chunk p50 ms (S3 / disk)"]
    md, _ = write_outputs("remote_tier", "Local disk against S3 (rclone on loopback) on this machine: train",
                          markdown_table(header, rows), notes,
                          {"disk": disk_rows, "s3": s3_rows, "compare": compared.stdout},
                          tools=("rclone", "boto3", "libcurl"))
    print(markdown_table(header, rows))
    print("\n".join(notes))
    print(f"wrote {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
