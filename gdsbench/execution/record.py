"""What a run reports, as typed records: per thread, and per process (a
native run, a kvikio run, or several processes aggregated). Every producer
builds these, so a field one of them forgets fails where it is built; and the
native module's own list of fields is checked against them on import."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields

import numpy as np

from gdsbench import _native


def _per_thread(combine: str | None, *, window_time: bool = False, **kw):
    """A ThreadRecord field, with how a run's threads' values become one
    (RunRecord.thread_totals): "sum"; "max"; "latest" (the max among threads
    that completed a read); "merge" (histograms); "timeline" (interval by
    interval); "first_bad" (the lowest among threads that saw a bad block); or
    None (kept per thread only). window_time: ns from the window's start, which
    aggregation moves onto the common time base."""
    return field(metadata={"combine": combine, "window_time": window_time}, **kw)


@dataclass
class ThreadRecord:
    """One worker thread's figures, as native/job.hpp's GDS_THREAD_RESULT_FIELDS lists them."""

    gpu: int = _per_thread(None)  # GPU this thread read into (-1: none)
    latency: _native.LatencyHistogram = _per_thread("merge")
    bytes: int = _per_thread("sum")
    ops: int = _per_thread("sum")
    first_submit_ns: int = _per_thread(None, window_time=True)
    last_complete_ns: int = _per_thread("latest", window_time=True)
    timeline_bytes: np.ndarray = _per_thread("timeline")  # bytes completed per interval
    cpu_user_s: float = _per_thread("sum")  # this thread, measured window
    cpu_sys_s: float = _per_thread("sum")
    verified_blocks: int = _per_thread("sum")
    verify_mismatches: int = _per_thread("sum")
    first_mismatch_offset: int = _per_thread("first_bad")
    passes: int = _per_thread("max")  # passes over its slice begun
    reads_while_copying: int = _per_thread("sum")  # bounce: reads issued while a copy was in flight
    connections: int = _per_thread("sum")  # connections its engine opened (curl)
    retries: int = _per_thread("sum")  # requests its engine tried again (curl --retries), apart from ops
    streamed_bytes: int = _per_thread("sum")  # of its reads, copied with streaming stores (curl, nfs: copy.hpp)
    fsyncs: int = _per_thread("sum")  # writes: fsync(2) calls (--fsync-every, --fsync-end)
    fsync_latency: _native.LatencyHistogram = _per_thread("merge")
    first_byte_latency: _native.LatencyHistogram = _per_thread("merge")  # to the answer's first byte (curl)
    # reads of blocks this thread had not read before in this run (its first pass), apart from re-reads
    first_pass_bytes: int = _per_thread("sum")
    first_pass_ops: int = _per_thread("sum")
    first_pass_last_ns: int = _per_thread("max", window_time=True)  # when its last first-pass read completed
    first_pass_latency: _native.LatencyHistogram = _per_thread("merge")
    reread_latency: _native.LatencyHistogram = _per_thread("merge")
    stonewall_bytes: int = _per_thread("sum")  # what it had done when the first worker anywhere finished
    stonewall_ops: int = _per_thread("sum")
    stonewall_ns: int = _per_thread("max", window_time=True)
    # --round-reads: a LatencyHistogram per round, this thread's reads (merged by round in job/result.py)
    round_latency: list = _per_thread(None, default_factory=list)

    def __post_init__(self):
        self.timeline_bytes = np.asarray(self.timeline_bytes, dtype=np.uint64)

    @classmethod
    def empty(cls) -> ThreadRecord:
        return cls(gpu=-1, latency=_native.LatencyHistogram(), bytes=0, ops=0, first_submit_ns=0, last_complete_ns=0,
                   timeline_bytes=np.zeros(0, np.uint64), cpu_user_s=0.0, cpu_sys_s=0.0, verified_blocks=0,
                   verify_mismatches=0, first_mismatch_offset=0, passes=0, reads_while_copying=0, connections=0,
                   retries=0, streamed_bytes=0, fsyncs=0, fsync_latency=_native.LatencyHistogram(),
                   first_byte_latency=_native.LatencyHistogram(), first_pass_bytes=0, first_pass_ops=0,
                   first_pass_last_ns=0, first_pass_latency=_native.LatencyHistogram(),
                   reread_latency=_native.LatencyHistogram(), stonewall_bytes=0, stonewall_ops=0, stonewall_ns=0)


@dataclass
class RunRecord:
    threads: list[ThreadRecord]
    interrupted: bool
    start_skew_ns: int | None  # spread of thread (or process) start times; None: not known (MPI ranks' clocks)
    process_cpu_user_s: float  # whole process(es), whole run
    process_cpu_sys_s: float
    window_cpu_user_s: float  # whole process(es), measured window
    window_cpu_sys_s: float
    wall_ns: int  # whole run, set-up and ramp included
    start_realtime_ns: int  # CLOCK_REALTIME at the start gate (lines up processes)
    first_done_ns: int  # when a worker first finished its work (ns after the gate; 0: none)
    round_end_ns: list[int] = field(default_factory=list)  # --round-reads: when each round ended, ns into the window
    procs: list[dict] = field(default_factory=list)  # per process or rank, when there were several

    def thread_totals(self) -> dict:
        """Every combined ThreadRecord field over this run's threads, by its declared rule."""
        out: dict = {}
        for f in fields(ThreadRecord):
            rule, values = f.metadata["combine"], [getattr(t, f.name) for t in self.threads]
            if rule == "sum":
                out[f.name] = sum(values)
            elif rule == "max":
                out[f.name] = max(values, default=0)
            elif rule == "latest":
                out[f.name] = max((v for v, t in zip(values, self.threads) if t.ops), default=0)
            elif rule == "merge":
                out[f.name] = _native.LatencyHistogram()
                for h in values:
                    out[f.name].merge(h)
            elif rule == "timeline":
                timeline = np.zeros(max((len(v) for v in values), default=0), np.uint64)
                for v in values:
                    timeline[:len(v)] += v
                out[f.name] = timeline
            elif rule == "first_bad":
                out[f.name] = min((v for v, t in zip(values, self.threads) if t.verify_mismatches), default=None)
        return out

    @classmethod
    def from_native(cls, raw: dict) -> RunRecord:
        """The dict gdsbench._native.run returns."""
        return cls(**dict(raw, threads=[ThreadRecord(**t) for t in raw["threads"]]))

    @classmethod
    def nothing_measured(cls) -> RunRecord:
        """A part stopped before it started (Ctrl-C at the start barrier)."""
        return cls(threads=[], interrupted=True, start_skew_ns=0, process_cpu_user_s=0.0, process_cpu_sys_s=0.0,
                   window_cpu_user_s=0.0, window_cpu_sys_s=0.0, wall_ns=0, start_realtime_ns=0, first_done_ns=0)


WINDOW_TIMES = tuple(f.name for f in fields(ThreadRecord) if f.metadata["window_time"])


def _check_against_native() -> None:
    for record, native, extra in ((ThreadRecord, _native.THREAD_RESULT_FIELDS, ()),
                                  (RunRecord, _native.JOB_RESULT_FIELDS, ("procs",))):
        ours = {f.name for f in dataclasses.fields(record)} - set(extra)
        if ours != set(native):
            raise ImportError(f"gdsbench._native and {record.__name__} disagree on fields: "
                              f"{sorted(ours ^ set(native))}; rebuild gdsbench (scripts/setup)")


_check_against_native()
