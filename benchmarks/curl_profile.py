#!/usr/bin/env python3
"""Where the curl engine's CPU goes, beside curl's own: both read the same object from nginx over
loopback, in the same ranges with the same requests in flight (vs_clients' curl command), each
under `perf record` (cpu-clock samples at FREQUENCY Hz), alternating the TOOLS (gdsbench at its default
receive buffer and at --recv-buffer 512K, then curl; then each with a thread or process on every core, where
the row has that many requests in flight), ...

Each sample is put in one part by its symbol and library:

    kernel: socket copy      the kernel copying received bytes to user memory (recv's _copy_to_iter)
    kernel: the rest         TCP, softirqs, syscalls, scheduling
    copy into memory         glibc's memcpy/memmove in user space, and gdsbench's streaming copy
                             (native/copy.hpp's copy_streaming): gdsbench's one copy out of libcurl's
                             buffer into the request's own (curl -o /dev/null writes into /dev/null and
                             copies nothing there)
    libcurl                  libcurl itself (HTTP parsing, its multi loop)
    the tool                 gdsbench's native engine, or curl's CLI
    other                    everything else (libc's other calls, OpenSSL, ...)

and each part is given in CPU-seconds per GB read: its samples / FREQUENCY over the gigabytes. Only
the samples of gdsbench's worker threads (gds-worker-N) count: its Python start-up and teardown are
outside its measured window, as curl's start-up (a few ms) is inside its whole process. The figure
in each cell is the median over the repeats.

    .venv/bin/python benchmarks/curl_profile.py           # about 2 minutes, as root (perf)
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402
import vs_clients  # noqa: E402
from common import markdown_table, median, write_outputs  # noqa: E402

import gdsbench  # noqa: E402

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
FREQUENCY = 4999  # samples a second of CPU (perf's cpu-clock: no hardware counters in this VM)
OBJECT, READ = GiB, 2 * GiB  # nginx's object (in /dev/shm: no disk), what each run reads (the object twice over)
ROWS = [(4 * MiB, 1), (4 * MiB, 8), (64 * KiB, 8)]  # (range, in flight)
# Each tool: its name in the table, the client vs_clients runs, and its extra flags. gdsbench twice: its
# default receive buffer and the 512 KiB it asked for until libcurl's per-transfer buffer was seen refaulted;
# then gdsbench and curl each spread over the cores (vs_clients' gdsbench-threads and curl-procs), in the rows
# that have a request in flight for every core
TOOLS = {"gdsbench": ("gdsbench", []), "gdsbench --recv-buffer 512K": ("gdsbench", ["--recv-buffer", "512K"]),
         "curl": ("curl", []), "gdsbench, a thread a core": (vs_clients.THREADS, []),
         "curl, a process a core": (vs_clients.PROCS, [])}
PARTS = ["kernel: socket copy", "kernel: the rest", "copy into memory", "libcurl", "the tool", "other"]
KERNEL_COPIES = ("_copy_to_iter", "copy_user_enhanced_fast_string", "copy_user_generic", "rep_movs_alternative",
                 "copyout", "__copy_user")


def part_of(dso: str, symbol: str) -> str:
    """The part a sample falls in, from perf's library (dso) and symbol columns."""
    if symbol.startswith("[k]"):
        return "kernel: socket copy" if any(c in symbol for c in KERNEL_COPIES) else "kernel: the rest"
    if ("libc.so" in dso and ("memmove" in symbol or "memcpy" in symbol)) or "copy_streaming" in symbol:
        return "copy into memory"
    if "libcurl" in dso:
        return "libcurl"
    if "_native" in dso or os.path.basename(dso) == "curl":
        return "the tool"
    return "other"


def samples_by_part(perf_data: str, threads_named: str) -> collections.Counter:
    """Samples in each part, of the threads whose name starts with threads_named."""
    out = subprocess.run(["perf", "report", "-i", perf_data, "--no-children", "--stdio", "-g", "none",
                          "--percent-limit", "0", "--sort", "comm,dso,sym", "-F", "sample,comm,dso,sym", "-t", "|"],
                         capture_output=True, text=True, check=True).stdout
    parts: collections.Counter = collections.Counter()
    for line in out.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if line.startswith("#") or len(fields) < 4 or not fields[0].isdigit():
            continue
        if fields[1].startswith(threads_named):
            parts[part_of(fields[2], fields[3])] += int(fields[0])
    return parts


def profiled(argv: list[str], perf_data: str) -> subprocess.CompletedProcess:
    return subprocess.run(["perf", "record", "-q", "-F", str(FREQUENCY), "-o", perf_data, "--", *argv],
                          capture_output=True, text=True)


def one_run(tool: str, argv: list[str], work: str) -> dict:
    """One profiled run of one tool (a TOOLS name) by its vs_clients command: CPU-seconds per GB in each part."""
    client, extra = TOOLS[tool]
    data = os.path.join(work, "run.perf")
    res = profiled(argv + extra, data)
    if res.returncode:
        sys.exit(f"{tool} failed: {res.stderr.strip()[-300:]}")
    read = vs_clients.bytes_read(client, res.stdout, READ)
    if read != READ:
        sys.exit(f"{tool} read {read} bytes of {READ}")
    parts = samples_by_part(data, "gds-worker-" if client.startswith("gdsbench") else "curl")
    gb = READ / 1e9
    return {part: parts[part] / FREQUENCY / gb for part in PARTS} | {"total": sum(parts.values()) / FREQUENCY / gb}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if not shutil.which("perf"):
        sys.exit("perf is not installed (apt-get install linux-perf)")
    work = tempfile.mkdtemp(prefix="gdsbench-curl-profile-")
    shm = tempfile.mkdtemp(prefix="gdsbench-curl-profile-", dir="/dev/shm")
    gdsbench.prepare(os.path.join(shm, "data.dat"), OBJECT)
    proc, base = servers.nginx(shm, work)
    url = f"{base}/data.dat"
    table, raw = [], {"frequency_hz": FREQUENCY, "read_bytes": READ, "rows": []}
    try:
        for bs, qd in ROWS:
            commands = {}  # of the tools that read this row, each in a folder of its own (its curl configs)
            for i, (tool, (client, _)) in enumerate(TOOLS.items()):
                os.makedirs(folder := os.path.join(work, f"tool{i}"), exist_ok=True)
                made = vs_clients.command(client, url, "", bs, qd, READ, OBJECT, folder)
                if not isinstance(made, str):  # a string: why it does not read this row
                    commands[tool] = (made[0], folder)
            runs: dict[str, list[dict]] = {tool: [] for tool in commands}
            for _ in range(args.repeats):
                for tool, (argv, folder) in commands.items():
                    runs[tool].append(one_run(tool, argv, folder))
            for tool, got in runs.items():
                cells = {k: median([r[k] for r in got]) for k in ["total", *PARTS]}
                table.append([f"{bs // KiB} KiB" if bs < MiB else f"{bs // MiB} MiB", qd, tool,
                              *(f"{cells[k]:.3f}" for k in ["total", *PARTS])])
                raw["rows"].append({"range": bs, "in_flight": qd, "tool": tool, "runs": got})
                print(" | ".join(str(c) for c in table[-1]), flush=True)
    finally:
        servers.stop(proc)
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    header = ["range", "in flight", "tool", "CPU-s/GB (sampled)", *(f"{p} (CPU-s/GB)" for p in PARTS)]
    notes = [f"{args.repeats} runs per tool and row, alternated ({', '.join(TOOLS)}, ...), each reading "
             f"{READ // GiB} GiB of a {OBJECT // GiB} GiB object nginx serves from /dev/shm; perf's cpu-clock "
             f"samples at {FREQUENCY} Hz, gdsbench's worker threads and curl's process.",
             "'copy into memory': glibc's memcpy/memmove and gdsbench's streaming copy (copy_streaming, where the "
             "requests in flight outgrow half the last-level cache), in gdsbench the copy of every byte out of libcurl's "
             "buffer into the request's own buffer, where the data must land; curl writes its bytes to "
             "/dev/null, which keeps none, so it has no such copy.",
             "Parts by symbol: the kernel's copy to user memory (_copy_to_iter and its kin), the rest of the "
             "kernel, glibc's memcpy/memmove, libcurl, the tool's own code (gdsbench's _native module, curl's "
             "CLI), and everything else."]
    write_outputs("curl_profile", "Where the curl engine's CPU goes, beside curl's", markdown_table(header, table),
                  notes, raw, tools=("curl", "nginx"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
