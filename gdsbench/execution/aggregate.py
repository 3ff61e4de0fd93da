"""Several processes' runs as one, exactly, as IOR aggregates:

    bytes, reads, CPU      summed
    bandwidth              total bytes / (latest end - earliest start)
    latency percentiles    from the summed histograms (exact, never averaged)
    per-process figures    kept in RunRecord.procs

Where the runs line up: local processes share one clock, and line up on the
CLOCK_REALTIME each took at its start gate. MPI ranks may sit on hosts whose
clocks differ, so there, as IOR does, every rank's times stay its own (measured
from its own start gate, on its monotonic clock) and the starts are aligned by
the barrier every rank leaves just before its gate (`aligned=True`): no host's
clock is compared with another's, and the start skew is not known."""

from __future__ import annotations

import dataclasses

import numpy as np

from gdsbench.execution.record import WINDOW_TIMES, RunRecord, ThreadRecord
from gdsbench.job.result import part_summary


def _round_ends(runs: list[RunRecord], t0: int) -> list[int]:
    """--round-reads across processes: round k of the job is every process's k-th round, and it
    ends when the last of them does (times on the common base). Each thread's per-round
    histograms already line up by round index."""
    if not runs or not all(r.round_end_ns for r in runs):
        return []
    complete = min(len(r.round_end_ns) for r in runs)
    shifts = [r.start_realtime_ns - t0 if r.start_realtime_ns else 0 for r in runs]
    return [max(shift + r.round_end_ns[k] for r, shift in zip(runs, shifts)) for k in range(complete)]


def aggregate(runs: list[RunRecord], infos: list[dict], interval_ns: int, aligned: bool = False) -> RunRecord:
    """Parts' runs as one run on one time base: the earliest start gate, or (aligned) the
    barrier every part left together."""
    if aligned:  # a host's wall clock says nothing of another's: each part starts at 0, on its own clock
        runs = [dataclasses.replace(r, start_realtime_ns=0) for r in runs]
    starts = [r.start_realtime_ns for r in runs if r.start_realtime_ns]
    t0 = min(starts) if starts else 0
    threads: list[ThreadRecord] = []
    procs = []
    first_done = None
    for index, (run, info) in enumerate(zip(runs, infos)):
        shift = run.start_realtime_ns - t0 if run.start_realtime_ns else 0
        ticks = shift // interval_ns
        for t in run.threads:
            moved = {}
            if t.ops:  # times are relative to the part's own start: move them to the common one
                moved = {k: getattr(t, k) + shift for k in WINDOW_TIMES}
            if ticks:
                moved["timeline_bytes"] = np.concatenate((np.zeros(ticks, np.uint64), t.timeline_bytes))
            threads.append(dataclasses.replace(t, **moved))
        if run.first_done_ns:
            done = shift + run.first_done_ns
            first_done = done if first_done is None else min(first_done, done)
        total = run.thread_totals()
        procs.append({
            "proc": index, **info, "start_offset_ns": shift, "end_offset_ns": shift + total["last_complete_ns"],
            **part_summary(total["bytes"], total["ops"], total["last_complete_ns"], total["latency"]),
            "cpu_s": run.window_cpu_user_s + run.window_cpu_sys_s,
            "worker_cpu_s": total["cpu_user_s"] + total["cpu_sys_s"],
            "interrupted": run.interrupted,
        })
    return RunRecord(
        round_end_ns=_round_ends(runs, t0),
        threads=threads or [ThreadRecord.empty()],  # empty when interrupted before any process started
        interrupted=any(r.interrupted for r in runs),
        start_skew_ns=None if aligned else (max(starts) - min(starts)) if starts else 0,
        process_cpu_user_s=sum(r.process_cpu_user_s for r in runs),
        process_cpu_sys_s=sum(r.process_cpu_sys_s for r in runs),
        window_cpu_user_s=sum(r.window_cpu_user_s for r in runs),
        window_cpu_sys_s=sum(r.window_cpu_sys_s for r in runs),
        wall_ns=max(r.wall_ns for r in runs),
        start_realtime_ns=t0,
        first_done_ns=first_done or 0,
        procs=procs,
    )

