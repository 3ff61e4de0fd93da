#!/usr/bin/env python3
"""Writes over a file protocol: gdsbench (`run URL --rw write`) against the client a user would
otherwise write a file with, into the same server on loopback, the same bytes, from memory:

    smb      gdsbench's smb engine (libsmbclient, one request in flight)  vs  smbclient's `put`,
             into Samba's smbd
    webdav   gdsbench's curl engine (one PUT of the whole file)            vs  curl's `-T` (a PUT),
             into nginx (dav_methods PUT)
    ftp      gdsbench's curl engine (one STOR of the whole file)           vs  curl's `-T` (a STOR),
             into vsftpd (anonymous uploads over files of its ftp user)
    nfs      gdsbench's nfs engine (libnfs, 1 MiB WRITEs one at a time,   vs  libnfs's own `nfs-cp`
             then a COMMIT: --fsync-end)                                       (the same), into
             nfs-ganesha over NFSv3, the server on one namespaced host and the clients on another
             (tests/hosts.py: NFSv3 needs rpcbind's port 111), so the bytes cross a veth pair

Timing, the same for both clients of a protocol: each run is a process of its own that first sets
up untimed, then times one call that writes the whole file: gdsbench plans its job untimed (the
look at the file, which reads all of it to know it is gdsbench's) and times execute() in the
process; the other client's process is timed whole. Each has fixed costs that are not the writing
(a connection, a login), so, as vs_clients.py and vs_s3_writes.py do, beside each run the same
client writes a file of one 4 MiB part timed the same way, and a client's figure is (the file's
bytes - one part) over (its call's seconds - the median of its one-part calls'). Clients
alternate, the order swapped each repeat; the verdict is on the paired ratios
(stats.paired_verdict), target gdsbench at least 0.95 of the other. gdsbench's plan reads its
file whole through the server before writing it (to know it is its own); the other client's file
is read whole first too, untimed, so both servers replace a file held in the page cache. The servers' writes land in
this host's page cache (no sync asked): the figure is the protocol's and the clients', not the
disk's. After the runs gdsbench's file is read back with --verify.

    .venv/bin/python benchmarks/vs_protocol_writes.py            # about 4 minutes
    .venv/bin/python benchmarks/vs_protocol_writes.py --quick
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))  # the hosts the tests make (tests/hosts.py)

import servers  # noqa: E402
import stats  # noqa: E402
from common import markdown_table, median, write_outputs  # noqa: E402
from hosts import Hosts, serve_nfs3  # noqa: E402

MiB = 1 << 20
PART = 4 * MiB
PROTOCOLS = {  # protocol: (the other client, gdsbench's --bs for a file of `size`: None means the whole file)
    "smb": ("smbclient", PART),
    "webdav": ("curl", None),
    "ftp": ("curl", None),
    "nfs": ("nfs-cp", MiB),
}
# How a protocol's runs are timed (see the top): "call", each client's whole call less its one-part
# calls' median; "request", each client's own clock around its one request (a whole-file PUT)
TIMING = {"smb": "call", "webdav": "request", "ftp": "request", "nfs": "call"}
NEW_FILE = {"nfs"}  # the other client makes its file new (nfs-cp opens O_EXCL): a new name each run, removed after


def one_gdsbench(url: str, size: int, bs: int) -> tuple[float, float]:
    """In this process: plan the write untimed, then time execute(): (its seconds, its own measured
    window's: the requests' first issue to their last answer). Over NFS the writes end with a COMMIT,
    as nfs-cp's close sends one."""
    from gdsbench.execution.runner import execute, plan
    from gdsbench.job.spec import spec_from_values

    planned = plan(spec_from_values({"path": url, "rw": "write", "bs": bs, "io_size": size,
                                     "fsync_end": url.startswith("nfs://")}))
    t0 = time.perf_counter()
    result = execute(planned, record_environment=False)
    seconds = time.perf_counter() - t0
    if result is None or result.bytes != size:
        raise SystemExit(f"gdsbench wrote {getattr(result, 'bytes', 0)} of {size} bytes")
    return seconds, result.elapsed_ns / 1e9


def file_url(base: str, name: str) -> str:
    """A file's URL under a server's base URL (an NFS one's with libnfs's argument for NFSv3)."""
    return f"{base}/{name}?version=3" if base.startswith("nfs://") else f"{base}/{name}"


def other_argv(protocol: str, base: str, name: str, source: str) -> list[str]:
    if protocol == "nfs":
        return ["nfs-cp", source, file_url(base, name)]
    if protocol == "smb":
        host, port = base[len("smb://"):].split("/")[0].split(":")
        return ["smbclient", f"//{host}/share", "-p", port, "-U", f"root%{servers.SMB_PASSWORD}", "-c",
                f"put {source} {name}"]
    return ["curl", "-sS", "--fail", "-o", "/dev/null", "-w", "%{time_total}", "-T", source, f"{base}/{name}"]


def measure(protocol: str, client: str, base: str, name: str, size: int, source: str, env: dict, on) -> float:
    """One timed write of `size` bytes into the server's file `name`, by one client, in a process of its
    own (on(argv): the command line that runs argv where the clients run): seconds, as the protocol's
    TIMING says."""
    if client == "gdsbench":
        bs = PROTOCOLS[protocol][1] or size
        argv = [sys.executable, os.path.abspath(__file__), "--one", file_url(base, name), "--size", str(size), "--bs",
                str(bs)]
        done = subprocess.run(on(argv), env=env, capture_output=True, text=True, timeout=600)
        if done.returncode:
            raise SystemExit(f"gdsbench failed: {done.stderr.strip()[-1500:]}")
        call, window = (float(x) for x in done.stdout.strip().splitlines()[-1].split())
        return call if TIMING[protocol] == "call" else window
    t0 = time.perf_counter()
    done = subprocess.run(on(other_argv(protocol, base, name, source)), env=env, capture_output=True, text=True,
                          timeout=600)
    seconds = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"{client} failed: {done.stdout.strip()[-500:]} {done.stderr.strip()[-500:]}")
    return seconds if TIMING[protocol] == "call" else float(done.stdout.strip())  # curl's time_total


def read_whole(path: str) -> None:
    """Untimed, before another client's write: its file read whole on the server's machine, as
    gdsbench's plan reads its own file through the server (to know it is gdsbench's) before it
    writes it, so both servers replace a file whose pages are in the page cache. A file replaced
    right after it was read took up to twice as long to PUT, with curl as with gdsbench."""
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass


def net_rates(whole: list[float], one_part: list[float], size: int) -> list[float]:
    """(size - one part) / (seconds - the median one-part seconds), per whole run: MiB/s; with no
    one-part runs (a protocol timed by request), size / seconds."""
    if not one_part:
        return [size / MiB / max(s, 1e-9) for s in whole]
    fixed = median(one_part)
    return [(size - PART) / MiB / max(s - fixed, 1e-9) for s in whole]


def measure_protocol(protocol: str, args, work: str, sources: dict[int, str]) -> dict:
    """Every repeat of both clients of one protocol: {client: {"whole": [...], "one_part": [...]}}."""
    from gdsbench.system.prepare import prepare

    folder = os.path.join(work, protocol)
    os.makedirs(folder)
    for name, size in (("g.dat", args.size), ("g-one.dat", PART), ("c.dat", args.size), ("c-one.dat", PART)):
        prepare(os.path.join(folder, name), size)  # gdsbench writes only into files it made; the other's alike
    server_work = os.path.join(work, f"{protocol}-server")
    os.makedirs(server_work)
    with contextlib.ExitStack() as stack:
        if protocol == "nfs":  # the server on h2, the clients on h1
            hosts = stack.enter_context(Hosts(2))  # ganesha and rpcbind end with the hosts
            base, on = serve_nfs3(hosts, "h2", folder, server_work)[1], lambda argv: hosts.on("h1", *argv)
        else:
            start = {"smb": servers.smbd, "webdav": servers.nginx, "ftp": servers.vsftpd}[protocol]
            proc, base = start(folder, server_work, writable=True)
            stack.callback(servers.stop, proc)
            on = list
        return measure_runs(protocol, args, folder, base, on, sources)


def measure_runs(protocol: str, args, folder: str, base: str, on, sources: dict[int, str]) -> dict:
    """The repeats of measure_protocol, against a server at base."""
    other = PROTOCOLS[protocol][0]
    env = dict(os.environ, USER=f"root%{servers.SMB_PASSWORD}")
    runs = {c: {"whole": [], "one_part": []} for c in ("gdsbench", other)}
    for repeat in range(args.repeats):
        for client in (("gdsbench", other) if repeat % 2 == 0 else (other, "gdsbench")):
            calls = [("whole", "g.dat" if client == "gdsbench" else "c.dat", args.size)]
            if TIMING[protocol] == "call":
                calls.append(("one_part", "g-one.dat" if client == "gdsbench" else "c-one.dat", PART))
            for kind, name, size in calls:
                os.sync()  # untimed: the last run's dirty pages written back first, not during this one
                new = client != "gdsbench" and protocol in NEW_FILE
                if new:  # a name not used before: one removed behind the server's back may still be in its cache
                    name = name.replace(".dat", f"-{repeat}.dat")
                elif client != "gdsbench":  # the same history: gdsbench's plan reads its file whole first
                    read_whole(os.path.join(folder, name))
                runs[client][kind].append(measure(protocol, client, base, name, size, sources[size], env, on))
                if new:
                    os.unlink(os.path.join(folder, name))  # untimed: its room back before the next run
            print(f"{protocol} repeat {repeat} {client}: {runs[client]['whole'][-1]:.3f} s", file=sys.stderr,
                  flush=True)
    check = subprocess.run(on([sys.executable, "-m", "gdsbench", "run", file_url(base, "g.dat"), "--verify",
                               "--io-size", str(args.size)]), env=env, capture_output=True, text=True, timeout=600)
    if check.returncode:  # what gdsbench wrote is read back, every block checked
        raise SystemExit(f"gdsbench's file did not read back whole: {check.stderr.strip()[-500:]}")
    return runs


def table_rows(protocol: str, runs: dict, size: int) -> list[list]:
    other = PROTOCOLS[protocol][0]
    rates = {c: net_rates(runs[c]["whole"], runs[c]["one_part"], size) for c in runs}
    verdict = stats.paired_verdict([a / b for a, b in zip(rates["gdsbench"], rates[other])], 0.95)
    return [[protocol, c, TIMING[protocol], f"{median(rates[c]):.0f} ({min(rates[c]):.0f}-{max(rates[c]):.0f})",
             f"{median(runs[c]['whole']):.3f}", f"{median(runs[c]['one_part']):.3f}" if runs[c]["one_part"] else "",
             (f"{verdict['median']:.2f} of {other} ({verdict['interval'][0]:.2f}-{verdict['interval'][1]:.2f}, "
              f"{verdict['interval_is']}): {verdict['verdict']}") if c == "gdsbench" else ""]
            for c in ("gdsbench", other)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--size", type=int, default=1024 * MiB)
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--bs", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(*one_gdsbench(args.one, args.size, args.bs), flush=True)
        return 0
    if args.quick:
        args.repeats, args.size = 2, 64 * MiB
    protocols = [p for p in args.protocols.split(",") if p]
    rows, raw = [], {"size": args.size, "runs": {}}
    with tempfile.TemporaryDirectory(prefix="vs-protocol-writes-") as work, \
            tempfile.TemporaryDirectory(prefix="vs-protocol-writes-", dir="/dev/shm") as shm:
        sources = {}
        for name, size in (("src.dat", args.size), ("src-one.dat", PART)):
            sources[size] = os.path.join(shm, name)
            with open(sources[size], "wb") as f:
                f.write(os.urandom(size))
        for protocol in protocols:
            raw["runs"][protocol] = measure_protocol(protocol, args, work, sources)
            rows += table_rows(protocol, raw["runs"][protocol], args.size)
    header = ["protocol", "client", "timed by", "MiB/s median (min-max)", "whole s (median)", "one-part call s (median)",
              "gdsbench vs the other: median ratio (interval): verdict"]
    notes = [f"A {args.size // MiB} MiB file written whole into each server (a folder on this machine's disk, writes "
             f"into its page cache) on loopback, {args.repeats} repeats a client, alternating, the order swapped each "
             "repeat, each client over a file of its own that `gdsbench prepare` made (the same size, the same "
             "history), from memory (/dev/shm for the other client); before each run, untimed, sync(2) writes back "
             "what the last one left dirty (an earlier run without it had each repeat's first PUT pay for the last "
             "one's writeback); and, untimed, the other client's file is read whole on this machine first, as "
             "gdsbench's plan reads its own through the server before it writes it (a file replaced right after it "
             "was read took up to twice as long to PUT, with curl as with gdsbench).",
             "smb: gdsbench --bs 4M, one request in flight (libsmbclient's calls are synchronous), against smbclient's "
             "put (its own request sizes) into Samba's smbd. webdav: gdsbench one PUT of the whole file (--bs its size) "
             "against curl -T into nginx (dav_methods PUT). ftp: gdsbench one STOR of the whole file against curl -T "
             "into vsftpd (anonymous, passive mode). nfs: gdsbench --bs 1M, one request in flight, then a COMMIT "
             "(--fsync-end), against libnfs's nfs-cp (1 MiB WRITEs one at a time, a COMMIT when it closes), into "
             "nfs-ganesha over NFSv3 (UNSTABLE writes), the server on one namespaced host and the clients on another "
             "(tests/hosts.py), across a veth pair; nfs-cp makes its file new (it opens O_EXCL), so each of its runs "
             "writes a new name, removed after the run, untimed, where gdsbench writes over its own.",
             "Timed by call (smb, nfs): gdsbench's execute() of a job planned untimed (the plan reads the whole file to know "
             "it is gdsbench's), in its own process; the other client's process whole. Each client's one-part call "
             "(4 MiB) median is taken out as fixed costs: a figure is (bytes - 4 MiB) / (seconds - that median).",
             "Timed by request (webdav, ftp): each client's own clock around its one PUT or STOR (gdsbench's measured "
             "window, from the request's issue to its answer's end; curl's time_total, its connection and FTP's "
             "login included). gdsbench's call "
             "also fills a buffer of the whole object with its pattern before the PUT, a cost that grows with the "
             "object, so the one-part rule cannot take it out; that cost is not in either figure.",
             "After the runs gdsbench's file is read back with --verify, every block checked.",
             "Verdict: stats.paired_verdict on gdsbench / the other client paired by repeat; PASS at 0.95 or more."]
    write_outputs("vs_protocol_writes" + ("-quick" if args.quick else ""), "Writes over SMB, WebDAV, FTP and NFS: "
                  "gdsbench against smbclient, curl and nfs-cp", markdown_table(header, rows), notes, raw,
                  tools=("samba", "nginx", "vsftpd", "curl", "nfs-ganesha", "libnfs"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
