"""One job in several local processes (spawned), started together; their
runs aggregated exactly (aggregate.py).

Every process talks to the parent over two pipes of its own, and to nothing
else: no shared barrier, queue or event whose lock a killed process could
take with it. The parent watches every child's pipe and its process sentinel
at once, so whatever moment a child dies at (set-up, the start, measuring,
handing over its result), the run ends within seconds naming it. A child
watches its pipe from the parent, and is sent SIGKILL by the kernel if the
parent dies (PR_SET_PDEATHSIG): nothing outlives the run.

    child -> parent    ("ready",), ("progress", bytes), ("first_done",),
                       then ("ok", record, info) or ("error", kind, message, info)
    parent -> child    "go", "stonewall", "cancel"
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import resource
import signal
import socket
import time
from multiprocessing.connection import wait

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
PROGRESS_PERIOD_NS = 200_000_000
PR_SET_PDEATHSIG = 1


class _Cancelled(Exception):
    """Told to stop (Ctrl-C, or another process failed) before the start."""


class _ParentGone(Exception):
    """The parent's end of the pipe closed: nobody is waiting for this process."""


def _die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when its parent dies (Linux), and check it is still alive now."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the pipe's end still tells
    if os.getppid() != parent_pid:  # it died before the line above
        os._exit(1)


def _child(index: int, nparts: int, spec: JobSpec, pin: str, control, report, parent_pid: int) -> None:
    """Body of one worker process (spawned: a fresh interpreter)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent turns Ctrl-C into "cancel"
    _die_with_parent(parent_pid)
    info = {"host": socket.gethostname(), "pid": os.getpid(), "gpu": spec.gpu[0] if spec.on_gpu else None}
    state = {"stonewall": False, "cancel": False, "sent_done": False, "progress_at": 0}

    def listen(block: bool) -> None:
        """Take the parent's messages; a closed pipe means the parent is gone."""
        try:
            while block or control.poll():
                message = control.recv()
                block = False
                if message == "cancel":
                    state["cancel"] = True
                elif message == "stonewall":
                    state["stonewall"] = True
                elif message == "go":
                    return
        except (EOFError, OSError):
            raise _ParentGone from None

    def poll(nbytes: int, elapsed_ns: int, worker_done: bool) -> int:
        try:
            listen(block=False)
        except _ParentGone:
            state["cancel"] = True
        if elapsed_ns >= state["progress_at"]:
            state["progress_at"] = elapsed_ns + PROGRESS_PERIOD_NS
            _send(report, ("progress", nbytes))
        if spec.stonewall and worker_done and not state["sent_done"]:
            state["sent_done"] = True
            _send(report, ("first_done",))
        if state["cancel"]:
            return POLL_CANCEL
        return POLL_STONEWALL if spec.stonewall and state["stonewall"] else POLL_CONTINUE

    def on_ready() -> None:  # every worker thread here is set up: wait for the others
        _send(report, ("ready",))
        listen(block=True)
        if state["cancel"]:
            raise _Cancelled

    try:
        target = inspect(spec.path) if spec.path and spec.engine != "null" else None
        info["cpus"] = pin_cpus(pin, index, nparts, spec, target)
        try:
            record = run_part(spec, poll, on_ready)
        except _Cancelled:  # stopped before the start: nothing measured, nothing wrong here
            record = RunRecord.nothing_measured()
        info["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        _send(report, ("ok", record, info))
    except _ParentGone:
        os._exit(1)
    except GdsbenchError as e:
        _send(report, ("error", type(e).__name__, str(e), info))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, never lost
        _send(report, ("error", "IoFailure", f"{type(e).__name__}: {e}", info))


def _send(connection, message) -> None:
    try:
        connection.send(message)
    except (BrokenPipeError, OSError):  # the parent is gone: so is the reason to go on
        os._exit(1)


def _describe_exit(proc) -> str:
    code = proc.exitcode
    if code is not None and code < 0:
        return f"was killed by signal {signal.Signals(-code).name}"
    return f"exited with code {code} without a result"


class _Children:
    """The spawned processes, their pipes, and what each has said."""

    def __init__(self, parts: list[Part]):
        ctx = mp.get_context("spawn")
        self.n = len(parts)
        self.procs, self.controls, self.reports = [], [], []
        pin = parts[0].spec.pin
        # Started with SIGINT ignored (inherited through exec): Ctrl-C reaches the
        # parent, which stops the children with "cancel", never kills them.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            for p in parts:
                control_r, control_w = ctx.Pipe(duplex=False)
                report_r, report_w = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(p.index, self.n, p.spec, pin, control_r, report_w, os.getpid()),
                                   daemon=True)
                proc.start()
                control_r.close()  # the parent keeps only its own ends, so a child's death closes the pipe
                report_w.close()
                self.procs.append(proc)
                self.controls.append(control_w)
                self.reports.append(report_r)
        finally:
            signal.signal(signal.SIGINT, previous)
        self.ready: set[int] = set()
        self.final: dict[int, tuple] = {}  # index -> ("ok", ...) / ("error", ...) / ("lost", ...)
        self.progress = [0] * self.n

    def tell(self, message: str, who=None) -> None:
        for i in range(self.n) if who is None else [who]:
            if i not in self.final:
                try:
                    self.controls[i].send(message)
                except (BrokenPipeError, OSError):
                    pass  # it died: its sentinel says so

    def take(self, timeout: float) -> list[tuple[int, tuple]]:
        """Messages that arrived within timeout, and ("lost", why) for a child that died without a result."""
        waiting = {self.reports[i]: i for i in range(self.n) if i not in self.final}
        sentinels = {self.procs[i].sentinel: i for i in range(self.n) if i not in self.final}
        out: list[tuple[int, tuple]] = []

        def drain(i: int) -> None:
            try:
                while self.reports[i].poll():
                    out.append((i, self.reports[i].recv()))
            except (EOFError, OSError):
                pass  # closed: its sentinel tells why

        for ready in wait(list(waiting) + list(sentinels), timeout):
            if ready in waiting:
                drain(waiting[ready])
        for ready in wait(list(sentinels), 0):  # dead: take what it sent before dying, then judge
            i = sentinels[ready]
            drain(i)
            self.procs[i].join(timeout=2.0)  # its sentinel fired: the exit status follows at once
            if not any(j == i and m[0] in ("ok", "error") for j, m in out):
                out.append((i, ("lost", f"process {self.procs[i].pid} {_describe_exit(self.procs[i])}")))
        return out

    def stop(self) -> None:
        for proc in self.procs:
            proc.join(timeout=2.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for c in self.controls + self.reports:
            c.close()


def run_local(parts: list[Part], progress=None) -> RunRecord:
    """Run the parts in that many spawned processes; aggregate their results.

    A process that fails, crashes or is killed ends the whole run within a few
    seconds with an error naming it; none is left behind."""
    children = _Children(parts)
    n = children.n
    failure: tuple | None = None  # (index, kind, message, info)
    failed_at = 0.0
    started = stonewalled = False
    interrupts = 0
    last_progress, start = 0.0, time.monotonic()

    def fail(index: int, kind: str, message: str, info: dict) -> None:
        nonlocal failure, failed_at
        if failure is None:
            failure, failed_at = (index, kind, message, info), time.monotonic()
            children.tell("cancel")  # the others stop at once, whether waiting to start or measuring

    try:
        while len(children.final) < n:
            try:
                for i, message in children.take(0.05):
                    kind = message[0]
                    if kind == "ready":
                        children.ready.add(i)
                    elif kind == "progress":
                        children.progress[i] = message[1]
                    elif kind == "first_done" and not stonewalled:
                        stonewalled = True
                        children.tell("stonewall")
                    elif kind in ("ok", "error", "lost") and i not in children.final:
                        children.final[i] = message
                        if kind == "error":
                            fail(i, message[1], message[2], message[3])
                        elif kind == "lost":
                            fail(i, "IoFailure", message[1], {"host": socket.gethostname(),
                                                                "pid": children.procs[i].pid})
                if not started and failure is None and len(children.ready) == n:
                    started = True
                    children.tell("go")  # every process is set up: all start together
                if failure and time.monotonic() - failed_at > FAILURE_GRACE_S:
                    break
                if progress and time.monotonic() - last_progress > 0.2:
                    last_progress = time.monotonic()
                    progress(sum(children.progress), int((last_progress - start) * 1e9))
            except KeyboardInterrupt:
                interrupts += 1
                children.tell("cancel")  # they stop promptly and send what they measured
                if interrupts > 1:  # a second Ctrl-C: stop waiting for them
                    raise
    finally:
        children.stop()
    if failure is not None:
        index, kind, message, info = failure
        cls = getattr(errors, kind, IoFailure)
        raise cls(f"process {index} (pid {info.get('pid')}) on {info.get('host')}: {message}")
    ordered = [children.final[i] for i in range(n)]
    return aggregate([m[1] for m in ordered], [m[2] for m in ordered], parts[0].spec.interval_ns)
