"""`gdsbench train` from start to end: the job the readers run, the dataset's
page cache, one emulation per accelerator count (and repeat), each saved as
a point of a run folder as it completes, and the prediction beside them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from gdsbench.execution import mpi
from gdsbench.execution.loops import sample_data_path
from gdsbench.execution.parts import check_cache_choice
from gdsbench.execution.progress import POINTS, Progress
from gdsbench.execution.runner import resolve_direct, runnable_here
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import WARM_UNCACHED, JobSpec, spec_from_values
from gdsbench.results.store import RunStore, keep_row
from gdsbench.system import gpu_path, nvfs
from gdsbench.system.environment import host_environment
from gdsbench.system.targets import job_target
from gdsbench.train import READER_OPTIONS, accelerators, dlio_summary, metrics
from gdsbench.train.dataset import Dataset, check_cache, disagreements, steps_per_epoch, too_few_steps
from gdsbench.train.predict import Prediction
from gdsbench.train.workloads import Workload


def reader_spec(workload: Workload, dataset: Dataset, values: dict) -> JobSpec:
    """The job every SampleReader runs: the mode, engine and cache choice asked
    for, chunks of the workload's transfer size, `qd` chunks in flight."""
    values = {k: v for k, v in values.items() if k != "path"}  # PATH is the dataset, not a job's target
    # (a reader reads the samples it is given: the job's runtime is never used)
    spec = runnable_here(spec_from_values(values, JobSpec(path=dataset.paths[0], bs=workload.transfer_size)))
    first = job_target(spec, dataset.paths[0])  # looked at once: how O_DIRECT applies, whether it can
    spec = spec.replace(direct=resolve_direct(spec, first), runtime_ns=spec.runtime_ns or 0)
    if spec.verify and not dataset.patterned:
        raise UsageError(f"--verify: {dataset.directory} was not written by `gdsbench prepare --workload`; drop --verify")
    check_cache_choice(spec.replace(offset=0), first)
    return spec


@dataclass
class TrainRun:
    workload: Workload
    dataset: Dataset
    spec: JobSpec
    counts: list[int]
    epochs: int = 1
    max_steps: int = 0
    repeat: int = 1
    warm: bool = False
    cache_note: str | None = None
    notes: list[str] = field(default_factory=list)  # every note said about the run's inputs, as said
    rows: list[dict] = field(default_factory=list)
    prediction: Prediction | None = None

    def info(self) -> dict:
        return {"kind": "train", "workload": self.workload.to_dict(), "dataset": self.dataset.describe(),
                "reader": {k: getattr(self.spec, k) for k in ("bs", *READER_OPTIONS)},
                "accelerators": self.counts, "epochs": self.epochs, "max_steps": self.max_steps, "repeat": self.repeat,
                "environment": {"host": host_environment()}, "cache_note": self.cache_note, "notes": self.notes,
                "prediction": self.prediction.to_dict() if self.prediction else None}

    def steps(self, n: int) -> int:
        per_epoch = steps_per_epoch(self.dataset.samples, self.workload.batch, n)
        return min(per_epoch, self.max_steps) if self.max_steps else per_epoch


def check_counts(run: TrainRun) -> None:
    """UsageError for a count that cannot run, or --warm with --uncached: before anything is written."""
    if run.warm and run.spec.uncached:  # (run's JobSpec refuses the pair; train's --warm is its own)
        raise UsageError(WARM_UNCACHED)
    comm = mpi.world()
    if comm is not None and any(n != comm.Get_size() for n in run.counts):
        raise UsageError(f"--accelerators {','.join(map(str, run.counts))}: under mpirun each rank is one accelerator; "
                         f"this job has {comm.Get_size()} ranks (leave --accelerators out)")
    for n in run.counts:
        if n < 1:
            raise UsageError(f"--accelerators {n}: must be at least 1")
        why = too_few_steps(run.dataset.samples, run.workload.batch, n, run.max_steps)
        if why:
            raise UsageError(why)
    if comm is None and max(run.counts) > 1:  # processes held in step by a barrier in /dev/shm
        accelerators.check_barrier_room()


def emulate(run: TrainRun, n: int) -> tuple[dict, list]:
    """One emulation of n accelerators: its summary row and the accelerators' records."""
    if not run.warm:
        accelerators.evict(run.dataset)
    cached = accelerators.cached_fraction(run.dataset)
    config = accelerators.TrainConfig(run.workload, run.dataset, run.spec, n, run.epochs, run.max_steps)
    watched = gpu_path.cufile_serves(run.spec)
    nvfs_before = nvfs.counters() if watched else None
    started = datetime.now()  # local time, as DLIO stamps its summary.json
    records = accelerators.run(config)
    if records is None:  # an MPI rank other than 0
        return {}, []
    seen = nvfs.observe(nvfs_before, sum(r.bytes_read for r in records)) if watched else None
    row = metrics.summarise(records, run.workload)
    at, au = metrics.au_over_time(records)
    kvikio_path = sample_data_path(run.spec, int(run.dataset.length.mean()))
    path = gpu_path.data_path(run.spec, job_target(run.spec, run.dataset.paths[0]), kvikio_path,
                              seen)
    row.update(started_at=started.isoformat(timespec="microseconds"),
               ended_at=datetime.now().isoformat(timespec="microseconds"), cached_fraction=cached, data_path=path,
               au_time_s=at.tolist(), au_time=au.tolist(),
               step_time_s_all=[float(x) for r in records for e in r.epochs
                                for x in ((e.released_ns - e.step_start_ns)[1:] / 1e9)])
    if run.prediction is not None:
        row["predicted_au_percent"] = run.prediction.au_at(n)
    return row, records


def train(run: TrainRun, store: RunStore | None, on_point=None) -> list[dict]:
    """Every accelerator count, `repeat` times, each row saved as it completes."""
    check_counts(run)
    # rank 0's bar on a terminal; each count's line is the command's own (on_point)
    ui = Progress(len(run.counts) * run.repeat, "train", POINTS) if store is not None else None
    try:
        for point, n in enumerate(run.counts):
            for r in range(run.repeat):
                if ui:
                    ui.start(f"{n} accelerator(s)" + (f" #{r + 1}" if run.repeat > 1 else ""))
                row, _ = emulate(run, n)
                if not row:
                    continue
                row.update(point=point, point_key=f"accelerators={n}", repeat=r)
                if ui:
                    ui.finish(rate=f"AU {row['au_percent']:.1f}%")
                keep_row(row, run.rows, store, on_point)
                if store is not None:
                    dlio_summary.write(store.path, run, row, single=len(run.counts) * run.repeat == 1)
    finally:
        if ui:
            ui.close()
    return run.rows


def dataset_notes(dataset: Dataset, workload: Workload, cache_note: str | None) -> list[str]:
    """What train and predict say about a dataset before reading it: where it and the workload
    disagree (another workload's dataset, another shape), its page cache (check_cache's note), and
    how a dataset prepare did not write is read."""
    notes = disagreements(dataset, workload) + ([cache_note] if cache_note else [])
    if dataset.note and not dataset.patterned:
        notes.append(f"{dataset.directory}: {dataset.note}")
    return notes


def cache_and_dataset_notes(run: TrainRun, allow_cached: bool) -> list[str]:
    """The cache check (UsageError where the page cache could serve the reads), and the notes it and
    the dataset give, added to run.notes: returned to be said."""
    run.cache_note = check_cache(run.dataset, run.spec, allow_cached)
    notes = dataset_notes(run.dataset, run.workload, run.cache_note)
    run.notes += notes
    return notes


def json_rows(run: TrainRun) -> list[dict]:
    """train --json's rows: each point as saved, with the run's notes (run.notes, and the prediction's
    caveats where there is one) and that count's predicted-AU flags. The notes are the run's, said
    once in run.json; each printed row carries them so a consumer reading rows sees them."""
    notes = list(run.notes)
    flags: dict[int, list[str]] = {}
    if run.prediction is not None:
        notes += [f"prediction: out of its depth: {w}" for w in run.prediction.warnings]
        flags = {a["accelerators"]: a.get("flags", []) for a in run.prediction.au}
    return [dict(row, notes=notes, **({"predicted_au_flags": flags.get(row["accelerators"], [])}
                                      if run.prediction is not None else {})) for row in run.rows]
