"""How many accelerators will this storage keep busy? A prediction from a
short probe and a model of the input pipeline, in place of hours of emulation.

The probe (measured). c reader threads, each with a native SampleReader as in
the emulation, read the dataset as train reads it (its samples, in a shuffled
order, whole, in transfer-size chunks; for a TFRecord workload, whole files
from start to end in chunks, as tf.data's streams do) as fast as they can: no
compute, no barrier. Each point is two whole probes, the page cache dropped
before each and no sample read twice in one; it gives X(c), the storage's
total rate at c concurrent readers, and the spread between its two repeats.
c runs 1, R, 2R, 4R, ... (R the workload's read threads: c = N x R is N
accelerators' readers), until the storage can no longer feed N accelerators
at full utilisation. Under an MPI launcher the first rank of each of H hosts
probes at once, each with c threads reading its own share: X(H x c) is their
sum, what the shared storage gives every host together (and each host's CPU
and network limits with it).

The model (derived in docs/train.md). The storage is shared: when a readers
are reading, each moves X(a) / a bytes per second (X between the probed
points, linear in log c, flat beyond the last). Per accelerator, R readers
follow DLIO's loader for the format: PyTorch's (npz), each taking whole
batches round-robin, a batch asked for when the one Q batches before it is
taken (Q = R x ceil(prefetch / R)); or tf.data's (tfrecord), every stream
reading a share of each batch, prefetch + 1 batches ahead. A step starts at
the previous barrier's release, takes its batch when it is there, computes for
C, and the barrier releases when the last accelerator is done. The simulation
runs these events in time order (batch sizes drawn from the dataset's own
samples) and takes AU as DLIO takes it. The answer is the largest N such that
every count up to N meets the threshold; a count train would refuse (fewer
than 2 steps) is not simulated. Each count carries flags where the model is
out of its depth there.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from gdsbench.execution.loops import sample_readers
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import JobSpec
from gdsbench.system import provenance
from gdsbench.train.accelerators import cached_fraction, evict
from gdsbench.train.dataset import Dataset, steps_per_epoch, too_few_steps
from gdsbench.train.workloads import Workload

MiB = 1 << 20
PROBE_SECONDS = 3.0
PROBE_REPEATS = 2  # each probe point is this many whole probes: their spread says how steady the storage was
PROBE_RAMP = 0.2  # the share of each probe left out at its start, as fio's ramp_time
MAX_PROBE_READERS = 1024
SPREAD_WARNING = 0.20  # a probe point's repeats differing more than this: the prediction is uncertain
FALL_WARNING = 0.10  # the rate falling by more than this as readers are added: said
FEW_STEPS = 30  # fewer steps per epoch than this: the first step's prefetch weighs on AU
SIMULATED_SEEDS = 3


@dataclass
class ProbePoint:
    readers: int
    bytes: int
    seconds: float
    samples: int
    rate: float  # X(c), bytes/s
    spread: float  # (max - min) / median of the rates of the point's repeats
    cpu_share: float  # process CPU over the probe, as a share of the host's CPUs (the busiest host's, where several)
    cached: float = 0.0  # the most of the dataset found in the page cache as a repeat began (after dropping it)
    ran_out: bool = False  # a repeat read every sample of its share before its time was up (a small dataset)

    def to_dict(self) -> dict:
        return {"readers": self.readers, "bytes": self.bytes, "seconds": self.seconds, "samples": self.samples,
                "rate_bytes_per_s": self.rate, "spread": self.spread, "cpu_share": self.cpu_share,
                "cached_fraction": self.cached, "ran_out_of_samples": self.ran_out}


def probe(dataset: Dataset, spec: JobSpec, readers: int, seconds: float = PROBE_SECONDS, seed: int = 1,
          repeats: int = PROBE_REPEATS, stream_chunk: int = 0, hosts=None) -> ProbePoint:
    """X(readers): `readers` threads reading the dataset as fast as they can, in `repeats` whole
    probes of seconds/repeats each, the page cache dropped before each. Each thread reads its own
    share of a shuffled order, so nothing is read twice in a probe and a small dataset cannot be
    read back from the cache: samples, read whole (PyTorch's rule); or, with stream_chunk,
    whole files from start to end in chunks of that size (tf.data's streams). The spread is that
    of the repeats' rates: a figure that exists whatever the samples' size.

    hosts: a communicator of one rank per host (mpi.host_leaders) where several probe together:
    each host reads its own share with `readers` threads, every repeat starting on all at once,
    and the point is their sum (readers, bytes, rates), its CPU share the busiest host's."""
    host, count = (hosts.Get_rank(), hosts.Get_size()) if hosts is not None else (0, 1)
    pool = sample_readers(spec.replace(verify=False), spec.gpu[0], readers)
    rng = np.random.default_rng(seed)  # the same seed on every host: the same order, a share each
    rates, total_bytes, total_s, total_samples, cpu_s, ran_out = [], 0, 0.0, 0, 0.0, False

    def chunks(files):  # a stream's work: each of its files, start to end, a chunk at a time
        for f in files:
            path, size = dataset.paths[f], int(dataset.file_sizes[f])
            yield from ((path, at, min(stream_chunk, size - at)) for at in range(0, size, stream_chunk))

    def samples(indexes):
        return (dataset.sample(int(i)) for i in indexes)

    cached = 0.0
    for _ in range(repeats):
        if not spec.warm:
            evict(dataset)
        cached = max(cached, cached_fraction(dataset) or 0.0)
        if stream_chunk:
            files = rng.permutation(len(dataset.paths))[host::count]
            mine = [chunks(files[w::readers]) for w in range(readers)]
        else:
            order = rng.permutation(dataset.units)[host::count]
            mine = [samples(order[w::readers]) for w in range(readers)]
        if hosts is not None:
            hosts.Barrier()
        began = time.monotonic()
        nbytes, elapsed, n, cpu = _probe_once(pool, mine, seconds / repeats)
        ran_out = ran_out or time.monotonic() - began < 0.9 * seconds / repeats  # every share read before the time
        rates.append(nbytes / elapsed)
        total_bytes, total_s, total_samples, cpu_s = total_bytes + nbytes, total_s + elapsed, total_samples + n, \
            cpu_s + cpu
    here = ProbePoint(readers, total_bytes, total_s, total_samples, total_bytes / total_s, 0.0,
                      cpu_s / total_s / max(1, _cpus()), cached, ran_out)
    every = [(here, rates)] if hosts is None else hosts.allgather((here, rates))
    rates = [sum(r[i] for _, r in every) for i in range(repeats)]  # each repeat's rate: every host's together
    middle = float(np.median(rates))
    spread = float((max(rates) - min(rates)) / middle) if middle > 0 and len(rates) > 1 else 0.0
    points = [p for p, _ in every]
    return ProbePoint(readers * count, sum(p.bytes for p in points), max(p.seconds for p in points),
                      sum(p.samples for p in points), sum(p.rate for p in points), spread,
                      max(p.cpu_share for p in points), max(p.cached for p in points), any(p.ran_out for p in points))


def _probe_once(pool: list, shares: list, seconds: float) -> tuple[int, float, int, float]:
    """One probe, each reader reading its share of (path, offset, length) in order: (bytes read,
    seconds, reads, process CPU seconds) over its measured part. As fio's ramp_time, the first
    PROBE_RAMP of it is left out: a probe of a second or two is short enough that its start
    (readers starting, a throttle's first slice, the first reads after the cache was dropped)
    would otherwise weigh on the rate. What completes after the ramp counts, issued before it or not."""
    readers = len(pool)
    done: list[list[tuple[float, int]]] = [[] for _ in range(readers)]  # per reader: (completed at, bytes)
    errors: list[BaseException] = []
    gate = threading.Barrier(readers + 1)
    deadline = [0.0]

    def read(w: int) -> None:
        gate.wait()
        try:
            for path, offset, length in shares[w]:
                if time.monotonic() >= deadline[0]:
                    return
                got = pool[w].read(path, offset, length)[0]
                done[w].append((time.monotonic(), got))
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
    end = max(time.monotonic(), start + 1e-9)
    if errors:
        raise errors[0]
    reads = [r for mine in done for r in mine]
    measured_from = start + PROBE_RAMP * seconds
    counted = [r for r in reads if r[0] >= measured_from]
    if not counted:  # samples so large that none completed after the ramp: the whole probe
        counted, measured_from = reads, start
    return (sum(b for _, b in counted), max(end - measured_from, 1e-9), len(counted),
            (time.process_time() - cpu0) * (end - measured_from) / (end - start))


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


def _falls(a: ProbePoint, b: ProbePoint) -> bool:
    """Whether the rate fell by more than FALL_WARNING from probe point a to the next one, b."""
    return b.rate < (1 - FALL_WARNING) * a.rate


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
    """AU of `accelerators` accelerators over `steps` steps, by the model (events in time order).
    Readers as DLIO's loader for the format has them (train/pipeline.py): PyTorch's rule (npz), a
    batch read whole by one of R readers, R x prefetch factor batches ahead; or tf.data's
    (tfrecord), a batch read by all R streams at once, a share each, prefetch + 1 batches ahead."""
    rng = np.random.default_rng(seed)
    n, r, b = accelerators, workload.read_threads, workload.batch
    streams = workload.file_format.streams
    q = workload.prefetch_batches + 1 if streams else workload.batches_in_flight
    batch_bytes = rng.choice(sizes, size=(n, steps, b)).sum(axis=2)
    compute = (np.maximum(0, rng.normal(workload.compute_s, workload.compute_stdev_s, (n, steps)))
               if workload.compute_stdev_s > 0 else np.full((n, steps), workload.compute_s))
    readers = n * r
    fifo: list[list[tuple[int, int, float]]] = [[] for _ in range(readers)]  # (accelerator, batch, bytes) per reader
    remaining = np.full(readers, np.inf)  # bytes left of the share at the head of each reader's queue
    parts_left = np.zeros((n, steps), dtype=np.int64)  # readers still reading a share of each batch
    ready = np.full((n, steps), np.inf)
    loaded = np.full(n, np.inf)  # when each accelerator got this step's batch
    computed0 = np.zeros(n)

    def ask(a: int, k: int) -> None:
        targets = range(a * r, (a + 1) * r) if streams else [a * r + k % r]
        share = batch_bytes[a, k] / len(targets)
        parts_left[a, k] = len(targets)
        for w in targets:
            fifo[w].append((a, k, share))
            if len(fifo[w]) == 1:
                remaining[w] = share

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
                a, k, _ = fifo[w].pop(0)
                remaining[w] = fifo[w][0][2] if fifo[w] else np.inf
                parts_left[a, k] -= 1
                if parts_left[a, k] == 0:
                    ready[a, k] = t
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
    """The model's AU at a count, and why it may be off there (`flags`: empty where nothing says so)."""
    runs = [simulate(workload, sizes, curve, accelerators, steps, seed) for seed in range(SIMULATED_SEEDS)]
    return {"accelerators": accelerators, "au_percent": 100 * float(np.mean(runs)), "steps": steps,
            "flags": count_flags(workload, curve.points, accelerators, steps)}


def count_flags(workload: Workload, points: list[ProbePoint], accelerators: int, steps: int) -> list[str]:
    """Where the model is out of its depth at this count, in a word or two each: its readers beyond
    the largest probed, a probe point near them that was not steady, the rate falling with readers
    near them, or too few steps."""
    readers = accelerators * workload.read_threads
    flags = []
    if readers > max(p.readers for p in points):
        flags.append("beyond the probe")
    near = [p for p in points if readers / 2 <= p.readers <= readers * 2]
    if any(p.spread > SPREAD_WARNING for p in near):
        flags.append("unsteady probe")
    for a, b in zip(points, points[1:]):
        if _falls(a, b) and a.readers <= readers * 2 and b.readers >= readers / 2:
            flags.append("rate falls with readers")
            break
    if steps < FEW_STEPS:
        flags.append("few steps")
    return flags


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
    hosts: int = 1  # hosts that probed together
    notes: list[str] = field(default_factory=list)  # what was said of its inputs (the dataset, the workload, the cache)
    provenance: dict = field(default_factory=dict)  # the gdsbench and libraries that made it, as a run's

    def au_at(self, accelerators: int) -> float | None:
        return next((x["au_percent"] for x in self.au if x["accelerators"] == accelerators), None)

    def to_dict(self) -> dict:
        return {"max_accelerators": self.max_accelerators, "au": self.au, "demand_bytes_per_s": self.demand_bytes_per_s,
                "steps": self.steps, "seconds": self.seconds, "warnings": self.warnings, "notes": self.notes,
                "hosts": self.hosts, "probe": [p.to_dict() for p in self.curve.points],
                "workload": self.workload.to_dict(), "provenance": self.provenance}


def predict(workload: Workload, dataset: Dataset, spec: JobSpec, *, steps: int = 0, also: list[int] | None = None,
            probe_seconds: float = PROBE_SECONDS, progress=None, hosts=None) -> Prediction:
    """Probe, then find the most accelerators N such that every count up to N meets the
    threshold. `also`: counts to predict besides those around the answer (a sweep's); a count
    train would refuse is refused here in the same words. hosts: as probe's, called on each of
    them (each then finds the same answer from the same sums)."""
    for n in also or []:
        why = too_few_steps(dataset.samples, workload.batch, n, steps)
        if why:
            raise UsageError(why)
    began = time.monotonic()
    sizes = dataset.sample_sizes()
    need = demand(workload, sizes)
    r = workload.read_threads
    points: list[ProbePoint] = []
    count = hosts.Get_size() if hosts is not None else 1
    readers = 1  # (on each host) a single reader too: what one accelerator's readers do when few are busy
    while True:  # then R, 2R, 4R, ... until the storage can no longer feed that many accelerators fully
        if progress:
            progress(f"probe: {readers} reader(s)" if count == 1 else
                     f"probe: {readers * count} readers ({readers} on each of {count} hosts at once)")
        points.append(probe(dataset, spec, readers, probe_seconds, seed=len(points) + 1,
                            stream_chunk=workload.transfer_size if workload.file_format.streams else 0, hosts=hosts))
        fed = points[-1].rate / need  # accelerators this rate keeps at 100%
        if readers >= r and (readers * count // r > fed or readers * 2 > MAX_PROBE_READERS):
            break
        readers = r if readers < r else readers * 2
    curve = Curve(points)

    def steps_for(n: int) -> int:
        per_epoch = steps_per_epoch(dataset.samples, workload.batch, n)
        return min(min(per_epoch, steps) if steps else per_epoch, 500)

    results: dict[int, dict] = {}

    def au(n: int) -> float:
        if n not in results:
            results[n] = predicted_au(workload, sizes, curve, n, steps_for(n))
        return results[n]["au_percent"]

    threshold = 100 * workload.au_threshold
    runnable = [n for n in range(1, max(1, int(points[-1].readers // r) * 2) + 1)
                if not too_few_steps(dataset.samples, workload.batch, n, steps)]
    best, failed = 0, None
    for n in runnable:
        passes = au(n) >= threshold
        if passes and failed is None:
            best = n  # every count up to here passes
        elif not passes and failed is None:
            failed = n
        if failed is not None and n > failed + 2:  # past the answer: a few more to see the curve does not come back
            break
    for n in [m for m in range(max(1, best - 2), best + 4) if m in runnable] + list(also or []):
        au(n)
    warnings = _out_of_depth(workload, dataset, points, best, need, steps_for(max(best, 1)))
    comeback = [n for n in sorted(results) if failed is not None and n > failed and results[n]["au_percent"] >= threshold]
    if comeback:
        warnings.append(f"the predicted AU is not monotone in the accelerators: {failed} fails the threshold but "
                        f"{', '.join(map(str, comeback))} pass; the answer is the largest count up to which every count "
                        "passes")
    if runnable and best == runnable[-1] and best + 1 not in runnable and too_few_steps(dataset.samples, workload.batch,
                                                                                           best + 1, steps):
        warnings.append(f"{best + 1} accelerators would have fewer than 2 steps each, which train refuses: the answer "
                        f"stops at {best}; prepare more files to look further")
    cached = max(p.cached for p in points)
    if cached > 0.01:
        warnings.append(f"{cached:.0%} of the dataset stayed in the page cache when it was dropped before a probe "
                        "(dirty or mapped pages): those reads came from RAM, and the rate may be high")
    made = provenance.record(provenance.RUN_TOOLS + (provenance.GPU_TOOLS if spec.real_gpu else ()))
    return Prediction(workload, best, curve, [results[n] for n in sorted(results)], need, steps_for(max(best, 1)),
                      time.monotonic() - began, warnings, count, provenance=made)


def _out_of_depth(workload: Workload, dataset: Dataset, points: list[ProbePoint], best: int, need: float,
                  steps: int) -> list[str]:
    """Where the prediction should not be trusted, and why."""
    out = []
    for p in points:
        if p.spread > SPREAD_WARNING:  # a point that ran out of samples: its fix is more files, said below
            out.append(f"the storage's rate differed by {p.spread:.0%} between the {p.readers}-reader probe's repeats: "
                       "the prediction is uncertain; " + ("prepare more files" if p.ran_out else
                                                          "probe longer (--probe-seconds) on a quieter system"))
        if p.cpu_share > 0.8:
            out.append(f"the {p.readers}-reader probe used {p.cpu_share:.0%} of a host's CPUs (the busiest's, where "
                       "several probed): the figure may be that host's limit, not the storage's")
    for a, b in zip(points, points[1:]):
        if _falls(a, b):
            out.append(f"the storage's rate fell from {a.rate / MiB:,.0f} MiB/s at {a.readers} readers to "
                       f"{b.rate / MiB:,.0f} MiB/s at {b.readers}: more readers slowed it (contention, or this host's "
                       "CPUs); the model follows the measured curve, and the emulation may differ where it bends")
    largest = max(p.readers for p in points)
    if (best + 1) * workload.read_threads > largest:
        out.append(f"{best + 1} accelerators need {(best + 1) * workload.read_threads} readers, beyond the largest "
                   f"probed ({largest}): the rate there is taken as at {largest}")
    if steps < FEW_STEPS:
        out.append(f"only {steps} steps per epoch: the first step, which AU leaves out, takes the prefetch that fills "
                   "during it, and with so few steps that share is large. DLIO and train count it alike, but the "
                   "model handles that step more simply, so it may differ from them here; use more files")
    short = [p for p in points if p.ran_out]
    if short:
        out.append(f"the dataset is small for the probe: {len(short)} of {len(points)} probe points read every sample "
                   f"before their time was up (the {short[-1].readers}-reader one in {short[-1].seconds:.2f} s), as no "
                   "sample is read twice in a probe; their rates rest on few reads, and a longer --probe-seconds cannot "
                   "help: prepare more files")
    elif points[-1].samples < 4 * points[-1].readers:
        out.append("the probe read few samples per reader (samples are large): probe longer (--probe-seconds)")
    return out
