"""How many accelerators will this storage keep busy? A prediction from a
short probe and a model of the input pipeline, in place of hours of emulation.

The probe (measured). c reader threads, each with a native SampleReader as in
the emulation, read the dataset's own samples (random ones, whole, in
transfer-size chunks) as fast as they can for a few seconds: no compute, no
barrier. Each gives X(c), the storage's total rate at c concurrent readers,
and the time of every sample it read. c runs R, 2R, 4R, ... (R the workload's
read threads: c = N x R is N accelerators' readers), until the storage can no
longer feed N accelerators at full utilisation.

The model (derived in docs/train.md). The storage is shared: when a readers
are reading, each moves X(a) / a bytes per second (X between the probed
points, flat beyond the last; below the fewest probed, a reader is no faster
than one of those). Per accelerator, R readers take whole batches
round-robin; a batch is asked for when the one Q batches before it is taken
(Q = R x ceil(prefetch / R)); a reader reads its batches in order. A step
starts at the previous barrier's release, takes its batch when it is there,
computes for C, and the barrier releases when the last accelerator is done.
The simulation runs these events in time order (batch sizes drawn from the
dataset's own samples) and takes AU as DLIO takes it. The answer is the
largest N whose AU meets the threshold.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import numpy as np

from gdsbench.job.spec import JobSpec
from gdsbench.train.accelerators import sample_readers
from gdsbench.train.dataset import Dataset, steps_per_epoch
from gdsbench.train.workloads import Workload

PROBE_SECONDS = 3.0
MAX_PROBE_READERS = 1024
SPREAD_WARNING = 0.20  # the probe's rate varying more than this during a point: the prediction is uncertain
SIMULATED_SEEDS = 3


@dataclass
class ProbePoint:
    readers: int
    bytes: int
    seconds: float
    samples: int
    rate: float  # X(c), bytes/s
    spread: float  # (max - min) / median of the rate over the probe's intervals
    cpu_share: float  # process CPU over the probe, as a share of this host's CPUs

    def to_dict(self) -> dict:
        return {"readers": self.readers, "bytes": self.bytes, "seconds": self.seconds, "samples": self.samples,
                "rate_bytes_per_s": self.rate, "spread": self.spread, "cpu_share": self.cpu_share}


def probe(dataset: Dataset, spec: JobSpec, readers: int, seconds: float = PROBE_SECONDS, seed: int = 1) -> ProbePoint:
    """X(readers): `readers` threads reading random samples of the dataset as fast as they can."""
    pool = sample_readers(spec.replace(verify=False), spec.gpu[0], readers)
    rng = np.random.default_rng(seed)
    picks = [rng.integers(0, dataset.samples, 100_000) for _ in range(readers)]
    interval = max(seconds / 6, 0.05)
    done: list[list[tuple[float, int, int]]] = [[] for _ in range(readers)]  # (end time, bytes, ns) per sample
    errors: list[BaseException] = []
    gate = threading.Barrier(readers + 1)
    deadline = [0.0]

    def read(w: int) -> None:
        gate.wait()
        try:
            for i in picks[w]:
                if time.monotonic() >= deadline[0]:
                    return
                path, offset, length = dataset.sample(int(i))
                nbytes, _, ns = pool[w].read(path, offset, length)
                done[w].append((time.monotonic(), nbytes, ns))
        except BaseException as e:  # noqa: BLE001 - raised in the caller
            errors.append(e)

    threads = [threading.Thread(target=read, args=(w,), daemon=True) for w in range(readers)]
    for t in threads:
        t.start()
    cpu0 = time.process_time()
    start = time.monotonic()
    deadline[0] = start + seconds
    gate.wait()
    for t in threads:
        t.join()
    elapsed = max(time.monotonic() - start, 1e-9)
    cpu = time.process_time() - cpu0
    if errors:
        raise errors[0]
    rows = [row for per in done for row in per]
    nbytes = sum(r[1] for r in rows)
    ticks = np.zeros(max(1, int(math.ceil(elapsed / interval))))
    for end, b, _ in rows:  # each sample's bytes in the interval it ended in
        ticks[min(int((end - start) / interval), len(ticks) - 1)] += b
    full = ticks[1: max(2, int(seconds / interval))]  # the first interval (the readers starting) left out
    spread = float((full.max() - full.min()) / np.median(full)) if full.size > 1 and np.median(full) > 0 else 0.0
    return ProbePoint(readers, nbytes, elapsed, len(rows), nbytes / elapsed, spread, cpu / elapsed / max(1, _cpus()))


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


@dataclass
class Curve:
    """X(c) between the probed points (linear in log c), flat beyond the last."""

    points: list[ProbePoint]

    def rate(self, readers: float) -> float:
        cs = np.array([p.readers for p in self.points], dtype=float)
        xs = np.array([p.rate for p in self.points])
        order = np.argsort(cs)
        return float(np.interp(np.log(max(readers, 1.0)), np.log(cs[order]), xs[order]))

    def per_reader(self, active: int) -> float:
        """What each of `active` readers gets: X(a) / a, and below the fewest probed no more than one of those got."""
        fewest = min(p.readers for p in self.points)
        return self.rate(max(active, fewest)) / max(active, fewest)


def simulate(workload: Workload, sizes: np.ndarray, curve: Curve, accelerators: int, steps: int,
             seed: int = 0) -> float:
    """AU of `accelerators` accelerators over `steps` steps, by the model (events in time order)."""
    rng = np.random.default_rng(seed)
    n, r, b, q = accelerators, workload.read_threads, workload.batch, workload.batches_in_flight
    batch_bytes = rng.choice(sizes, size=(n, steps, b)).sum(axis=2)
    compute = (np.maximum(0, rng.normal(workload.compute_s, workload.compute_stdev_s, (n, steps)))
               if workload.compute_stdev_s > 0 else np.full((n, steps), workload.compute_s))
    readers = n * r
    fifo: list[list[tuple[int, int]]] = [[] for _ in range(readers)]  # (accelerator, batch) asked of each reader
    remaining = np.full(readers, np.inf)  # bytes left of the batch at the head of each reader's queue
    ready = np.full((n, steps), np.inf)
    loaded = np.full(n, np.inf)  # when each accelerator got this step's batch
    computed0 = np.zeros(n)

    def ask(a: int, k: int) -> None:
        w = a * r + k % r
        fifo[w].append((a, k))
        if len(fifo[w]) == 1:
            remaining[w] = batch_bytes[a, k]

    def take(a: int, k: int, t: float) -> None:
        loaded[a] = t
        if k + q < steps:
            ask(a, k + q)

    for a in range(n):
        for k in range(min(q, steps)):
            ask(a, k)
    t, step = 0.0, 0
    while True:
        active = np.isfinite(remaining)
        count = int(active.sum())
        rate = curve.per_reader(count) if count else 0.0
        t_done = t + remaining[active].min() / rate if count else np.inf
        t_release = float(np.max(loaded + compute[:, step])) if np.all(np.isfinite(loaded)) else np.inf
        if t_done == np.inf and t_release == np.inf:
            raise RuntimeError("the model stalled: no read and no compute pending")
        now = min(t_done, t_release)
        if count:
            remaining[active] -= rate * (now - t)
        t = now
        if t_done <= t_release:
            for w in np.flatnonzero(active & (remaining <= 1e-6 * rate)):
                a, k = fifo[w].pop(0)
                ready[a, k] = t
                remaining[w] = batch_bytes[fifo[w][0]] if fifo[w] else np.inf
                if k == step and not np.isfinite(loaded[a]):
                    take(a, k, t)
            continue
        if step == 0:
            computed0 = loaded + compute[:, 0]
        step += 1
        if step == steps:
            break
        loaded[:] = np.inf
        for a in np.flatnonzero(ready[:, step] <= t):
            take(a, step, t)
    total = t - computed0
    au = compute[:, 1:].sum(axis=1) / np.where(total > 0, total, np.inf)
    return float(au.mean())


def predicted_au(workload: Workload, sizes: np.ndarray, curve: Curve, accelerators: int, steps: int) -> dict:
    runs = [simulate(workload, sizes, curve, accelerators, steps, seed) for seed in range(SIMULATED_SEEDS)]
    return {"accelerators": accelerators, "au_percent": 100 * float(np.mean(runs)), "steps": steps}


def demand(workload: Workload, sizes: np.ndarray) -> float:
    """Bytes per second one accelerator reads at full utilisation (the dataset's real mean sample size)."""
    return workload.batch * float(sizes.mean()) / workload.compute_s if workload.compute_s else math.inf


@dataclass
class Prediction:
    workload: Workload
    max_accelerators: int  # the most that meet the threshold (0: not even one)
    curve: Curve
    au: list[dict]  # predicted AU at each count looked at
    demand_bytes_per_s: float
    steps: int
    seconds: float  # the probe and the model together
    warnings: list[str]

    def au_at(self, accelerators: int) -> float | None:
        return next((x["au_percent"] for x in self.au if x["accelerators"] == accelerators), None)

    def to_dict(self) -> dict:
        return {"max_accelerators": self.max_accelerators, "au": self.au, "demand_bytes_per_s": self.demand_bytes_per_s,
                "steps": self.steps, "seconds": self.seconds, "warnings": self.warnings,
                "probe": [p.to_dict() for p in self.curve.points], "workload": self.workload.to_dict()}


def predict(workload: Workload, dataset: Dataset, spec: JobSpec, *, steps: int = 0, also: list[int] | None = None,
            probe_seconds: float = PROBE_SECONDS, progress=None) -> Prediction:
    """Probe, then find the most accelerators whose predicted AU meets the threshold.
    `also`: counts to predict besides those around the answer (a sweep's)."""
    began = time.monotonic()
    sizes = dataset.length.astype(float)
    need = demand(workload, sizes)
    r = workload.read_threads
    points: list[ProbePoint] = []
    readers = r
    while True:  # double until the storage can no longer feed that many accelerators fully
        if progress:
            progress(f"probe: {readers} readers")
        points.append(probe(dataset, spec, readers, probe_seconds, seed=len(points) + 1))
        fed = points[-1].rate / need  # accelerators this rate keeps at 100%
        if readers // r > fed or readers * 2 > MAX_PROBE_READERS:
            break
        readers *= 2
    curve = Curve(points)

    def steps_for(n: int) -> int:
        per_epoch = steps_per_epoch(dataset.samples, workload.batch, n)
        wanted = min(per_epoch, steps) if steps else per_epoch
        return max(2, min(wanted, 500))

    results: dict[int, dict] = {}

    def au(n: int) -> float:
        if n not in results:
            results[n] = predicted_au(workload, sizes, curve, n, steps_for(n))
        return results[n]["au_percent"]

    threshold = 100 * workload.au_threshold
    top = max(1, int(points[-1].readers // r) * 2)
    best = 0
    for n in range(1, top + 1):
        if au(n) >= threshold:
            best = n
        elif n > best + 2:  # two counts in a row below: past the answer
            break
    for n in list(range(max(1, best - 2), best + 4)) + list(also or []):
        au(n)
    warnings = _out_of_depth(workload, dataset, points, best, need, steps_for(max(best, 1)))
    return Prediction(workload, best, curve, [results[n] for n in sorted(results)], need, steps_for(max(best, 1)),
                      time.monotonic() - began, warnings)


def _out_of_depth(workload: Workload, dataset: Dataset, points: list[ProbePoint], best: int, need: float,
                  steps: int) -> list[str]:
    """Where the prediction should not be trusted, and why."""
    out = []
    for p in points:
        if p.spread > SPREAD_WARNING:
            out.append(f"the storage's rate varied by {p.spread:.0%} during the {p.readers}-reader probe: "
                       "the prediction is uncertain; probe longer (--probe-seconds) on a quieter system")
        if p.cpu_share > 0.8:
            out.append(f"the {p.readers}-reader probe used {p.cpu_share:.0%} of this host's CPUs: the figure may be "
                       "this host's limit, not the storage's")
    largest = max(p.readers for p in points)
    if (best + 1) * workload.read_threads > largest:
        out.append(f"{best + 1} accelerators need {(best + 1) * workload.read_threads} readers, beyond the largest "
                   f"probed ({largest}): the rate there is taken as at {largest}")
    if steps < 30:
        out.append(f"only {steps} steps per epoch: with so few, prefetch during the first (left out) step inflates "
                   "AU, in DLIO as here; use more files")
    if points[0].samples < 4 * points[0].readers:
        out.append("the probe read few samples per reader (samples are large): probe longer (--probe-seconds)")
    return out
