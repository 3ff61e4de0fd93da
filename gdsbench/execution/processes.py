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
import threading
import time
from multiprocessing.connection import wait

from gdsbench.execution.aggregate import aggregate
from gdsbench.execution.loops import run_part
from gdsbench.execution.native import POLL_CANCEL, POLL_CONTINUE, POLL_STONEWALL
from gdsbench.execution.parts import Part
from gdsbench.execution.pinning import pin_cpus
from gdsbench.execution.record import RunRecord
from gdsbench.job import errors
from gdsbench.job.errors import GdsbenchError, IoFailure
from gdsbench.job.spec import JobSpec
from gdsbench.system.targets import job_target

FAILURE_GRACE_S = 5.0  # how long the others get to stop after one part fails
INTERRUPT_GRACE_S = 3.0  # after Ctrl-C: how long they get to send what they have before they are killed
# ...counted from when every process still alive has started (said "ready"): one still starting
# Python on a loaded machine cannot answer yet, and killing it loses the run. Bounded apart:
STARTING_GRACE_S = 60.0
PROGRESS_PERIOD_NS = 200_000_000
PR_SET_PDEATHSIG = 1
# What ends a command as Ctrl-C does (cli.entry_point turns each into it): a kill or a job scheduler's
# stop, a closed terminal or SSH session, Ctrl-\. The terminal sends them to every process of its
# foreground group, so a child ignores them as it ignores Ctrl-C: the parent stops it with "cancel".
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


class Cancelled(Exception):
    """Told to stop (Ctrl-C, or another process failed) before the start: ready_then_wait raises it."""


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


class ParentLink:
    """A child's two pipes to its parent: what it says, and what it is told."""

    def __init__(self, control, report, parent_pid: int):
        for sig in (signal.SIGINT, *STOP_SIGNALS):  # the parent turns each into "cancel"
            signal.signal(sig, signal.SIG_IGN)
        _die_with_parent(parent_pid)
        self.control, self.report = control, report
        self.cancelled = self.stonewalled = False

    def send(self, message) -> None:
        _send(self.report, message)

    def listen(self, block: bool) -> None:
        """Take the parent's messages (until "go" when blocking); a closed pipe means the parent is gone."""
        try:
            while block or self.control.poll():
                message = self.control.recv()
                block = False
                if message == "cancel":
                    self.cancelled = True
                elif message == "stonewall":
                    self.stonewalled = True
                elif message == "go":
                    return
        except (EOFError, OSError):
            raise _ParentGone from None

    def ready_then_wait(self) -> None:
        """Say this process is set up, and wait until every other is: "go" (or Cancelled)."""
        self.send(("ready",))
        self.listen(block=True)
        if self.cancelled:
            raise Cancelled

    def cancel_asked(self) -> bool:
        """Whether the parent has asked this process to stop (or is gone); never blocks."""
        try:
            self.listen(block=False)
        except _ParentGone:
            self.cancelled = True
        return self.cancelled

    def report_failures(self, body, info: dict) -> None:
        """Run body() -> (record, info); send ("ok", ...) or ("error", kind, message, info). Never raises."""
        try:
            record = body()
            info["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            self.send(("ok", record, info))
        except _ParentGone:
            os._exit(1)
        except GdsbenchError as e:
            self.send(("error", type(e).__name__, str(e), info))
        except BaseException as e:  # noqa: BLE001 - reported to the parent, never lost
            self.send(("error", "IoFailure", f"{type(e).__name__}: {e}", info))


def _child(index: int, nparts: int, spec: JobSpec, pin: str, control, report, parent_pid: int) -> None:
    """Body of one worker process (spawned: a fresh interpreter)."""
    link = ParentLink(control, report, parent_pid)
    info = {"host": socket.gethostname(), "pid": os.getpid(), "gpu": spec.gpu[0] if spec.on_gpu else None}
    state = {"sent_done": False, "progress_at": 0}

    def poll(nbytes: int, elapsed_ns: int, worker_done: bool) -> int:
        link.cancel_asked()
        if elapsed_ns >= state["progress_at"]:
            state["progress_at"] = elapsed_ns + PROGRESS_PERIOD_NS
            link.send(("progress", nbytes))
        if spec.stonewall and worker_done and not state["sent_done"]:
            state["sent_done"] = True
            link.send(("first_done",))
        if link.cancelled:
            return POLL_CANCEL
        return POLL_STONEWALL if spec.stonewall and link.stonewalled else POLL_CONTINUE

    def body() -> RunRecord:
        target = job_target(spec) if spec.path and spec.opens_target else None
        info["cpus"] = pin_cpus(pin, index, nparts, spec, target)
        try:
            return run_part(spec, poll=poll, on_ready=link.ready_then_wait).record
        except Cancelled:  # stopped before the start: nothing measured, nothing wrong here
            return RunRecord.nothing_measured()

    link.report_failures(body, info)


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


class StopSignals:
    """Ctrl-C, and the STOP_SIGNALS where a handler turns them into one, noted instead of
    raised while processes are started and supervised: a KeyboardInterrupt in
    the middle of a pipe's recv() leaves half a message in it, and one while the
    children were being spawned was lost. supervise() asks new() each step."""

    def __init__(self):
        self.count = self.seen = 0
        self.previous: dict[int, object] = {}
        if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
            for sig in (signal.SIGINT, *STOP_SIGNALS):
                if callable(signal.getsignal(sig)):  # one that raises (Ctrl-C's, the CLI's SIGTERM): note it
                    self.previous[sig] = signal.signal(sig, self._note)

    def _note(self, signum, frame) -> None:
        self.count += 1

    def new(self) -> int:
        """How many arrived since the last call."""
        fresh, self.seen = self.count - self.seen, self.count
        return fresh

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        self.previous = {}


class Children:
    """Spawned processes, their pipes, and what each has said. Each runs
    target(*args, control, report, parent_pid) and talks through a ParentLink."""

    def __init__(self, target, args: list[tuple]):
        ctx = mp.get_context("spawn")
        self.n = len(args)
        self.procs, self.controls, self.reports = [], [], []
        # Started with SIGINT and the STOP_SIGNALS blocked (the mask is inherited through
        # exec, and each child ignores them once it runs): Ctrl-C reaches the parent, which
        # stops the children with "cancel", never kills them. One that comes meanwhile is
        # noted (self.signals), and supervise() acts on it first.
        self.signals = StopSignals()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, *STOP_SIGNALS})
        try:
            for child_args in args:
                control_r, control_w = ctx.Pipe(duplex=False)
                report_r, report_w = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=target, args=(*child_args, control_r, report_w, os.getpid()), daemon=True)
                proc.start()
                control_r.close()  # the parent keeps only its own ends, so a child's death closes the pipe
                report_w.close()
                self.procs.append(proc)
                self.controls.append(control_w)
                self.reports.append(report_r)
        except BaseException:
            self.signals.restore()
            raise
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # one pending here is noted now
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
        self.signals.restore()
        deadline = time.monotonic() + 2.0  # all together: a stopped or stuck process costs 2 s, not 2 s each
        for proc in self.procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()  # SIGKILL ends a stopped (SIGSTOP) process too
                proc.join()
        for c in self.controls + self.reports:
            c.close()

    def supervise(self, on_message=None, tick=None, on_stop=None) -> list[tuple]:
        """Start every process together once all are ready, and collect what each
        ends with: ("ok", record, info) per process, in order. Other messages go
        to on_message(i, message); tick() runs a few times a second. A process
        that fails, crashes or is killed ends the whole run within seconds
        (on_stop() first, to release whatever the others wait on, then "cancel"
        to the rest) with an error naming it. Ctrl-C (or SIGTERM) does the same
        and raises KeyboardInterrupt within INTERRUPT_GRACE_S of every process
        having started (STARTING_GRACE_S at most), even when a process is
        stopped or stuck in a read: those are killed. None is left behind."""
        failure: tuple | None = None  # (index, kind, message, info)
        failed_at = interrupted_at = answering_since = 0.0
        started = False
        interrupts = 0

        def fail(index: int, kind: str, message: str, info: dict) -> None:
            nonlocal failure, failed_at
            if failure is None:
                failure, failed_at = (index, kind, message, info), time.monotonic()
                if on_stop:
                    on_stop()
                self.tell("cancel")  # the others stop at once, whether waiting to start or running

        try:
            while len(self.final) < self.n:
                try:
                    fresh = self.signals.new()  # noted, acted on between steps, as a raised Ctrl-C is
                    if fresh:
                        interrupts += fresh - 1  # the raise below counts one
                        raise KeyboardInterrupt
                    for i, message in self.take(0.05):
                        kind = message[0]
                        if kind == "ready":
                            self.ready.add(i)
                        elif kind in ("ok", "error", "lost") and i not in self.final:
                            self.final[i] = message
                            if kind == "error":
                                fail(i, message[1], message[2], message[3])
                            elif kind == "lost":
                                fail(i, "IoFailure", message[1], {"host": socket.gethostname(), "pid": self.procs[i].pid})
                        elif on_message:
                            on_message(i, message)
                    if not started and failure is None and len(self.ready) == self.n:
                        started = True
                        self.tell("go")  # every process is set up: all start together
                    if failure and time.monotonic() - failed_at > FAILURE_GRACE_S:
                        break
                    if interrupts and not answering_since and all(i in self.ready or i in self.final
                                                                   for i in range(self.n)):
                        answering_since = max(interrupted_at, time.monotonic())
                    if interrupts and (answering_since and time.monotonic() - answering_since > INTERRUPT_GRACE_S
                                       or time.monotonic() - interrupted_at > STARTING_GRACE_S):
                        break  # one is stopped, or stuck in a read: stop() kills what is left
                    if tick:
                        tick()
                except KeyboardInterrupt:
                    interrupts += 1
                    if interrupts == 1:
                        interrupted_at = time.monotonic()
                        if on_stop:
                            on_stop()
                    self.tell("cancel")  # they stop promptly and send what they have
                    if interrupts > 1:  # a second Ctrl-C: stop waiting for them
                        raise
        finally:
            self.stop()
        if interrupts and (failure is not None or len(self.final) < self.n):
            raise KeyboardInterrupt  # they failed as they stopped, or were killed after the grace
        if failure is not None:
            index, kind, message, info = failure
            cls = getattr(errors, kind, IoFailure)
            raise cls(f"process {index} (pid {info.get('pid')}) on {info.get('host')}: {message}")
        return [self.final[i] for i in range(self.n)]


def run_local(parts: list[Part], progress=None) -> RunRecord:
    """Run the parts in that many spawned processes; aggregate their results."""
    children = Children(_child, [(p.index, len(parts), p.spec, parts[0].spec.pin) for p in parts])
    stonewalled = False
    last_progress, start = 0.0, time.monotonic()

    def on_message(i: int, message: tuple) -> None:
        nonlocal stonewalled
        if message[0] == "progress":
            children.progress[i] = message[1]
        elif message[0] == "first_done" and not stonewalled:
            stonewalled = True
            children.tell("stonewall")

    def tick() -> None:
        nonlocal last_progress
        if progress and time.monotonic() - last_progress > 0.2:
            last_progress = time.monotonic()
            progress(sum(children.progress), int((last_progress - start) * 1e9))

    ordered = children.supervise(on_message, tick)
    return aggregate([m[1] for m in ordered], [m[2] for m in ordered], parts[0].spec.interval_ns)
