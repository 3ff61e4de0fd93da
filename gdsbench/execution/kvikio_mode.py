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

from . import _native
from .errors import IoFailure, UsageError
from .pattern import check_device
from .spec import JobSpec

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
        defaults.set({"auto_direct_io_read": spec.is_direct})
        return spec.is_direct
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


def run(spec: JobSpec, progress=None) -> tuple[dict, str]:
    """Measure a resolved kvikio job; returns (the native-shaped raw result, data path).

    The measured window follows the native rule: it opens when the ramp ends,
    and a read counts if it completes inside it (reads in flight at the end of
    the ramp included, and counted against --io-size). CPU is the process's
    over the window (kvikio's pool threads are this process's threads)."""
    try:
        import cupy
        import kvikio
    except ImportError as e:
        raise UsageError(f"--mode kvikio needs {e.name}: pip install gdsbench[cu13]") from None
    defaults, _ = _modules()
    direct_posix = _configure(defaults, spec)
    monitor = kvikio.SummaryMonitor() if hasattr(kvikio, "SummaryMonitor") else None
    gpu = int(spec.gpu.split(",")[0])
    nblocks = spec.size // spec.bs
    budget = spec.io_size // spec.bs if spec.io_size else None
    latency = _native.LatencyHistogram()
    samples: list[int] = []
    timeline: list[int] = []
    verified = mismatches = 0
    first_bad = None
    interrupted = False
    run_cpu0 = _cpu_seconds(resource.RUSAGE_SELF)
    window_cpu0 = thread_cpu0 = None  # process and this thread's CPU when the window opened
    with cupy.cuda.Device(gpu):
        buffers = [cupy.empty(spec.bs, dtype=cupy.uint8) for _ in range(spec.qd)]
        order = _native.OffsetSequence(spec.offset, nblocks, spec.bs, spec.pattern == "rand", spec.seed)
        offsets = order.take(min(nblocks, 4096))
        try:
            handle = kvikio.CuFile(spec.path, "r")
        except RuntimeError as e:
            raise IoFailure(f"kvikio cannot open {spec.path}: {e}") from None
        # what kvikio will do, not what was asked: O_DIRECT needs the file system's support too
        direct_posix = direct_posix and bool(getattr(handle, "is_direct_io_supported", lambda: False)())
        before = monitor.get() if monitor else None
        t0 = time.monotonic_ns()
        measure_start = t0 + spec.ramp_ns
        deadline = measure_start + spec.runtime_ns if spec.runtime_ns else None
        inflight: deque = deque()  # (future, issued at, file offset, buffer index, done at), oldest first
        free = deque(range(spec.qd))
        done_bytes = ops = 0
        measuring = False
        last = 0
        position = 0

        def start_measuring() -> None:
            nonlocal measuring, window_cpu0, thread_cpu0
            measuring = True
            window_cpu0 = _cpu_seconds(resource.RUSAGE_SELF)
            thread_cpu0 = _cpu_seconds(resource.RUSAGE_THREAD)

        try:
            while True:
                while free:
                    now = time.monotonic_ns()
                    if not measuring and now >= measure_start:
                        start_measuring()
                    # --io-size: completions in the window plus reads outstanding, so exactly the budget completes
                    if (deadline is not None and now >= deadline) or (
                            measuring and budget is not None and ops + len(inflight) >= budget):
                        break
                    index = free.popleft()
                    if position and position % len(offsets) == 0:
                        offsets = order.take(len(offsets))
                    off = int(offsets[position % len(offsets)])
                    position += 1
                    try:  # kvikio may read (and fail) inside pread() itself: small reads are synchronous
                        future = handle.pread(buffers[index], spec.bs, off)
                    except RuntimeError as e:
                        raise _read_failed(spec, off, e) from None
                    # a read kvikio did inside pread() is complete now, not when its future is collected
                    # after the next --qd preads: else its latency, and the depth, would read --qd times high
                    done_at = time.monotonic_ns() if future.done() else None
                    inflight.append((future, now, off, index, done_at))
                if not inflight:
                    break
                future, started, off, index, done_at = inflight.popleft()
                try:
                    got = future.get()
                except RuntimeError as e:
                    raise _read_failed(spec, off, e) from None
                end = done_at or time.monotonic_ns()
                free.append(index)
                if got != spec.bs:
                    raise IoFailure(f"short read: kvikio read {got} of {spec.bs} bytes at offset {off} of {spec.path}")
                if spec.verify:
                    bad, first = check_device(buffers[index].data.ptr, spec.bs, off, gpu)
                    verified += spec.bs // _native.PATTERN_BLOCK
                    if bad and first_bad is None:
                        first_bad = first
                    mismatches += bad
                if not measuring and end >= measure_start:
                    start_measuring()
                if end < measure_start:  # finished during the ramp, whenever it was collected
                    continue
                samples.append(end - started)
                done_bytes += spec.bs
                ops += 1
                last = end - measure_start
                tick = last // spec.interval_ns
                timeline.extend([0] * (tick + 1 - len(timeline)))
                timeline[tick] += spec.bs
                if progress and ops % 64 == 0:
                    progress(done_bytes, last)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            for future, *_ in inflight:  # no buffer is freed under a read still in flight
                try:
                    future.get()
                except Exception:  # noqa: BLE001 - the run already failed or stopped
                    pass
            window = (_cpu_seconds(resource.RUSAGE_SELF), _cpu_seconds(resource.RUSAGE_THREAD))
            backends = _backend_shares(monitor.get().since(before)) if monitor else None
            if monitor:
                monitor.stop()
            handle.close()
    latency.add(np.asarray(samples, dtype=np.uint64))
    zero = (0.0, 0.0)
    process_cpu = [b - a for a, b in zip(window_cpu0 or zero, window[0] if window_cpu0 else zero)]
    thread_cpu = [b - a for a, b in zip(thread_cpu0 or zero, window[1] if thread_cpu0 else zero)]
    thread = {
        "gpu": gpu, "latency": latency, "bytes": done_bytes, "ops": ops, "first_submit_ns": 0,
        "last_complete_ns": last, "timeline_bytes": np.asarray(timeline, dtype=np.uint64),
        # the one Python thread that drives kvikio; its pool threads count in the process's CPU
        "cpu_user_s": thread_cpu[0], "cpu_sys_s": thread_cpu[1],
        "verified_blocks": verified, "verify_mismatches": mismatches, "first_mismatch_offset": first_bad or 0,
        "passes": -(-position // nblocks), "reads_while_copying": 0,
        "stonewall_bytes": done_bytes, "stonewall_ops": ops, "stonewall_ns": last,
    }
    wall = time.monotonic_ns() - t0
    raw = {"threads": [thread], "interrupted": interrupted, "start_skew_ns": 0,
           "process_cpu_user_s": window[0][0] - run_cpu0[0], "process_cpu_sys_s": window[0][1] - run_cpu0[1],
           "window_cpu_user_s": process_cpu[0], "window_cpu_sys_s": process_cpu[1],
           "wall_ns": wall, "start_realtime_ns": 0, "first_done_ns": 0}
    return raw, compat_description(kvikio, spec.bs, direct_posix, backends)
