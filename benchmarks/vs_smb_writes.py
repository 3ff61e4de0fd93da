#!/usr/bin/env python3
"""SMB writes: gdsbench's smb engine (`run smb://... --rw write`, libsmbclient, one request in
flight) against smbclient's `put`, the client a user would otherwise write a file with, into the
same Samba smbd on loopback, the same bytes, from memory:

    gdsbench    gdsbench.execution.runner's execute() of a planned write job: --bs 4M, one process
    smbclient   `smbclient //127.0.0.1/share -c 'put /dev/shm/SRC NAME'` (its own request sizes)

Timing, the same for both: each run is a process of its own that first sets up untimed, then
times one call that writes the whole file: gdsbench plans its job untimed (the look at the file,
which reads all of it to know it is gdsbench's) and times execute() in the process; smbclient's
process is timed whole (its start, login and `put`). Each has fixed costs that are not the
writing (a session, a login), so, as vs_clients.py and vs_s3_writes.py do, beside each run the
same client writes a file of one 4 MiB part timed the same way, and a client's figure is (the
file's bytes - one part) over (its call's seconds - the median of its one-part calls'). Clients
alternate, the order swapped each repeat; the verdict is on the paired ratios (stats.paired_verdict),
target gdsbench at least 0.95 of smbclient. smbd's writes land in this host's page cache under the
share (no `strict sync`): the figure is the protocol's and the two clients', not the disk's.

    .venv/bin/python benchmarks/vs_smb_writes.py            # about 3 minutes
    .venv/bin/python benchmarks/vs_smb_writes.py --quick
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import servers  # noqa: E402
import stats  # noqa: E402
from common import markdown_table, median, write_outputs  # noqa: E402

MiB = 1 << 20
PART = 4 * MiB
CLIENTS = ("gdsbench", "smbclient")


def one_gdsbench(url: str, size: int) -> float:
    """In this process: plan the write untimed, then time execute() (seconds)."""
    from gdsbench.execution.runner import execute, plan
    from gdsbench.job.spec import spec_from_values

    planned = plan(spec_from_values({"path": url, "rw": "write", "bs": PART, "io_size": size}))
    t0 = time.perf_counter()
    result = execute(planned, record_environment=False)
    seconds = time.perf_counter() - t0
    if result is None or result.bytes != size:
        raise SystemExit(f"gdsbench wrote {getattr(result, 'bytes', 0)} of {size} bytes")
    return seconds


def measure(client: str, base: str, name: str, size: int, source: str, env: dict) -> float:
    """One timed write of `size` bytes into the share's file `name`, by one client, in a process of its own."""
    if client == "gdsbench":
        argv = [sys.executable, os.path.abspath(__file__), "--one", f"{base}/{name}", "--size", str(size)]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode:
            raise SystemExit(f"gdsbench failed: {done.stderr.strip()[-1500:]}")
        return float(done.stdout.strip().splitlines()[-1])
    host, port = base[len("smb://"):].split("/")[0].split(":")
    argv = ["smbclient", f"//{host}/share", "-p", port, "-U", f"root%{servers.SMB_PASSWORD}", "-c",
            f"put {source} {name}"]
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"smbclient failed: {done.stdout.strip()[-500:]} {done.stderr.strip()[-500:]}")
    return seconds


def net_rates(whole: list[float], one_part: list[float], size: int) -> list[float]:
    """(size - one part) / (seconds - the median one-part seconds), per whole run: MiB/s."""
    fixed = median(one_part)
    return [(size - PART) / MiB / max(s - fixed, 1e-9) for s in whole]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--size", type=int, default=1024 * MiB)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(one_gdsbench(args.one, args.size), flush=True)
        return 0
    if args.quick:
        args.repeats, args.size = 2, 64 * MiB
    from gdsbench.system.prepare import prepare

    runs = {c: {"whole": [], "one_part": []} for c in CLIENTS}
    with tempfile.TemporaryDirectory(prefix="vs-smb-writes-") as work, \
            tempfile.TemporaryDirectory(prefix="vs-smb-writes-", dir="/dev/shm") as shm:
        share = os.path.join(work, "share")
        os.makedirs(share)
        for name, size in (("g.dat", args.size), ("g-one.dat", PART)):
            prepare(os.path.join(share, name), size)  # gdsbench writes only into files it made
        sources = {}
        for name, size in (("src.dat", args.size), ("src-one.dat", PART)):
            sources[size] = os.path.join(shm, name)
            with open(sources[size], "wb") as f:
                f.write(os.urandom(size))
        proc, base = servers.smbd(share, work, writable=True)
        env = dict(os.environ, USER=f"root%{servers.SMB_PASSWORD}")
        try:
            for repeat in range(args.repeats):
                for client in (CLIENTS if repeat % 2 == 0 else CLIENTS[::-1]):
                    for kind, name, size in (("whole", "g.dat" if client == "gdsbench" else "c.dat", args.size),
                                             ("one_part", "g-one.dat" if client == "gdsbench" else "c-one.dat", PART)):
                        runs[client][kind].append(measure(client, base, name, size, sources[size], env))
                    print(f"repeat {repeat} {client}: {runs[client]['whole'][-1]:.3f} s", file=sys.stderr, flush=True)
            check = subprocess.run([sys.executable, "-m", "gdsbench", "run", f"{base}/g.dat", "--verify", "--io-size",
                                    str(args.size)], env=env, capture_output=True, text=True, timeout=600)
            if check.returncode:  # what gdsbench wrote is read back, every block checked
                raise SystemExit(f"gdsbench's file did not read back whole: {check.stderr.strip()[-500:]}")
        finally:
            servers.stop(proc)
    rates = {c: net_rates(runs[c]["whole"], runs[c]["one_part"], args.size) for c in CLIENTS}
    verdict = stats.paired_verdict([a / b for a, b in zip(rates["gdsbench"], rates["smbclient"])], 0.95)
    rows = [[c, f"{median(rates[c]):.0f} ({min(rates[c]):.0f}-{max(rates[c]):.0f})", f"{median(runs[c]['whole']):.3f}",
             f"{median(runs[c]['one_part']):.3f}",
             (f"{verdict['median']:.2f} ({verdict['interval'][0]:.2f}-{verdict['interval'][1]:.2f}, "
              f"{verdict['interval_is']}): {verdict['verdict']}") if c == "gdsbench" else ""] for c in CLIENTS]
    header = ["client", "MiB/s median (min-max)", "whole call s (median)", "one-part call s (median)",
              "gdsbench vs smbclient: median ratio (interval): verdict"]
    notes = [f"A {args.size // MiB} MiB file written whole into Samba's smbd (a share on this machine's disk, writes "
             f"into its page cache) on loopback, {args.repeats} repeats a client, alternating, the order swapped each "
             "repeat. gdsbench: --bs 4M, one request in flight (libsmbclient's calls are synchronous), into a file "
             "`gdsbench prepare` made; smbclient: `put` of a file in /dev/shm, its own request sizes.",
             "Timing: gdsbench's execute() of a job planned untimed (the plan reads the whole file to know it is "
             "gdsbench's), in its own process; smbclient's process whole. Each client's one-part call (4 MiB) median is "
             "taken out as fixed costs (a session, a login): a figure is (bytes - 4 MiB) / (seconds - that median).",
             "After the runs gdsbench's file is read back over SMB with --verify, every block checked.",
             "Verdict: stats.paired_verdict on gdsbench / smbclient paired by repeat; PASS at 0.95 or more."]
    write_outputs("vs_smb_writes" + ("-quick" if args.quick else ""), "SMB writes: gdsbench against smbclient",
                  markdown_table(header, rows), notes, {"size": args.size, "runs": runs, "rates": rates},
                  tools=("samba",))
    return 0


if __name__ == "__main__":
    sys.exit(main())
