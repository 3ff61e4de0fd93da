"""One job in several local processes (spawned), started together behind a
barrier; their runs aggregated exactly (aggregate.py). A process that fails,
crashes or is killed ends the whole run within seconds, naming it."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import resource
import signal
import socket
import threading
import time
from typing import Any

from gdsbench.execution.aggregate import aggregate
from gdsbench.execution.native import POLL_CANCEL, POLL_CONTINUE, POLL_STONEWALL, run_part
from gdsbench.execution.parts import Part
from gdsbench.execution.pinning import pin_cpus
from gdsbench.execution.record import RunRecord
from gdsbench.job import errors
from gdsbench.job.errors import GdsbenchError, IoFailure
from gdsbench.job.spec import JobSpec
from gdsbench.system.target import inspect

FAILURE_GRACE_S = 5.0  # how long the others get to stop after one part fails


class _Cancelled(Exception):
    """Ctrl-C reached a process while it waited at the start barrier."""


def _child(index: int, nparts: int, spec: JobSpec, pin: str, barrier, cancel, first_done, progress, results) -> None:
    """Body of one worker process (spawned: a fresh interpreter)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent turns Ctrl-C into `cancel`
    info = {"host": socket.gethostname(), "pid": os.getpid(), "gpu": spec.gpu[0] if spec.on_gpu else None}
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
            raw = RunRecord.nothing_measured()
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


def run_local(parts: list[Part], progress=None) -> RunRecord:
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
