"""The outcome of one job: what was measured, how, and on what.

Figures are computed from the merged native statistics, never re-measured in
Python. Bandwidth is bytes over the measured window: from the end of the ramp
to the last completion of any thread (IOR's rule: earliest start, latest end).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gdsbench import _native
from gdsbench.job.spec import JobSpec

# The result schema's version (gdsbench/results/schema.py publishes the schemas): it changes when a
# field's meaning does (a unit, a rule), not when a field is added.
SCHEMA_VERSION = 1

PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)


def percentile_key(p: float) -> str:
    """50 -> 'p50', 99.9 -> 'p99.9'."""
    return "p" + f"{p:g}"


@dataclass
class Result:
    spec: JobSpec  # as run: engine, region and runtime resolved
    bytes: int
    ops: int
    elapsed_ns: int  # measured window: end of ramp to last completion
    latency: _native.LatencyHistogram  # per-read latency, all threads merged
    cpu_user_s: float  # whole process, measured window: one rule for every mode
    cpu_sys_s: float
    timeline_bytes: list[int]  # bytes completed per spec.interval_ns, all threads
    threads: list[dict]  # per-thread breakdown
    passes: int = 0  # most passes over its slice any thread began
    data_path: str = ""  # what the bytes really passed through (never a path they did not take)
    reads_while_copying: int = 0  # bounce modes: reads issued while a copy to the GPU was in flight
    connections: int = 0  # connections the engine opened (curl): against ops, whether they were kept alive
    first_byte: _native.LatencyHistogram | None = None  # issue to the first byte of each answer (curl), all threads
    retries: int = 0  # requests tried again after a failure (curl --retries), not counted in ops
    # read bytes the engine copied out of its library's buffers with streaming stores, the reads in flight
    # past half the last-level cache (curl, nfs: native/copy.hpp); over the whole run, its --ramp included
    streamed_bytes: int = 0
    fsync: _native.LatencyHistogram | None = None  # writes: each fsync(2), all threads
    first_pass: dict | None = None  # reads of blocks not read before in this run, apart from re-reads (_passes)
    reread: dict | None = None
    procs: list[dict] = field(default_factory=list)  # per process or rank, when there were several
    stonewall: dict | None = None  # --stonewall: what all had done when the first finished
    interrupted: bool = False
    cached_fraction: float | None = None  # of the region, just before the run
    cached_fraction_after: float | None = None
    verified_blocks: int = 0
    verify_mismatches: int = 0
    first_mismatch_offset: int | None = None
    start_skew_ns: int | None = 0
    wall_ns: int = 0  # whole run, ramp and set-up included
    worker_cpu_user_s: float = 0.0  # the worker threads alone, measured window
    worker_cpu_sys_s: float = 0.0
    process_cpu_user_s: float = 0.0  # whole process, whole run (set-up and teardown too)
    process_cpu_sys_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    environment: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)  # the gdsbench and libraries that made it (system/provenance.py)
    round_ns: list[int] = field(default_factory=list)  # --round-reads: each whole round's time, in order
    round_latency: list = field(default_factory=list)  # its reads' latency, a histogram per round ([]: not kept)

    @classmethod
    def from_run(cls, spec: JobSpec, run, **extra: Any) -> Result:
        """From a RunRecord (gdsbench.execution.record): one run, or several processes aggregated."""
        threads, total = run.threads, run.thread_totals()
        stonewall = None
        if spec.stonewall:
            wall_ns, wall_bytes = total["stonewall_ns"], total["stonewall_bytes"]
            stonewall = {
                "bytes": wall_bytes,
                "ops": total["stonewall_ops"],
                "elapsed_ns": wall_ns,
                "bandwidth_bytes_per_s": wall_bytes / (wall_ns / 1e9) if wall_ns else 0.0,
                "first_done_ns": max(run.first_done_ns - spec.ramp_ns, 0),
            }
        round_ns, round_latency = _rounds(spec, run)
        return cls(
            spec=spec,
            round_ns=round_ns,
            round_latency=round_latency,
            bytes=total["bytes"],
            ops=total["ops"],
            elapsed_ns=total["last_complete_ns"],
            latency=total["latency"],
            cpu_user_s=run.window_cpu_user_s,
            cpu_sys_s=run.window_cpu_sys_s,
            worker_cpu_user_s=total["cpu_user_s"],
            worker_cpu_sys_s=total["cpu_sys_s"],
            timeline_bytes=total["timeline_bytes"].tolist(),
            threads=[_thread_summary(i, t) for i, t in enumerate(threads)],
            passes=total["passes"],
            reads_while_copying=total["reads_while_copying"],
            connections=total["connections"],
            first_byte=total["first_byte_latency"],
            retries=total["retries"],
            streamed_bytes=total["streamed_bytes"],
            fsync=total["fsync_latency"],
            **_passes(threads, total),
            procs=run.procs,
            stonewall=stonewall,
            interrupted=run.interrupted,
            verified_blocks=total["verified_blocks"],
            verify_mismatches=total["verify_mismatches"],
            first_mismatch_offset=total["first_mismatch_offset"],
            start_skew_ns=run.start_skew_ns,
            wall_ns=run.wall_ns,
            process_cpu_user_s=run.process_cpu_user_s,
            process_cpu_sys_s=run.process_cpu_sys_s,
            **extra,
        )

    @property
    def first_byte_seen(self) -> bool:
        """Whether its engine timed answers' first bytes (curl)."""
        return self.first_byte is not None and self.first_byte.count > 0

    @property
    def seconds(self) -> float:
        return self.elapsed_ns / 1e9

    @property
    def bandwidth(self) -> float:
        """Bytes per second over the measured window."""
        return self.bytes / self.seconds if self.elapsed_ns else 0.0

    @property
    def iops(self) -> float:
        return self.ops / self.seconds if self.elapsed_ns else 0.0

    @property
    def in_flight(self) -> float:
        """Reads in flight on average (Little's law: IOPS x mean latency): the
        depth the job really ran at, whatever its --qd and --threads asked."""
        return self.iops * self.latency.mean / 1e9 if self.ops else 0.0

    @property
    def cpu_s_per_gb(self) -> float | None:
        """Process CPU seconds (user + system) over the measured window, per GB (10^9 bytes) moved."""
        return (self.cpu_user_s + self.cpu_sys_s) / (self.bytes / 1e9) if self.bytes else None

    @property
    def worker_cpu_s_per_gb(self) -> float | None:
        """The worker threads' share of cpu_s_per_gb."""
        return (self.worker_cpu_user_s + self.worker_cpu_sys_s) / (self.bytes / 1e9) if self.bytes else None

    def percentile(self, p: float) -> float:
        """Latency percentile in ns, from the merged histogram (error under 1%)."""
        return self.latency.percentile(p)

    def summary(self) -> dict[str, Any]:
        """The figures of this run, flat, units in their names (results columns)."""
        lat = self.latency
        return {
            "schema_version": SCHEMA_VERSION,
            "mode": self.spec.mode,
            "data_path": self.data_path,
            "gpu_simulated": self.spec.on_gpu and self.spec.simulated,
            "interrupted": self.interrupted,
            "bytes": self.bytes,
            "ops": self.ops,
            "elapsed_ns": self.elapsed_ns,
            "bandwidth_bytes_per_s": self.bandwidth,
            "iops": self.iops,
            "in_flight": self.in_flight,
            "lat_min_ns": lat.min,
            "lat_mean_ns": lat.mean,
            "lat_stdev_ns": lat.variance**0.5,
            **{f"lat_{percentile_key(p)}_ns": self.percentile(p) for p in PERCENTILES},
            "lat_max_ns": lat.max,
            "cpu_user_s": self.cpu_user_s,
            "cpu_sys_s": self.cpu_sys_s,
            "cpu_s_per_gb": self.cpu_s_per_gb,
            "worker_cpu_user_s": self.worker_cpu_user_s,
            "worker_cpu_sys_s": self.worker_cpu_sys_s,
            "worker_cpu_s_per_gb": self.worker_cpu_s_per_gb,
            "process_cpu_user_s": self.process_cpu_user_s,
            "process_cpu_sys_s": self.process_cpu_sys_s,
            "cached_fraction": self.cached_fraction,
            "cached_fraction_after": self.cached_fraction_after,
            "passes": self.passes,
            "reads_while_copying": self.reads_while_copying,
            "connections": self.connections,
            "first_byte_p50_ns": self.first_byte.percentile(50) if self.first_byte_seen else None,
            "first_byte_p99_ns": self.first_byte.percentile(99) if self.first_byte_seen else None,
            "retried_requests": self.retries,  # not "retries": that is --retries's column in a point
            "streamed_bytes": self.streamed_bytes,
            "fsyncs": self.fsync.count if self.fsync else 0,
            "fsync_p50_ns": self.fsync.percentile(50) if self.fsync and self.fsync.count else None,
            "fsync_max_ns": self.fsync.max if self.fsync and self.fsync.count else None,
            **{f"{name}_{k}": (part or {}).get(k) for name, part in (("first_pass", self.first_pass),
                                                                     ("reread", self.reread)) for k in _PASS_FIGURES},
            "processes": len(self.procs) or 1,
            "hosts": len({p.get("host") for p in self.procs}) or 1,
            # each host's ranks, bytes and rate (IOR's rule within the host), as JSON text: one column, any host count
            "per_host": json.dumps(per_host(self.procs), separators=(",", ":")) if self.procs else None,
            "stonewall_bytes": self.stonewall["bytes"] if self.stonewall else None,
            "stonewall_elapsed_ns": self.stonewall["elapsed_ns"] if self.stonewall else None,
            "stonewall_bandwidth_bytes_per_s": self.stonewall["bandwidth_bytes_per_s"] if self.stonewall else None,
            "verified_blocks": self.verified_blocks,
            "verify_mismatches": self.verify_mismatches,
            "first_mismatch_offset": self.first_mismatch_offset,
            "start_skew_ns": self.start_skew_ns,
            "wall_ns": self.wall_ns,
        }

    def to_dict(self) -> dict:
        """A JSON-ready record: the summary figures, the spec, timeline,
        per-thread breakdown, histogram and environment."""
        return {
            "spec": dataclasses.asdict(self.spec),
            **self.summary(),
            "timeline": {"interval_ns": self.spec.interval_ns, "bytes": self.timeline_bytes},
            "rounds": {"reads": self.spec.round_reads, "ns": self.round_ns,
                       "latency": [histogram_to_dict(h) for h in self.round_latency]},
            "threads": self.threads,
            "per_process": self.procs,
            "per_host": per_host(self.procs),  # as a list here (the summary's column holds it as JSON text)
            "latency_histogram": histogram_to_dict(self.latency),
            "warnings": self.warnings,
            "environment": self.environment,
            "provenance": self.provenance,
        }


_PASS_FIGURES = ("bytes", "ops", "bandwidth_bytes_per_s", "lat_p50_ns", "lat_p99_ns")


def _passes(threads, total: dict) -> dict:
    """The run's reads of blocks not read before in it (each thread's first pass over its part)
    and its re-reads, apart: a re-read may come from a cache the first read filled (a server's,
    which cannot be seen from here). Each one's rate is the sum of the threads' rates, a thread's
    first pass timed from its first issue in the window to its last first-pass read, its re-reads
    from there to its last read. None for a part with no reads."""
    def rate(nbytes: int, ns: int) -> float:
        return nbytes / (ns / 1e9) if ns > 0 else 0.0

    def part(nbytes: int, ops: int, bandwidth: float, latency) -> dict | None:
        return {"bytes": nbytes, "ops": ops, "bandwidth_bytes_per_s": bandwidth, "lat_p50_ns": latency.percentile(50),
                "lat_p99_ns": latency.percentile(99)} if ops else None

    first = sum(rate(t.first_pass_bytes, t.first_pass_last_ns - t.first_submit_ns) for t in threads)
    again = sum(rate(t.bytes - t.first_pass_bytes, t.last_complete_ns - t.first_pass_last_ns) for t in threads
                if t.ops > t.first_pass_ops)
    return {"first_pass": part(total["first_pass_bytes"], total["first_pass_ops"], first, total["first_pass_latency"]),
            "reread": part(total["bytes"] - total["first_pass_bytes"], total["ops"] - total["first_pass_ops"], again,
                           total["reread_latency"])}


def _rounds(spec: JobSpec, run) -> tuple[list[int], list]:
    """Each whole round's time (its end minus the previous one's), and its reads' latency merged over
    threads; [] for the latency where more rounds were run than each thread keeps histograms of
    (native MAX_ROUND_HISTOGRAMS shared among a process's threads)."""
    if not run.round_end_ns:
        return [], []
    # two threads can count their completions in the other order than they happened: keep the ends in order
    ends = np.maximum.accumulate(np.asarray(run.round_end_ns, dtype=np.int64))
    times = np.diff(ends, prepend=0).tolist()
    if len(times) > _native.MAX_ROUND_HISTOGRAMS // spec.threads:
        return times, []
    merged = []
    for k in range(len(times)):
        h = _native.LatencyHistogram()
        for t in run.threads:
            if k < len(t.round_latency):  # a thread that completed nothing in a round has no histogram for it
                h.merge(t.round_latency[k])
        merged.append(h)
    return times, merged


def histogram_to_dict(h: _native.LatencyHistogram) -> dict:
    """Sparse form: the non-empty buckets by index, enough to merge exactly."""
    counts = h.counts
    nonzero = counts.nonzero()[0]
    return {
        "buckets": int(_native.LatencyHistogram.BUCKETS),
        "index": nonzero.tolist(),
        "count": counts[nonzero].tolist(),
        "min_ns": h.min,
        "max_ns": h.max,
        "mean_ns": h.mean,
        "m2": h.m2,
    }


def part_summary(nbytes: int, ops: int, last_complete_ns: int, latency: _native.LatencyHistogram) -> dict:
    """What a thread's or a process's row says of its reads: the one place both are summarised."""
    seconds = last_complete_ns / 1e9
    return {"bytes": nbytes, "ops": ops, "bandwidth_bytes_per_s": nbytes / seconds if seconds else 0.0,
            "lat_p50_ns": latency.percentile(50), "lat_p99_ns": latency.percentile(99)}


def per_host(procs: list[dict]) -> list[dict]:
    """Each host's share of a run, by IOR's rule within the host: its ranks' bytes over its
    latest end minus its earliest start (on the run's time base). Hosts in order of first rank."""
    hosts: dict[str, list[dict]] = {}
    for p in procs:
        hosts.setdefault(p.get("host", "?"), []).append(p)
    out = []
    for host, ranks in hosts.items():
        nbytes = sum(p["bytes"] for p in ranks)
        elapsed = max(p["end_offset_ns"] for p in ranks) - min(p["start_offset_ns"] for p in ranks)
        out.append({"host": host, "ranks": [p.get("rank", p["proc"]) for p in ranks], "bytes": nbytes,
                    "ops": sum(p["ops"] for p in ranks), "elapsed_ns": elapsed,
                    "bandwidth_bytes_per_s": nbytes / (elapsed / 1e9) if elapsed > 0 else 0.0})
    return out


def _thread_summary(index: int, t) -> dict:
    return {
        "thread": index,
        "gpu": t.gpu,
        **part_summary(t.bytes, t.ops, t.last_complete_ns, t.latency),
        "lat_max_ns": t.latency.max,
        "cpu_user_s": t.cpu_user_s,
        "cpu_sys_s": t.cpu_sys_s,
        "passes": t.passes,
    }

