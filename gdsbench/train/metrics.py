"""What a training emulation reports, computed as DLIO computes it.

Accelerator utilisation (AU) of one accelerator over one block of steps
(DLIO 2.0's utils/statscounter.py, compute_metrics_train):

    AU = sum(compute of steps 2..n) / (block end - block start - time of step 1)

where a step's time runs from the block's start (step 1) or the previous
step's release to the end of its compute: the first step, which fills the
pipeline, is left out of both sides. An epoch's AU is its blocks' AU weighted
by their steps; the run's is the mean over accelerators, then over epochs; it
passes at AU >= the workload's threshold. Throughput is steps x batch / the
block's time per accelerator, summed over accelerators; DLIO's "MB/s" is that
in samples times the nominal record size, in MiB/s. v3.0's DLIO fork (cbe2001)
counts throughput over AU's window instead: the steps after the first over the
block's time less the first step's (mib_per_s_v3), which exceeds what the
storage gave where the loader read ahead during the first step, and its AU counts each
step's compute as measured (the call's start to its end: the sleep as long as it really took,
plus the call's own overhead) where DLIO 2.0 and gdsbench's au_percent count the time asked
for (au_percent_v3 is v3.0's rule; the two part where a busy host oversleeps short steps).

Beyond DLIO: step time and wait-for-data percentiles, and the cost of
stragglers: at each step, how long the first accelerator to finish waited at
the barrier for the last.
"""

from __future__ import annotations

import json

import numpy as np

from gdsbench import _native
from gdsbench.train.pipeline import AcceleratorRecord, EpochRecord
from gdsbench.train.workloads import Workload

MiB = 1 << 20


def block_au(compute_s: np.ndarray, first_step_s: float, start_ns: int, end_ns: int) -> float:
    """DLIO's AU of one block, as a fraction (0 where nothing but the first step was computed)."""
    computed = float(np.sum(compute_s[1:]))
    if computed == 0:
        return 0.0
    return computed / ((end_ns - start_ns) / 1e9 - first_step_s)


def window_samples_per_s(e: EpochRecord, batch: int) -> float:
    """v3.0 DLIO's throughput of one accelerator's epoch (utils/statscounter.py at cbe2001, one block):
    the samples of the steps after the first over the epoch's time less the first step's load and
    compute, the window its AU is taken over (DLIO 2.0 counts every step over the whole time)."""
    steps = len(e.compute_s)
    if steps < 2:
        return 0.0
    window = (e.end_ns - e.start_ns - (e.computed_ns[0] - e.step_start_ns[0])) / 1e9
    return (steps - 1) * batch / window if window > 0 else 0.0


def weighted_by_steps(values: list[float], steps: list[int]) -> float:
    """DLIO's mean of blocks: each block's figure weighted by its steps."""
    return float(np.dot(values, steps) / np.sum(steps)) if np.sum(steps) else 0.0


def measured_compute_s(e: EpochRecord) -> np.ndarray:
    """Each step's compute as it took (the batch there to the compute over), v3.0 DLIO's count."""
    return (e.computed_ns - e.loaded_ns) / 1e9


def epoch_au(e: EpochRecord, blocks: int = 1, measured: bool = False) -> float:
    """AU of one accelerator's epoch, its steps split into `blocks` blocks (DLIO's
    checkpoint blocks; gdsbench writes no checkpoints, so one block per epoch); each
    step's compute as asked for (DLIO 2.0), or as `measured` (v3.0)."""
    compute = measured_compute_s(e) if measured else e.compute_s
    n = len(compute)
    bounds = np.linspace(0, n, blocks + 1).astype(int)
    values, steps = [], []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if hi <= lo:
            continue
        start = e.start_ns if lo == 0 else int(e.released_ns[lo - 1])
        first = (e.computed_ns[lo] - (e.step_start_ns[lo])) / 1e9
        end = int(e.released_ns[hi - 1])
        values.append(block_au(compute[lo:hi], first, start, end))
        steps.append(hi - lo)
    return weighted_by_steps(values, steps)


def mean_over_ranks_then_epochs(per_rank_epoch: np.ndarray) -> float:
    """DLIO's reduction of a figure per (rank, epoch): the mean over ranks in each epoch, then over epochs."""
    return float(np.mean(np.mean(per_rank_epoch, axis=0))) if per_rank_epoch.size else 0.0


def _percentiles(values: np.ndarray, points=(50, 90, 99)) -> dict[str, float | None]:
    return {f"p{p}": (float(np.percentile(values, p)) if values.size else None) for p in points}


def summarise(records: list[AcceleratorRecord], workload: Workload) -> dict:
    """The figures of one run of N accelerators, flat, units in their names."""
    records = sorted(records, key=lambda r: r.rank)
    n, epochs = len(records), len(records[0].epochs)
    au = np.array([[epoch_au(e) for e in r.epochs] for r in records])  # rank x epoch
    au_v3 = np.array([[epoch_au(e, measured=True) for e in r.epochs] for r in records])
    seconds = np.array([[(e.end_ns - e.start_ns) / 1e9 for e in r.epochs] for r in records])
    steps = np.array([[len(e.compute_s) for e in r.epochs] for r in records])
    samples_per_s = steps * workload.batch / np.where(seconds > 0, seconds, np.inf)  # rank x epoch
    total_samples_per_s = float(np.mean(np.sum(samples_per_s, axis=0)))
    in_window = np.array([[window_samples_per_s(e, workload.batch) for e in r.epochs] for r in records])
    window_samples = float(np.mean(np.sum(in_window, axis=0)))  # v3.0's: summed over ranks, mean over epochs
    later = [e for r in records for e in r.epochs]  # steps after the first, every accelerator and epoch
    step_time = np.concatenate([(e.released_ns - e.step_start_ns)[1:] for e in later]) / 1e9
    wait = np.concatenate([(e.loaded_ns - e.step_start_ns)[1:] for e in later]) / 1e9
    first_wait = np.array([(e.loaded_ns[0] - e.step_start_ns[0]) / 1e9 for e in later if len(e.loaded_ns)])
    straggle = np.concatenate([np.max([r.epochs[k].barrier_wait_ns[1:] for r in records], axis=0)
                               for k in range(epochs)]) / 1e9 if n > 1 else np.zeros(0)
    wall = float(np.max(seconds, axis=0).sum()) if seconds.size else 0.0  # the slowest accelerator's, each epoch
    later_wall = sum(max(r.epochs[k].end_ns - int(r.epochs[k].released_ns[0]) for r in records)
                     for k in range(epochs)) / 1e9 if steps.size and steps.min() > 1 else 0.0
    bytes_read = sum(r.bytes_read for r in records)
    latency = _native.LatencyHistogram()
    for r in records:
        latency.merge(r.latency)
    au_mean = mean_over_ranks_then_epochs(au)
    return {
        "accelerators": n,
        "epochs": epochs,
        "steps_per_epoch": int(steps[0][0]) if steps.size else 0,
        "au_percent": 100 * au_mean,
        "au_threshold_percent": 100 * workload.au_threshold,
        "passed": bool(au_mean >= workload.au_threshold),
        "au_percent_v3": 100 * mean_over_ranks_then_epochs(au_v3),  # v3.0 DLIO's: compute as measured
        "au_percent_per_accelerator": (100 * au.mean(axis=1)).tolist(),
        "au_percent_per_epoch": (100 * au.mean(axis=0)).tolist(),
        "samples_per_s": total_samples_per_s,
        "samples_per_s_per_accelerator": samples_per_s.mean(axis=1).tolist(),
        "samples_per_s_per_epoch": np.sum(samples_per_s, axis=0).tolist(),  # DLIO's train_throughput_samples_per_second
        "mib_per_s": total_samples_per_s * workload.record_bytes / MiB,  # DLIO's "MB/s": nominal record size
        "samples_per_s_v3": window_samples,  # v3.0 DLIO's throughput: AU's window, step 1 left out
        "mib_per_s_v3": window_samples * workload.record_bytes / MiB,
        "read_mib_per_s": bytes_read / MiB / wall if wall else 0.0,  # bytes really read, over the wall time
        "bytes_read": bytes_read,
        "samples_read": sum(r.samples_read for r in records),
        "wall_s": wall,
        **{f"step_time_{k}_s": v for k, v in _percentiles(step_time).items()},
        **{f"wait_{k}_s": v for k, v in _percentiles(wait).items()},
        "wait_mean_s": float(wait.mean()) if wait.size else None,
        # the first step's wait, which AU and the waits above leave out: where a loader reads most of a small
        # epoch ahead, most of the epoch's waiting is here, unseen by AU
        "first_wait_s": float(first_wait.mean()) if first_wait.size else None,
        # one accelerator has no barrier to wait at: None, shown as "-"
        "straggler_mean_s": float(straggle.mean()) if straggle.size else None,
        **{f"straggler_{k}_s": v for k, v in _percentiles(straggle).items()},
        # over the same steps as the waits: the first is left out of both
        "straggler_share": float(straggle.sum() / later_wall) if straggle.size and later_wall else None,
        "chunk_latency_p50_ns": latency.percentile(50) if latency.count else None,
        "chunk_latency_p99_ns": latency.percentile(99) if latency.count else None,
        "verified_blocks": sum(r.verified_blocks for r in records),
        "verify_mismatches": sum(r.verify_mismatches for r in records),
        "first_mismatch": next((r.first_mismatch for r in records if r.first_mismatch), None),
        "cpu_s": sum(r.cpu_s for r in records),
        **across_hosts(records, au),
        **host_facts(records),
    }


def by_host(records: list[AcceleratorRecord]) -> dict[str, list[int]]:
    """Each host's accelerators (their indexes in records), hosts in the order of their first one."""
    out: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        out.setdefault(r.host, []).append(i)
    return out


def host_facts(records: list[AcceleratorRecord]) -> dict:
    """Each host's CPUs and memory, hosts in rank order, as its accelerators found them."""
    first = [records[members[0]] for members in by_host(records).values()]
    return {"host_names": [r.host for r in first], "host_cpus": [r.host_cpus for r in first],
            "host_memory_bytes": [r.host_memory_bytes for r in first]}


def across_hosts(records: list[AcceleratorRecord], au: np.ndarray) -> dict:
    """Where the accelerators sit on several hosts: AU per host, and what stragglers cost across
    hosts. At a step's barrier, a host's last accelerator to arrive waited least (min over its
    ranks); the largest such wait is how long a whole host waited for the slowest host (the cost
    across hosts), and the host whose last arrival was latest held the step up."""
    grouped = by_host(records)
    hosts, members = list(grouped), list(grouped.values())
    if len(hosts) < 2:
        return {"hosts": len(hosts), "per_host": None, "straggler_across_hosts_mean_s": None, "slowest_host": None}
    waits = np.array([np.concatenate([e.barrier_wait_ns[1:] for e in r.epochs]) for r in records]) / 1e9  # rank x step
    last_in = np.array([waits[m].min(axis=0) for m in members])  # host x step: its last accelerator's wait
    across = last_in.max(axis=0)
    held = np.bincount(last_in.argmin(axis=0), minlength=len(hosts))  # steps each host held up
    per_host = [{"host": h, "ranks": [records[i].rank for i in m], "au_percent": 100 * float(au[m].mean()),
                 "steps_held_up": int(held[k])} for k, (h, m) in enumerate(zip(hosts, members))]
    return {"hosts": len(hosts), "per_host": json.dumps(per_host, separators=(",", ":")),
            "straggler_across_hosts_mean_s": float(across.mean()) if across.size else None,
            "slowest_host": hosts[int(held.argmax())] if across.size else None}


def au_over_time(records: list[AcceleratorRecord]) -> tuple[np.ndarray, np.ndarray]:
    """(seconds since the start, AU) per step of the first epoch, over all accelerators:
    each step's compute over its whole time (wait for data, compute, barrier)."""
    epochs = [r.epochs[0] for r in records]
    start = min(e.start_ns for e in epochs)
    steps = min(len(e.compute_s) for e in epochs)
    if steps == 0:
        return np.zeros(0), np.zeros(0)
    took = np.array([(e.released_ns - e.step_start_ns)[:steps] for e in epochs]) / 1e9
    compute = np.array([e.compute_s[:steps] for e in epochs])
    at = (np.mean([e.released_ns[:steps] for e in epochs], axis=0) - start) / 1e9
    return at, np.mean(compute / np.where(took > 0, took, np.inf), axis=0)
