"""What a run reports, as typed records: per thread, and per process (a
native run, a kvikio run, or several processes aggregated). Every producer
builds these, so a field one of them forgets fails where it is built; and the
native module's own list of fields is checked against them on import."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from gdsbench import _native


@dataclass
class ThreadRecord:
    gpu: int  # GPU this thread read into (-1: none)
    latency: _native.LatencyHistogram
    bytes: int
    ops: int
    first_submit_ns: int  # relative to the measured window's start
    last_complete_ns: int  # relative to the measured window's start
    timeline_bytes: np.ndarray  # bytes completed per interval
    cpu_user_s: float  # this thread, measured window
    cpu_sys_s: float
    verified_blocks: int
    verify_mismatches: int
    first_mismatch_offset: int
    passes: int  # passes over its slice begun
    reads_while_copying: int  # bounce: reads issued while a copy was in flight
    stonewall_bytes: int  # what it had done when the first worker anywhere finished
    stonewall_ops: int
    stonewall_ns: int
    round_latency: list = field(default_factory=list)  # --round-reads: a LatencyHistogram per round, this thread's reads

    @classmethod
    def empty(cls) -> ThreadRecord:
        return cls(gpu=-1, latency=_native.LatencyHistogram(), bytes=0, ops=0, first_submit_ns=0, last_complete_ns=0,
                   timeline_bytes=np.zeros(0, np.uint64), cpu_user_s=0.0, cpu_sys_s=0.0, verified_blocks=0,
                   verify_mismatches=0, first_mismatch_offset=0, passes=0, reads_while_copying=0, stonewall_bytes=0,
                   stonewall_ops=0, stonewall_ns=0)


@dataclass
class RunRecord:
    threads: list[ThreadRecord]
    interrupted: bool
    start_skew_ns: int  # spread of thread (or process) start times
    process_cpu_user_s: float  # whole process(es), whole run
    process_cpu_sys_s: float
    window_cpu_user_s: float  # whole process(es), measured window
    window_cpu_sys_s: float
    wall_ns: int  # whole run, set-up and ramp included
    start_realtime_ns: int  # CLOCK_REALTIME at the start gate (lines up processes)
    first_done_ns: int  # when a worker first finished its work (ns after the gate; 0: none)
    round_end_ns: list[int] = field(default_factory=list)  # --round-reads: when each round ended, ns into the window
    procs: list[dict] = field(default_factory=list)  # per process or rank, when there were several

    @classmethod
    def from_native(cls, raw: dict) -> RunRecord:
        """The dict gdsbench._native.run returns."""
        return cls(**dict(raw, threads=[ThreadRecord(**t) for t in raw["threads"]]))

    @classmethod
    def nothing_measured(cls) -> RunRecord:
        """A part stopped before it started (Ctrl-C at the start barrier)."""
        return cls(threads=[], interrupted=True, start_skew_ns=0, process_cpu_user_s=0.0, process_cpu_sys_s=0.0,
                   window_cpu_user_s=0.0, window_cpu_sys_s=0.0, wall_ns=0, start_realtime_ns=0, first_done_ns=0)


def _check_against_native() -> None:
    for record, native, extra in ((ThreadRecord, _native.THREAD_RESULT_FIELDS, ()),
                                  (RunRecord, _native.JOB_RESULT_FIELDS, ("procs",))):
        ours = {f.name for f in dataclasses.fields(record)} - set(extra)
        if ours != set(native):
            raise ImportError(f"gdsbench._native and {record.__name__} disagree on fields: "
                              f"{sorted(ours ^ set(native))}; rebuild gdsbench (scripts/setup)")


_check_against_native()
