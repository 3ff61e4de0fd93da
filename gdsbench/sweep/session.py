"""A sweep from start to end: every point checked against its target, the
run folder made (start) or reopened (resume), then each point and repeat not
yet saved measured and saved as it completes (run)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any

from gdsbench.execution import mpi, runner
from gdsbench.execution.progress import POINTS, Progress
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import spec_from_values
from gdsbench.job.units import format_rate
from gdsbench.results.kinds import require_kind
from gdsbench.results.store import RunStore, record, writing
from gdsbench.sweep.grid import Grid, SweepSpec, expand
from gdsbench.system.environment import host_environment
from gdsbench.system.targets import kind_of, target_for


@dataclass
class SweepOutcome:
    store: RunStore
    points_done: int
    points_total: int
    interrupted: bool
    skipped: list[dict[str, Any]]


def _same_files(info: dict[str, Any], asking: dict | None = None) -> None:
    """UsageError unless every target of the run is still the file it measured (a remote one asked
    as the run asks its server: asking)."""
    for path, was in info.get("target_files", {}).items():
        try:
            now = target_for(path, asking=asking).identity() or {}
        except (OSError, UsageError) as e:
            raise UsageError(f"--resume: {path}, the run's target, cannot be read now ({e}); the run cannot go on") from None
        changed = [f"{k} {was[k]} -> {now[k]}" for k in ("device", "inode", "size", "mtime_ns") if k in was and was[k] != now[k]]
        if changed:
            raise UsageError(f"--resume: {path} is not the file this run measured ({', '.join(changed)}); "
                             "start a new sweep for it")


def start(sweep: SweepSpec, results_dir: str) -> tuple[RunStore | None, Grid, list[runner.Plan]]:
    """Check every point against its target (no reads yet), then create the
    run directory. Under MPI every rank plans; only rank 0 has a store."""
    sweep = sweep.with_defaults()
    name = sweep.fixed.get("path")
    if isinstance(name, str) and name:  # a resume from elsewhere reads the same target
        sweep = replace(sweep, fixed={**sweep.fixed, "path": kind_of(name).absolute(name)})
    grid = expand(sweep)
    plans = [runner.plan(p.spec) for p in grid.points]
    if not mpi.is_root():
        return None, grid, plans
    targets = {p.target.path: p.target for p in plans if p.target is not None}
    identities = {path: t.identity() for path, t in targets.items()}
    files = {path: was for path, was in identities.items() if was is not None}
    store = RunStore.create(results_dir, sweep.name, {
        "sweep": sweep.to_dict(),
        "points": [{"point": p.index, "values": p.values, "label": p.label()} for p in grid.points],
        "skipped": grid.skipped,
        "environment": {"host": host_environment(), "targets": {path: t.describe() for path, t in targets.items()}},
        "target_files": files,
    })
    return store, grid, plans


def resume(run_dir: str | None) -> tuple[RunStore | None, Grid, list[runner.Plan]]:
    """Reopen an interrupted run (rank 0 reads it and tells the other ranks),
    refusing if its target is no longer the file it measured."""
    store = RunStore.open(run_dir) if mpi.is_root() else None
    if store is not None:
        require_kind(store.info(), run_dir, "sweep", "sweep --resume")
        for note in store.notes:
            print(f"gdsbench: note: {note}", file=sys.stderr)
    sweep = SweepSpec.from_dict(mpi.broadcast(store.info()["sweep"] if store else None))
    if store:  # the look at each target honours the run's own --timeout and --retries
        from gdsbench.system.targets.remote_object import asking_of

        _same_files(store.info(), asking_of(spec_from_values(sweep.fixed)))
    grid = expand(sweep)
    return store, grid, [runner.plan(p.spec) for p in grid.points]


def _live_rate(ui: Progress):
    """A point's bandwidth so far, beside the bar, as the runner reports its progress."""
    def progress(nbytes: int, elapsed_ns: int) -> None:
        if elapsed_ns:
            ui.rate(format_rate(nbytes / (elapsed_ns / 1e9)))

    return progress


def run(store: RunStore | None, grid: Grid, plans: list[runner.Plan], *, show_progress: bool = True) -> SweepOutcome:
    """Measure every point and repeat not yet in the store, saving each as it
    completes. Under MPI every rank runs every point; rank 0 saves."""
    repeat = mpi.broadcast(store.info()["sweep"]["repeat"] if store else None)
    done = mpi.broadcast(store.completed() if store else None)
    # Repeat-major (the whole grid, then again): drift in the device shows up
    # as spread between repeats instead of hiding inside one point.
    todo = [(p, plan, rep) for rep in range(repeat) for p, plan in zip(grid.points, plans) if (p.key, rep) not in done]
    total = len(grid.points) * repeat
    ui = Progress(total, "sweep", POINTS, done=total - len(todo)) if show_progress and store else None
    try:
        with writing(store) as held:  # a second sweep of this run is refused, naming this one
            for point, plan, rep in todo:
                label = point.label() + (f" #{rep + 1}" if repeat > 1 else "")
                if ui:
                    ui.start(label)
                result = runner.execute(plan, record_environment=False, progress=_live_rate(ui) if ui else None)
                # the point in flight is not saved if it was interrupted: it is incomplete
                if mpi.broadcast(result.interrupted if result else None):
                    held.interrupted = True
                    break
                done.add((point.key, rep))
                if store:
                    store.append(record(result, point.index, point.key, rep))
                if ui:
                    ui.finish(f"{label} ({result.spec.describe()}): {format_rate(result.bandwidth)}, "
                              f"p99 {result.percentile(99) / 1e3:.0f} µs", rate=format_rate(result.bandwidth))
    finally:
        if ui:
            ui.close()
    return SweepOutcome(store, len(done), total, held.status == "interrupted", grid.skipped)
