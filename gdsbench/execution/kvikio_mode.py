"""--mode kvikio: reads through kvikio's own API (CuFile.pread and its thread
pool), as RAPIDS users run them, into cupy arrays on the GPU.

kvikio is a Python-facing library, so this mode is driven from Python, not
the native worker loop: up to --qd preads are in flight, each split by kvikio
into --kvikio-task-size tasks on --kvikio-threads threads. Each read's latency
is timed in Python from the call to the moment its future returns (futures
are collected oldest first), or to pread() returning when kvikio did the read
inside it (reads under its gds_threshold), and results say so. The data path is what
kvikio's own statistics saw (kvikio >= 26.10: bytes per backend), since kvikio
can fall back to POSIX for one file whatever its global setting says.
"""

from __future__ import annotations

import resource
import time
from collections import deque

import numpy as np

from gdsbench import _native
from gdsbench.execution.record import RunRecord, ThreadRecord
from gdsbench.job.errors import IoFailure, UsageError
from gdsbench.job.spec import JobSpec
from gdsbench.system.pattern import bad_blocks, check_device

TIMING_NOTE = ("kvikio mode: latency timed in Python from pread() to its future returning, oldest first "
               "(to pread() returning, for reads kvikio did inside it)")


_original: dict[str, int] = {}  # kvikio's own defaults, read once, restored for "0" (kvikio's default)


def _modules():
    """kvikio's settings and cuFile-driver modules. They are submodules that
    `import kvikio` does not load, so they are imported by name."""
    import importlib

    defaults = importlib.import_module("kvikio.defaults")
    try:
        driver = importlib.import_module("kvikio.cufile_driver")
    except Exception:  # noqa: BLE001 - no cuFile driver module: kvikio runs POSIX only
        driver = None
    return defaults, driver


def _setting(defaults, name: str):
    try:
        return defaults.get(name)  # kvikio >= 25.04
    except (AttributeError, TypeError, KeyError):
        return getattr(defaults, name if name != "num_threads" else "get_num_threads")()


def _configure(defaults, spec: JobSpec) -> bool:
    """Set kvikio's pool size and task size for this run (0: kvikio's own
    default), and O_DIRECT for its POSIX reads when the job is direct. Returns
    whether kvikio's POSIX reads use O_DIRECT."""
    for name in ("num_threads", "task_size"):
        _original.setdefault(name, int(_setting(defaults, name)))
    settings = {"num_threads": spec.kvikio_threads or _original["num_threads"],
                "task_size": spec.kvikio_task_size or _original["task_size"]}
    if not hasattr(defaults, "set"):  # kvikio < 25.02
        defaults.num_threads_reset(settings["num_threads"])
        defaults.task_size_reset(settings["task_size"])
        return False
    defaults.set(settings)
    try:  # kvikio's POSIX reads go through the page cache unless asked (kvikio >= 25.08)
        defaults.set({"auto_direct_io_read": spec.uses_o_direct})
        return spec.uses_o_direct
    except (KeyError, ValueError, TypeError):
        return False


def _compat_preferred(kvikio, defaults, driver) -> bool:
    """Whether kvikio will use its own POSIX compatibility mode (AUTO resolved)."""
    if hasattr(defaults, "is_compat_mode_preferred"):
        return bool(defaults.is_compat_mode_preferred())
    mode = _setting(defaults, "compat_mode")
    compat = getattr(kvikio, "CompatMode", None)
    if compat is None or isinstance(mode, bool):
        return bool(mode)
    if mode == compat.AUTO:  # AUTO falls back to POSIX where cuFile cannot load
        return driver is None
    return mode == compat.ON


def _gds_available(driver) -> bool | None:
    """kvikio's own answer (nvidia-fs loaded), None where this kvikio cannot say."""
    try:
        return bool(driver.get("is_gds_available"))
    except Exception:  # noqa: BLE001 - older kvikio, or no driver module
        return None


def _backend_shares(summary) -> dict[str, float]:
    """Share of bytes each kvikio backend carried ("posix", "gds"), from a
    kvikio.Summary; {} when nothing was counted."""
    totals = {str(name).lower(): int(t["bytes_transferred"]) for name, t in summary.by_backend.items()}
    moved = sum(totals.values())
    return {name: n / moved for name, n in totals.items() if n} if moved else {}


def compat_description(kvikio, bs: int, direct_posix: bool = False, backends: dict[str, float] | None = None) -> str:
    """How kvikio read this run: through cuFile, or POSIX (its compatibility
    mode, reads under its gds_threshold, or a file for which cuFile's
    registration failed). `backends` is what kvikio's own statistics saw
    (share of bytes per backend); without it (kvikio < 26.10) the answer is
    inferred from kvikio's settings."""
    defaults, driver = _modules()
    # kvikio's O_DIRECT is opportunistic: aligned parts only, buffered for the rest
    posix = f"POSIX {'O_DIRECT (where aligned)' if direct_posix else 'page-cache'} reads and a bounce buffer"
    try:
        threshold = int(_setting(defaults, "gds_threshold"))
    except Exception:  # noqa: BLE001 - older kvikio has no threshold
        threshold = 0
    if _compat_preferred(kvikio, defaults, driver):
        why = "kvikio compatibility mode"
    elif bs < threshold:
        why = (f"{bs} B reads are under kvikio's gds_threshold ({threshold} B), which it does synchronously "
               "inside pread()")
    else:
        why = "cuFile could not take this file (kvikio fell back to POSIX for it)"
    no_nvfs = _gds_available(driver) is False
    cufile = ("kvikio through cuFile, which has no nvidia-fs here (kvikio: is_gds_available false): cuFile "
              "compatibility mode, NOT GPUDirect (unless this cuFile reads by PCI P2PDMA, which gdsbench "
              "cannot see)" if no_nvfs else
              "kvikio through cuFile (GPUDirect unless cuFile itself runs in its compatibility mode)")
    if backends:
        gds_share = backends.get("gds", 0.0)
        seen = ", ".join(f"{share:.0%} {name}" for name, share in sorted(backends.items()))
        if gds_share >= 0.999:
            return f"{cufile} [kvikio statistics: {seen} of bytes]"
        if gds_share <= 0.001:
            return f"kvikio {posix}, NOT GPUDirect: {why} [kvikio statistics: {seen} of bytes]"
        return (f"MIXED: part through cuFile, part kvikio {posix} ({why}), so NOT all GPUDirect "
                f"[kvikio statistics: {seen} of bytes]")
    if _compat_preferred(kvikio, defaults, driver):
        return f"kvikio compatibility mode: {posix}, NOT GPUDirect"
    if bs < threshold:
        return f"kvikio {posix}, NOT GPUDirect: {why}"
    return cufile


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
        self.buffers = [cupy.empty(spec.bs, dtype=cupy.uint8) for _ in range(spec.qd)]
        self.order = _native.OffsetSequence(spec.offset, self.nblocks, spec.bs, spec.pattern == "rand", spec.seed)
        self.offsets = self.order.take(min(self.nblocks, 4096))
        self.position = 0
        self.inflight: deque = deque()  # (future, issued at, file offset, buffer index, done at), oldest first
        self.free = deque(range(spec.qd))
        self.samples: list[int] = []
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
            try:  # kvikio may read (and fail) inside pread() itself: small reads are synchronous
                future = self.handle.pread(self.buffers[index], self.spec.bs, off)
            except RuntimeError as e:
                raise _read_failed(self.spec, off, e) from None
            # a read kvikio did inside pread() is complete now, not when its future is collected
            # after the next --qd preads: else its latency, and the depth, would read --qd times high
            done_at = time.monotonic_ns() if future.done() else None
            self.inflight.append((future, now, off, index, done_at))

    def collect(self) -> None:
        """Wait for the oldest read; check and account it."""
        future, started, off, index, done_at = self.inflight.popleft()
        try:
            got = future.get()
        except RuntimeError as e:
            raise _read_failed(self.spec, off, e) from None
        end = done_at or time.monotonic_ns()
        self.free.append(index)
        if got != self.spec.bs:
            raise IoFailure(f"short read: kvikio read {got} of {self.spec.bs} bytes at offset {off} of {self.spec.path}")
        if self.spec.verify:
            self.bad.update(check_device(self.buffers[index].data.ptr, self.spec.bs, off, self.spec.gpu[0]))
            self.verified += self.spec.bs // _native.PATTERN_BLOCK
        if self.cpu0 is None and self.rule.open_at(end):
            self.start_measuring()
        if not self.rule.counts(end):  # finished during the ramp, whenever it was collected
            return
        self.samples.append(end - started)
        self.done_bytes += self.spec.bs
        self.ops += 1
        self.last = end - self.measure_start
        if self.spec.round_reads and self.ops % self.spec.round_reads == 0:
            self.round_ends.append(self.last)
        tick = self.last // self.spec.interval_ns
        self.timeline.extend([0] * (tick + 1 - len(self.timeline)))
        self.timeline[tick] += self.spec.bs
        if self.progress and self.ops % 64 == 0:
            self.progress(self.done_bytes, self.last)

    def run(self) -> None:
        try:
            while True:
                self.issue()
                if not self.inflight:
                    break
                self.collect()
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
        latency = _native.LatencyHistogram()
        latency.add(samples)
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
            passes=-(-self.position // self.nblocks), reads_while_copying=0,
            stonewall_bytes=self.done_bytes, stonewall_ops=self.ops, stonewall_ns=self.last, round_latency=rounds)
        return RunRecord(threads=[thread], interrupted=self.interrupted, start_skew_ns=0, round_end_ns=self.round_ends,
                         process_cpu_user_s=end_cpu[0] - run_cpu0[0], process_cpu_sys_s=end_cpu[1] - run_cpu0[1],
                         window_cpu_user_s=window[0], window_cpu_sys_s=window[1],
                         wall_ns=time.monotonic_ns() - self.t0, start_realtime_ns=0, first_done_ns=0)


def _import_kvikio():
    try:
        import cupy
        import kvikio
    except ImportError as e:
        raise UsageError(f"--mode kvikio needs {e.name}: pip install gdsbench[cu13]") from None
    return cupy, kvikio


def run(spec: JobSpec, progress=None) -> tuple[RunRecord, str]:
    """Measure a resolved kvikio job; returns its record and the data path kvikio took."""
    cupy, kvikio = _import_kvikio()
    run_cpu0 = _cpu_seconds(resource.RUSAGE_SELF)
    defaults, _ = _modules()
    direct_posix = _configure(defaults, spec)
    monitor = kvikio.SummaryMonitor() if hasattr(kvikio, "SummaryMonitor") else None
    with cupy.cuda.Device(spec.gpu[0]):
        try:
            handle = kvikio.CuFile(spec.path, "r")
        except RuntimeError as e:
            raise IoFailure(f"kvikio cannot open {spec.path}: {e}") from None
        try:
            # what kvikio will do, not what was asked: O_DIRECT needs the file system's support too
            direct_posix = direct_posix and bool(getattr(handle, "is_direct_io_supported", lambda: False)())
            before = monitor.get() if monitor else None
            loop = _Loop(spec, cupy, handle, progress)
            loop.run()
            backends = _backend_shares(monitor.get().since(before)) if monitor else None
        finally:
            if monitor:
                monitor.stop()
            handle.close()
        record = loop.record(run_cpu0)
    return record, compat_description(kvikio, spec.bs, direct_posix, backends)


class SampleReader:
    """--mode kvikio in `gdsbench train`: the native SampleReader's interface,
    reading each sample whole with one CuFile.pread into a cupy buffer on this
    accelerator's GPU; kvikio splits it into --kvikio-task-size tasks on its
    thread pool, as a RAPIDS data loader would. A sample is one latency sample
    (pread to its future returning). Verification checks the blocks on the GPU."""

    def __init__(self, spec: JobSpec, gpu: int):
        self.cupy, self.kvikio = _import_kvikio()
        _configure(_modules()[0], spec)  # kvikio's settings are global: the same for every reader
        self.spec, self.gpu = spec, gpu
        self.files: dict[str, object] = {}  # path -> kvikio.CuFile, opened on first read
        self.buffer = None  # grown to the largest sample read so far
        self.latency = _native.LatencyHistogram()
        self.verified_blocks = 0
        self._bad: set[tuple[str, int]] = set()  # distinct bad blocks: read again, counted once
        self.first_mismatch_path: str | None = None
        self.first_mismatch_offset = 0

    @property
    def verify_mismatches(self) -> int:
        return len(self._bad)

    def read(self, path: str, offset: int, length: int) -> tuple[int, int, int]:
        """Read one sample: (bytes, 1, ns from pread() to its future returning)."""
        with self.cupy.cuda.Device(self.gpu):
            if self.buffer is None or self.buffer.size < length:
                self.buffer = self.cupy.empty(length, dtype=self.cupy.uint8)
            handle = self.files.get(path)
            if handle is None:
                try:
                    handle = self.files[path] = self.kvikio.CuFile(path, "r")
                except RuntimeError as e:
                    raise IoFailure(f"kvikio cannot open {path}: {e}") from None
            started = time.monotonic_ns()
            try:
                got = handle.pread(self.buffer, length, offset).get()
            except RuntimeError as e:
                raise IoFailure(f"kvikio read of {length} bytes at offset {offset} of {path}: {e}") from None
            took = time.monotonic_ns() - started
            if got != length:
                raise IoFailure(f"short read: kvikio read {got} of {length} bytes at offset {offset} of {path}")
            if self.spec.verify:
                bad = bad_blocks(self.cupy, self.buffer[:length], offset)
                self.verified_blocks += length // _native.PATTERN_BLOCK
                if bad and self.first_mismatch_path is None:
                    self.first_mismatch_path, self.first_mismatch_offset = path, min(bad)
                self._bad.update((path, b) for b in bad)
        self.latency.add(np.asarray([took], dtype=np.uint64))
        return got, 1, took


def sample_data_path(spec: JobSpec, typical_read: int) -> str:
    """How kvikio reads samples of about this size, from its settings (train's
    readers run in other processes, so its statistics are not at hand here)."""
    _, kvikio = _import_kvikio()
    defaults, _ = _modules()
    return compat_description(kvikio, typical_read, _configure(defaults, spec))
