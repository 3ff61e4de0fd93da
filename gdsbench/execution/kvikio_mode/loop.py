"""The kvikio benchmark loop: up to --qd CuFile.pread calls in flight,
collected oldest first, measured by the native core's window rule."""

from __future__ import annotations

import os
import resource
import time
from collections import deque

import numpy as np

from gdsbench import _native
from gdsbench.execution.kvikio_mode.files import open_for_reading
from gdsbench.execution.kvikio_mode.path import backend_shares, compat_description, remote_description
from gdsbench.execution.kvikio_mode.settings import configure, configure_remote, import_kvikio, modules
from gdsbench.execution.record import RunRecord, ThreadRecord
from gdsbench.job.errors import IoFailure
from gdsbench.job.spec import JobSpec
from gdsbench.system.pattern import bad_blocks, restamp
from gdsbench.system.targets import protocol_of

TIMING_NOTE = ("kvikio mode: latency timed in Python from pread() to its future returning, oldest first "
               "(to pread() returning, for reads kvikio did inside it)")



def _read_failed(spec: JobSpec, offset: int, error: Exception) -> IoFailure:
    return IoFailure(f"kvikio read of {spec.bs} bytes at offset {offset} of {spec.path}: {error}")


def _cpu_seconds(who: int) -> tuple[float, float]:
    usage = resource.getrusage(who)
    return usage.ru_utime, usage.ru_stime


def _since(before: tuple[float, float] | None, after: tuple[float, float]) -> tuple[float, float]:
    return (after[0] - before[0], after[1] - before[1]) if before else (0.0, 0.0)


class _Loop:
    """Up to --qd preads in flight through one kvikio file handle, collected
    oldest first, and what they measured. The measured window is the native
    core's own rule (native/window_rule.hpp, through _native.WindowRule). CPU is
    the process's over the window (kvikio's pool threads are this process's),
    and this thread's beside it."""

    def __init__(self, spec: JobSpec, cupy, handle, progress):
        self.spec, self.handle, self.progress = spec, handle, progress
        self.nblocks = spec.size // spec.bs
        self.budget = spec.io_size // spec.bs if spec.io_size else None
        self.cupy = cupy
        self.buffers = [cupy.empty(spec.bs, dtype=cupy.uint8) for _ in range(spec.qd)]
        self.writing = spec.direction == "write"
        if self.writing:  # pattern blocks a write moves to where it lands (restamp), made once
            for i, buffer in enumerate(self.buffers):
                host = np.empty(spec.bs, dtype=np.uint8)
                _native.pattern_fill_reusable(host, (i * spec.bs + spec.seed) % 2**64)  # a file's seed may be any 64 bits
                buffer[...] = cupy.asarray(host)
        self.fsync_latency = _native.LatencyHistogram()
        self.written = 0  # writes collected, for --fsync-every
        self.fd = os.open(spec.path, os.O_RDONLY | os.O_CLOEXEC) if self.writing and (spec.fsync_end or spec.fsync_every) \
            else None
        self.order = _native.OffsetSequence(spec.offset, self.nblocks, spec.bs, spec.pattern == "rand", spec.seed)
        self.offsets = self.order.take(min(self.nblocks, 4096))
        self.position = 0
        self.inflight: deque = deque()  # (future, issued at, file offset, buffer index, done at, reread), oldest first
        self.free = deque(range(spec.qd))
        self.samples: list[int] = []
        self.reread: list[bool] = []  # per sample: its block was read before in this run (a later pass)
        self.first_pass_bytes = self.first_pass_ops = self.first_pass_last = 0
        self.timeline: list[int] = []
        self.round_ends: list[int] = []  # --round-reads: when each N-th read completed, ns into the window
        self.done_bytes = self.ops = self.last = 0
        self.verified = 0
        self.bad: set[int] = set()  # distinct bad blocks: one read again counts once
        self.interrupted = False
        self.cpu0 = self.thread_cpu0 = None  # process and this thread's CPU when the window opened
        self.t0 = time.monotonic_ns()
        self.measure_start = self.t0 + spec.ramp_ns
        self.rule = _native.WindowRule(self.measure_start, self.measure_start + spec.runtime_ns if spec.runtime_ns
                                       else 2**64 - 1, self.budget if self.budget is not None else 2**64 - 1)

    def start_measuring(self) -> None:
        self.cpu0 = _cpu_seconds(resource.RUSAGE_SELF)
        self.thread_cpu0 = _cpu_seconds(resource.RUSAGE_THREAD)

    def next_offset(self) -> int:
        if self.position and self.position % len(self.offsets) == 0:
            self.offsets = self.order.take(len(self.offsets))
        off = int(self.offsets[self.position % len(self.offsets)])
        self.position += 1
        return off

    def issue(self) -> None:
        """Fill every free buffer, unless the window's end or the byte budget says stop."""
        while self.free:
            now = time.monotonic_ns()
            if self.cpu0 is None and self.rule.open_at(now):
                self.start_measuring()
            if not self.rule.may_issue(now, self.ops, len(self.inflight)):
                return
            index, off = self.free.popleft(), self.next_offset()
            reread = self.position > self.nblocks  # past its first pass over the region
            try:  # kvikio may read (and fail) inside pread() itself: small reads are synchronous
                if self.writing:
                    restamp(self.cupy, self.buffers[index], off)
                    stream = getattr(self.cupy.cuda, "get_current_stream", None)
                    if stream:  # the blocks are stamped on the GPU before kvikio takes them
                        stream().synchronize()
                    future = self.handle.pwrite(self.buffers[index], self.spec.bs, off)
                else:
                    future = self.handle.pread(self.buffers[index], self.spec.bs, off)
            except RuntimeError as e:
                raise _read_failed(self.spec, off, e) from None
            # a read kvikio did inside pread() is complete now, not when its future is collected
            # after the next --qd preads: else its latency, and the depth, would read --qd times high
            done_at = time.monotonic_ns() if future.done() else None
            self.inflight.append((future, now, off, index, done_at, reread))

    def collect(self) -> None:
        """Wait for the oldest read; check and account it."""
        future, started, off, index, done_at, reread = self.inflight.popleft()
        try:
            got = future.get()
        except RuntimeError as e:
            raise _read_failed(self.spec, off, e) from None
        end = done_at or time.monotonic_ns()
        self.free.append(index)
        if got != self.spec.bs:
            raise IoFailure(f"short read: kvikio read {got} of {self.spec.bs} bytes at offset {off} of {self.spec.path}")
        self.written += self.writing
        if self.writing and self.spec.fsync_every and self.written % self.spec.fsync_every == 0:
            self.sync()
        if self.spec.verify and not self.writing:  # a write is read back after the run (execution/runner.py)
            self.bad.update(bad_blocks(self.cupy, self.buffers[index], off))  # on the GPU it is in
            self.verified += self.spec.bs // _native.PATTERN_BLOCK
        if self.cpu0 is None and self.rule.open_at(end):
            self.start_measuring()
        if not self.rule.counts(end):  # finished during the ramp, whenever it was collected
            return
        self.samples.append(end - started)
        self.reread.append(reread)
        self.done_bytes += self.spec.bs
        self.ops += 1
        self.last = end - self.measure_start
        if not reread:
            self.first_pass_bytes += self.spec.bs
            self.first_pass_ops += 1
            self.first_pass_last = self.last
        if self.spec.round_reads and self.ops % self.spec.round_reads == 0:
            self.round_ends.append(self.last)
        tick = self.last // self.spec.interval_ns
        self.timeline.extend([0] * (tick + 1 - len(self.timeline)))
        self.timeline[tick] += self.spec.bs
        if self.progress and self.ops % 64 == 0:
            self.progress(self.done_bytes, self.last)

    def sync(self) -> None:
        """fsync(2) of the file kvikio writes (CuFile has none), timed: --fsync-every, --fsync-end."""
        started = time.monotonic_ns()
        os.fsync(self.fd)
        self.fsync_latency.add(np.asarray([time.monotonic_ns() - started], dtype=np.uint64))

    def run(self) -> None:
        try:
            while True:
                self.issue()
                if not self.inflight:
                    break
                self.collect()
            if self.writing and self.spec.fsync_end:  # fio's end_fsync: inside the measured window
                self.sync()
                self.last = max(self.last, time.monotonic_ns() - self.measure_start)
        except KeyboardInterrupt:
            self.interrupted = True
        finally:
            for future, *_ in self.inflight:  # no buffer is freed under a read still in flight
                try:
                    future.get()
                except Exception:  # noqa: BLE001 - the run already failed or stopped
                    pass

    def record(self, run_cpu0: tuple[float, float]) -> RunRecord:
        end_cpu = _cpu_seconds(resource.RUSAGE_SELF)
        window = _since(self.cpu0, end_cpu)
        thread_cpu = _since(self.thread_cpu0, _cpu_seconds(resource.RUSAGE_THREAD))
        samples = np.asarray(self.samples, dtype=np.uint64)
        reread = np.asarray(self.reread, dtype=bool)
        latency, first_pass, rereads = _native.LatencyHistogram(), _native.LatencyHistogram(), _native.LatencyHistogram()
        latency.add(samples)
        first_pass.add(samples[~reread])
        rereads.add(samples[reread])
        n = self.spec.round_reads
        rounds = []
        for k in range(len(self.round_ends)):  # reads complete in order here: round k is samples k*N to (k+1)*N
            rounds.append(_native.LatencyHistogram())
            rounds[-1].add(samples[k * n:(k + 1) * n])
        thread = ThreadRecord(
            gpu=self.spec.gpu[0], latency=latency, bytes=self.done_bytes, ops=self.ops, first_submit_ns=0,
            last_complete_ns=self.last, timeline_bytes=np.asarray(self.timeline, dtype=np.uint64),
            # the one Python thread that drives kvikio; its pool threads count in the process's CPU
            cpu_user_s=thread_cpu[0], cpu_sys_s=thread_cpu[1], verified_blocks=self.verified,
            verify_mismatches=len(self.bad), first_mismatch_offset=min(self.bad, default=0),
            passes=-(-self.position // self.nblocks), reads_while_copying=0, connections=0, retries=0, streamed_bytes=0,
            fsyncs=self.fsync_latency.count, fsync_latency=self.fsync_latency,
            first_byte_latency=_native.LatencyHistogram(), first_pass_bytes=self.first_pass_bytes,
            first_pass_ops=self.first_pass_ops, first_pass_last_ns=self.first_pass_last,
            first_pass_latency=first_pass, reread_latency=rereads,
            stonewall_bytes=self.done_bytes, stonewall_ops=self.ops, stonewall_ns=self.last, round_latency=rounds)
        return RunRecord(threads=[thread], interrupted=self.interrupted, start_skew_ns=0, round_end_ns=self.round_ends,
                         process_cpu_user_s=end_cpu[0] - run_cpu0[0], process_cpu_sys_s=end_cpu[1] - run_cpu0[1],
                         window_cpu_user_s=window[0], window_cpu_sys_s=window[1],
                         wall_ns=time.monotonic_ns() - self.t0, start_realtime_ns=0, first_done_ns=0)


def run(spec: JobSpec, progress=None) -> tuple[RunRecord, str]:
    """Measure a resolved kvikio job; returns its record and the data path kvikio took."""
    cupy, kvikio = import_kvikio()
    run_cpu0 = _cpu_seconds(resource.RUSAGE_SELF)
    defaults, _ = modules()
    direct_posix = configure(defaults, spec)
    remote = configure_remote(kvikio, defaults, spec) if protocol_of(spec.path) is not None else None
    monitor = kvikio.SummaryMonitor() if hasattr(kvikio, "SummaryMonitor") else None
    with cupy.cuda.Device(spec.gpu[0]):
        handle = open_for_reading(kvikio, spec.path, write=spec.direction == "write")
        try:
            # what kvikio will do, not what was asked: O_DIRECT needs the file system's support too
            direct_posix = direct_posix and bool(getattr(handle, "is_direct_io_supported", lambda: False)())
            before = monitor.get() if monitor else None
            loop = _Loop(spec, cupy, handle, progress)
            try:
                loop.run()
            finally:
                if loop.fd is not None:
                    os.close(loop.fd)
            backends = backend_shares(monitor.get().since(before)) if monitor else None
        finally:
            if monitor:
                monitor.stop()
            handle.close()
        record = loop.record(run_cpu0)
    if remote is not None:
        return record, remote_description(spec.path, spec.gpu[0], remote, backends)
    return record, compat_description(kvikio, spec.bs, direct_posix, backends, verb=f"{spec.direction}s")


