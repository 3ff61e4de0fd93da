#!/usr/bin/env python3
"""kill -9 at random moments of a many-process run, of a worker or of the
parent, many times: does anything hang, is anything left behind, does every
run folder a killed sweep leaves still load?

Each trial starts `gdsbench sweep --procs 4 --layout per-proc` (two points
of 1.5 s, so a kill can land in set-up, at the start, while measuring,
while handing over results or while saving), waits a random 0.05-4 s, and
sends SIGKILL to one worker, or to the parent. It then records how long the
run took to end after the kill (a hang is more than 10 s), which processes
outlived it (workers, multiprocessing's resource tracker), the exit code and
error line, and whether `gdsbench.load()` reads the run folder.

    .venv/bin/python benchmarks/kill_stress.py                 # 50 trials, about 4 minutes
    .venv/bin/python benchmarks/kill_stress.py --trials 10
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, write_outputs  # noqa: E402

import gdsbench  # noqa: E402

HANG_S = 10.0


def children_of(pid: int) -> list[int]:
    try:
        return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except OSError:
        return False


def cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline").read()
    except OSError:
        return ""


def trial(base: str, results: str, rng: random.Random, whom: str) -> dict:
    # output to files, not pipes: an orphan holding a pipe open would keep this script waiting
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([sys.executable, "-m", "gdsbench", "sweep", base, "--layout", "per-proc", "--procs", "4",
                             "--bs", "64K,128K", "--runtime", "1.5s", "--results", results, "--no-report"],
                            stdout=subprocess.DEVNULL, stderr=log, text=True)
    delay = rng.uniform(0.05, 4.0)
    time.sleep(delay)
    family = set(children_of(proc.pid))
    workers = [c for c in family if "spawn_main" in cmdline(c)]
    if whom == "worker" and workers:
        victim = rng.choice(workers)
    else:
        victim, whom = proc.pid, "parent"
    try:
        os.kill(victim, signal.SIGKILL)
    except ProcessLookupError:
        pass
    killed = time.monotonic()
    try:
        proc.wait(timeout=HANG_S + 20)
    except subprocess.TimeoutExpired:  # a hang: end it
        family |= set(children_of(proc.pid))
        for p in [proc.pid, *family]:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
    ended_s = time.monotonic() - killed
    log.seek(0)
    err = log.read()
    family |= set(children_of(proc.pid))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(alive(p) for p in family):
        time.sleep(0.1)
    orphans = [p for p in family if alive(p)]
    for p in orphans:
        os.kill(p, signal.SIGKILL)
    loads = "no run folder"
    for run in os.listdir(results):
        try:
            loads = f"{len(gdsbench.load(os.path.join(results, run)))} points"
        except Exception as e:  # noqa: BLE001 - the finding is that it did not load
            loads = f"FAILED: {type(e).__name__}: {e}"
        shutil.rmtree(os.path.join(results, run))
    return {"whom": whom, "delay_s": round(delay, 2), "ended_s": round(ended_s, 2), "exit": proc.returncode,
            "orphans": len(orphans), "hang": ended_s > HANG_S, "loads": loads,
            "error": (err.strip().splitlines() or [""])[-1][:160]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="gdsbench-kill-")
    try:
        base = os.path.join(work, "pp.dat")
        for i in range(4):
            gdsbench.prepare(f"{base}.{i}", 16 << 20)
        results = os.path.join(work, "results")
        os.makedirs(results)
        runs = [trial(base, results, rng, "worker" if i % 2 == 0 else "parent") for i in range(args.trials)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = []
    for whom in ("worker", "parent"):
        mine = [r for r in runs if r["whom"] == whom]
        if not mine:
            continue
        failed_loads = [r for r in mine if r["loads"].startswith("FAILED")]
        rows.append([whom, len(mine), sum(r["hang"] for r in mine), max(r["ended_s"] for r in mine),
                     sum(r["orphans"] for r in mine), len(failed_loads),
                     "PASS" if not any(r["hang"] or r["orphans"] or r in failed_loads for r in mine) else "FAIL"])
    table = markdown_table(["killed", "trials", "hangs (> 10 s)", "longest end after the kill (s)", "orphans",
                            "run folders that did not load", "verdict"], rows)
    notes = ["Each trial: `gdsbench sweep PATH --layout per-proc --procs 4 --bs 64K,128K --runtime 1.5s`, SIGKILL "
             "to one worker or the parent after a random 0.05-4 s (seeded); a run folder left by a killed sweep "
             "must load with gdsbench.load().",
             "Killing a worker must end the run with one error line naming it (exit 3); killing the parent must "
             "leave no worker and no resource tracker behind."]
    print(table + "\n\n" + "\n".join(notes))
    write_outputs("kill_stress", "kill -9 at random moments of a many-process run", table, notes,
                  {"trials": runs}, tools=("mpi",))
    return 0 if all(r[-1] == "PASS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
