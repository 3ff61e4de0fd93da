"""One job, many processes: split into parts, started together behind a
barrier, aggregated exactly (as IOR does).

A part is what one process (a local process, or an MPI rank) reads: its own
region of a shared file, the whole shared region, or its own file. Every part
runs the native core with a barrier just before its start gate; the parts'
results are aggregated as:

    bytes, reads, CPU      summed
    bandwidth              total bytes / (latest end - earliest start)
    latency percentiles    from the summed histograms (exact, never averaged)
    per-process figures    kept in Result.procs

Runs line up on CLOCK_REALTIME taken at each part's start gate (across hosts
this relies on synchronised clocks, as IOR's aggregation does). This module
runs local processes; mpi.py runs ranks with the same parts and aggregation.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import resource
import signal
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _native, errors, pagecache
from .errors import GdsbenchError, IoFailure, UsageError
from .spec import JobSpec
from .target import Target, check_direct, disk_dir, inspect, pci_placement
from .units import format_size

POLL_CONTINUE, POLL_CANCEL, POLL_STONEWALL = 0, 1, 2
FAILURE_GRACE_S = 5.0  # how long the others get to stop after one part fails


@dataclass(frozen=True)
class Part:
    index: int  # process or rank
    spec: JobSpec  # resolved, procs=1: what this process runs
    target: Target | None


def part_specs(spec: JobSpec, nparts: int, shift: int = 1) -> list[JobSpec]:
    """The job each of nparts processes runs. `shift` is whose data a part
    reads with --reorder: the part `shift` further on (IOR's -C uses the
    number of tasks per node, so each reads what another host wrote)."""
    gpus = spec.gpu.split(",")
    out = []
    for p in range(nparts):
        source = (p + shift) % nparts if spec.reorder else p
        path, offset, seed = spec.path, spec.offset, spec.seed
        if spec.layout == "shared":
            offset = spec.offset + source * spec.size
        elif spec.layout == "per-proc":
            path = f"{spec.path}.{source}"
        if spec.layout == "shared-all":
            seed = spec.seed + p  # the same blocks, in a different order per process
        gpu = gpus[p % len(gpus)] if spec.mode != "cpu" else spec.gpu
        out.append(spec.replace(path=path, offset=offset, seed=seed, gpu=gpu, procs=1))
    return out


def part_size(spec: JobSpec, target: Target, nparts: int) -> int:
    """Each part's region length: --size, or the target shared out (layout shared)."""
    room = target.size - spec.offset
    if spec.layout != "shared":
        return spec.size or room
    size = spec.size or room // nparts // spec.bs * spec.bs
    if spec.offset + size * nparts > target.size:
        raise UsageError(
            f"--size {format_size(size)} x --procs {nparts}: the parts run past the end of {spec.path} "
            f"({format_size(target.size)}); lower --size or --procs, or use --layout shared-all"
        )
    if size < spec.bs * spec.threads:
        raise UsageError(
            f"--procs {nparts}: each process's part of {spec.path} ({format_size(size)}) holds less than one "
            f"--bs block per thread; use fewer processes, a smaller --bs or a larger file"
        )
    return size


def plan_parts(spec: JobSpec, nparts: int, shift: int, check_region) -> list[Part]:
    """Plan every part against its own target, before anything runs."""
    parts = []
    for p, s in enumerate(part_specs(spec, nparts, shift)):
        target = None
        if s.path and s.engine != "null":
            target = inspect(s.path)
            check_region(s, target)
            if s.is_direct and s.mode != "kvikio":
                check_direct(target, s.bs, s.offset)
        parts.append(Part(p, s, target))
    return parts


def evict(parts: list[Part]) -> None:
    """Drop each part's pages from the page cache, unless the job keeps it warm."""
    for part in parts:
        if part.target is not None and not part.spec.warm:
            pagecache.evict(part.spec.path, part.spec.offset, part.spec.size)


def cached_fraction(parts: list[Part]) -> float | None:
    """The fraction of all parts' regions in the page cache now."""
    cached, total = 0.0, 0
    for part in parts:
        s = part.spec
        if part.target is not None:
            cached += pagecache.cached_fraction(s.path, s.offset, s.size) * s.size
            total += s.size
    return cached / total if total else None


def pin_cpus(how: str, index: int, nparts: int, spec: JobSpec, target: Target | None) -> list[int] | None:
    """Restrict this process to CPUs: its own share of them (cpu: disjoint
    sets while there are enough CPUs, else one each, round-robin), or the NUMA
    node of its GPU or, failing that, of the storage (numa). Returns the CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    if how == "cpu":
        chosen = cpus[index::nparts] if nparts <= len(cpus) else [cpus[index % len(cpus)]]
    elif how == "numa":
        node = None
        if spec.mode != "cpu":
            from . import gpu

            for g in gpu.status()["gpus"]:
                if str(g["cuda_index"]) == spec.gpu:
                    node = g["numa_node"]
        if node is None and target is not None and target.device:
            disk = disk_dir(target.device)
            node = pci_placement(disk / "device")["numa_node"] if disk else None
        if node is None or node < 0:
            return None
        listed = _read_cpulist(f"/sys/devices/system/node/node{node}/cpulist")
        chosen = [c for c in cpus if c in listed] or cpus
    else:
        return None
    os.sched_setaffinity(0, chosen)
    return chosen


def _read_cpulist(path: str) -> set[int]:
    out: set[int] = set()
    try:
        text = open(path).read().strip()
    except OSError:
        return out
    for item in text.split(","):
        lo, _, hi = item.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def run_part(spec: JobSpec, poll, on_ready) -> dict:
    """Run one part in this process, natively; returns the native result."""
    from . import pattern, runner

    real_gpu = spec.mode != "cpu" and not spec.simulated
    check = pattern.check_device if real_gpu and spec.verify else None
    return _native.run(runner.to_native(spec), poll, check, on_ready)


_EMPTY_THREAD = {"gpu": -1, "bytes": 0, "ops": 0, "first_submit_ns": 0, "last_complete_ns": 0,
                 "timeline_bytes": np.zeros(0, np.uint64), "cpu_user_s": 0.0, "cpu_sys_s": 0.0, "verified_blocks": 0,
                 "verify_mismatches": 0, "first_mismatch_offset": 0, "passes": 0, "reads_while_copying": 0,
                 "stonewall_bytes": 0, "stonewall_ops": 0, "stonewall_ns": 0}


def aggregate(results: list[dict], infos: list[dict], interval_ns: int) -> dict:
    """Parts' native results as one native-shaped result, on one time base: the
    earliest start gate. Per-process figures go to raw["procs"]."""
    t0 = min(r["start_realtime_ns"] for r in results if r["start_realtime_ns"]) if any(
        r["start_realtime_ns"] for r in results) else 0
    threads, procs = [], []
    first_done = None
    for index, (raw, info) in enumerate(zip(results, infos)):
        shift = raw["start_realtime_ns"] - t0 if raw["start_realtime_ns"] else 0
        ticks = shift // interval_ns
        latency = _native.LatencyHistogram()
        for t in raw["threads"]:
            t = dict(t)
            if t["ops"]:  # times are relative to the part's own start: move them to the common one
                for key in ("last_complete_ns", "first_submit_ns", "stonewall_ns"):
                    t[key] += shift
            if ticks:
                t["timeline_bytes"] = np.concatenate((np.zeros(ticks, np.uint64), t["timeline_bytes"]))
            latency.merge(t["latency"])
            threads.append(t)
        if raw["first_done_ns"]:
            done = shift + raw["first_done_ns"]
            first_done = done if first_done is None else min(first_done, done)
        own = raw["threads"]
        seconds = max((t["last_complete_ns"] for t in own if t["ops"]), default=0) / 1e9
        nbytes = sum(t["bytes"] for t in own)
        procs.append({
            "proc": index, **info, "start_offset_ns": shift, "bytes": nbytes, "ops": sum(t["ops"] for t in own),
            "bandwidth_bytes_per_s": nbytes / seconds if seconds else 0.0,
            "lat_p50_ns": latency.percentile(50), "lat_p99_ns": latency.percentile(99),
            "cpu_s": raw["window_cpu_user_s"] + raw["window_cpu_sys_s"],
            "worker_cpu_s": sum(t["cpu_user_s"] + t["cpu_sys_s"] for t in own),
            "interrupted": raw["interrupted"],
        })
    starts = [r["start_realtime_ns"] for r in results if r["start_realtime_ns"]]
    if not threads:  # interrupted before any process started
        threads = [dict(_EMPTY_THREAD, latency=_native.LatencyHistogram())]
    return {
        "threads": threads,
        "interrupted": any(r["interrupted"] for r in results),
        "start_skew_ns": (max(starts) - min(starts)) if starts else 0,
        "process_cpu_user_s": sum(r["process_cpu_user_s"] for r in results),
        "process_cpu_sys_s": sum(r["process_cpu_sys_s"] for r in results),
        "window_cpu_user_s": sum(r["window_cpu_user_s"] for r in results),
        "window_cpu_sys_s": sum(r["window_cpu_sys_s"] for r in results),
        "wall_ns": max(r["wall_ns"] for r in results),
        "start_realtime_ns": t0,
        "first_done_ns": first_done or 0,
        "procs": procs,
    }


# ---- local processes ----


class _Cancelled(Exception):
    """Ctrl-C reached a process while it waited at the start barrier."""


NOTHING_MEASURED = {"threads": [], "interrupted": True, "start_skew_ns": 0, "process_cpu_user_s": 0.0,
                    "process_cpu_sys_s": 0.0, "window_cpu_user_s": 0.0, "window_cpu_sys_s": 0.0, "wall_ns": 0,
                    "start_realtime_ns": 0, "first_done_ns": 0}


def _child(index: int, nparts: int, spec: JobSpec, pin: str, barrier, cancel, first_done, progress, results) -> None:
    """Body of one worker process (spawned: a fresh interpreter)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent turns Ctrl-C into `cancel`
    info = {"host": socket.gethostname(), "pid": os.getpid(), "gpu": spec.gpu if spec.mode != "cpu" else None}
    try:
        target = inspect(spec.path) if spec.path and spec.engine != "null" else None
        info["cpus"] = pin_cpus(pin, index, nparts, spec, target)

        def poll(nbytes: int, elapsed_ns: int, worker_done: bool) -> int:
            progress[index] = nbytes
            if cancel.is_set():
                return POLL_CANCEL
            if spec.stonewall:
                if worker_done:
                    first_done.set()
                if first_done.is_set():
                    return POLL_STONEWALL
            return POLL_CONTINUE

        def on_ready() -> None:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                if cancel.is_set():
                    raise _Cancelled from None
                raise IoFailure("another process failed before the start") from None

        try:
            raw = run_part(spec, poll, on_ready)
        except _Cancelled:  # Ctrl-C before the start: nothing measured, nothing wrong
            raw = NOTHING_MEASURED
        info["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        results.put(("ok", index, raw, info))
    except GdsbenchError as e:
        barrier.abort()
        results.put(("error", index, type(e).__name__, str(e), info))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, never lost
        barrier.abort()
        results.put(("error", index, "IoFailure", f"{type(e).__name__}: {e}", info))


def _describe_exit(proc) -> str:
    code = proc.exitcode
    if code is not None and code < 0:
        return f"was killed by signal {signal.Signals(-code).name}"
    return f"exited with code {code} without a result"


def run_local(parts: list[Part], progress=None) -> dict:
    """Run the parts in that many spawned processes; aggregate their results.

    A process that fails, crashes or is killed ends the whole run within a few
    seconds with an error naming it; none is left behind."""
    ctx = mp.get_context("spawn")
    n = len(parts)
    barrier = ctx.Barrier(n)
    cancel, first_done = ctx.Event(), ctx.Event()
    progress_bytes = ctx.Array("Q", n, lock=False)
    results: Any = ctx.Queue()
    spec0 = parts[0].spec
    procs = [ctx.Process(target=_child, args=(p.index, n, p.spec, spec0.pin, barrier, cancel, first_done,
                                              progress_bytes, results), daemon=True) for p in parts]
    # Started with SIGINT ignored (inherited through exec): Ctrl-C reaches the
    # parent, which stops the children through `cancel`, never kills them.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for proc in procs:
            proc.start()
    finally:
        signal.signal(signal.SIGINT, previous)
    got: dict[int, tuple] = {}
    interrupts = 0
    failure: tuple | None = None
    failed_at = None
    last_progress = 0.0
    start = time.monotonic()
    try:
        while len(got) < n:
            try:
                try:
                    msg = results.get(timeout=0.05)
                except queue.Empty:
                    msg = None
                if msg is not None:
                    got[msg[1]] = msg
                    if msg[0] == "error" and failure is None:
                        failure, failed_at = msg, time.monotonic()
                        cancel.set()
                        barrier.abort()
                for i, proc in enumerate(procs):
                    if i not in got and proc.exitcode is not None and results.empty():
                        if failure is None:
                            failure = ("error", i, "IoFailure", f"process {proc.pid} {_describe_exit(proc)}",
                                       {"host": socket.gethostname(), "pid": proc.pid})
                            failed_at = time.monotonic()
                            cancel.set()
                            barrier.abort()
                        got[i] = ("lost", i)
                if failure and time.monotonic() - failed_at > FAILURE_GRACE_S:
                    break
                if progress and time.monotonic() - last_progress > 0.2:
                    last_progress = time.monotonic()
                    progress(sum(progress_bytes), int((last_progress - start) * 1e9))
            except KeyboardInterrupt:
                interrupts += 1
                cancel.set()  # the children stop promptly and send what they measured
                barrier.abort()  # and none waits at the start barrier for a peer that will not come
                if interrupts > 1:  # a second Ctrl-C: stop waiting for them
                    raise
    finally:
        for proc in procs:
            proc.join(timeout=2.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
    if failure is not None:
        _, index, kind, message, info = failure
        cls = getattr(errors, kind, IoFailure)
        raise cls(f"process {index} (pid {info.get('pid')}) on {info.get('host')}: {message}")
    ordered = [got[i] for i in range(n)]
    return aggregate([m[2] for m in ordered], [m[3] for m in ordered], spec0.interval_ns)
