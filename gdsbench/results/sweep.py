"""Sweeps: a grid of jobs over any option dimensions, run point by point into
a RunStore so that nothing measured is lost.

A dimension is any job option marked sweepable in spec.JobSpec (block size,
queue depth, threads, engine, pattern, O_DIRECT, ...); options added later
become dimensions with no change here. Grids come from comma lists on the
command line (--bs 4K,64K,1M) or from a TOML file:

    name = "nvme"                 # the run's name (results/<date>-<name>/)
    repeat = 3                    # measurements per point
    path = "/mnt/nvme/test.dat"   # a scalar: the same for every point
    runtime = "5s"
    bs = ["4K", "128K", "1M"]     # a list: a dimension
    qd = [1, 4, 16, 64]

Points that make no sense together (psync with QD>1) are skipped with a note.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from gdsbench.execution import mpi, runner
from gdsbench.job import tomlfile
from gdsbench.job.errors import IncompatibleOptions, UsageError, quoted
from gdsbench.job.result import Result
from gdsbench.job.spec import BY_KEY, JobSpec, Option, spec_from_values, with_parsed
from gdsbench.job.units import format_duration, format_rate
from gdsbench.results.store import RunStore, record, require_kind
from gdsbench.system.environment import host_environment
from gdsbench.system.targets import kind_of, target_for

# The main job's grid, used when a sweep names no dimension of its own: about
# a minute on a local disk.
DEFAULT_GRID = {"bs": ["4K", "64K", "1M"], "qd": [1, 4, 16, 32]}
DEFAULT_FIXED = {"pattern": "rand", "runtime": "2s", "ramp": "500ms"}


@dataclass(frozen=True)
class SweepSpec:
    grid: dict[str, list]  # user key -> values as written, in the order given
    fixed: dict[str, Any] = field(default_factory=dict)  # user key -> value as written
    repeat: int = 1
    name: str = "sweep"
    file_keys: tuple[str, ...] = ()  # keys a sweep file set (not the command line): messages name them so

    def to_dict(self) -> dict[str, Any]:
        return {"grid": self.grid, "fixed": self.fixed, "repeat": self.repeat, "name": self.name}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepSpec:
        return cls(grid=d["grid"], fixed=d["fixed"], repeat=d["repeat"], name=d["name"])

    def with_defaults(self) -> SweepSpec:
        """The main job's grid and timing where the sweep names none of its own."""
        if self.grid:
            return self
        grid = {k: v for k, v in DEFAULT_GRID.items() if k not in self.fixed}
        fixed = {**{k: v for k, v in DEFAULT_FIXED.items() if k not in self.fixed}, **self.fixed}
        return replace(self, grid=grid, fixed=fixed)


@dataclass(frozen=True)
class Point:
    index: int
    values: dict[str, Any]  # dimension key -> value in base units
    spec: JobSpec

    @property
    def key(self) -> str:
        """Stable identity of the point, for resuming."""
        return json.dumps(self.values, sort_keys=True)

    def label(self) -> str:
        return " ".join(f"{k}={BY_KEY[k].format(v)}" for k, v in self.values.items())


@dataclass
class Grid:
    points: list[Point]
    skipped: list[dict[str, Any]]  # {"values": {...}, "reason": "..."}


def _dimension_option(key: str, where: str, also: tuple[str, ...] = ()) -> Option:
    """The job option a sweep key names; `also`: the other keys the caller reads (a file's name, repeat)."""
    if key not in BY_KEY:
        raise UsageError(f"{where}: unknown option {quoted(key)}; known: {', '.join([*also, *BY_KEY])}")
    return BY_KEY[key]


def expand(sweep: SweepSpec) -> Grid:
    """Every combination of the grid's values, last dimension fastest.

    A value that is wrong on its own (bs 0, an unknown unit) is an error; a
    combination that makes no sense (psync with QD>1) is skipped with a note."""
    base = spec_from_values(sweep.fixed)
    parsed: dict[str, list] = {}
    for key, values in sweep.grid.items():
        opt = _dimension_option(key, opt_flag(key))
        if not opt.sweep:
            raise UsageError(f"{opt.flag}: cannot be a sweep dimension; give one value")
        if not values:
            raise UsageError(f"{opt.flag}: empty list; give at least one value")
        parsed[key] = [opt.parse(v) for v in values]
        if len(set(map(repr, parsed[key]))) != len(parsed[key]):
            raise UsageError(f"{opt.flag}: a value is listed twice in {quoted(values)}")
        for value in parsed[key]:  # each value on its own, against the fixed options
            try:
                with_parsed({key: value}, base).validate()
            except IncompatibleOptions:
                pass  # judged per combination below
    points, skipped = [], []
    for combo in itertools.product(*parsed.values()):
        values = dict(zip(parsed, combo))
        spec = with_parsed(values, base)
        try:
            spec.validate()
        except IncompatibleOptions as e:
            skipped.append({"values": values, "reason": as_written(str(e), sweep.file_keys)})
            continue
        points.append(Point(len(points), values, spec))
    if not points:
        raise UsageError("the sweep has no runnable point: every combination was skipped ("
                         + "; ".join(sorted({s["reason"] for s in skipped})) + ")")
    return Grid(points, skipped)


def as_written(message: str, file_keys: tuple[str, ...]) -> str:
    """A job's message with the flags of options a sweep file set named by the file's keys (qd, not --qd)."""
    for key in file_keys:
        message = re.sub(rf"(?<![\w-]){re.escape(BY_KEY[key].flag)}(?![\w-])", key, message)
    return message


def opt_flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def load_sweep_file(path: str) -> SweepSpec:
    """Read a TOML sweep file; errors name the file and line."""
    data, text = tomlfile.read(path, "--file")
    grid: dict[str, list] = {}
    fixed: dict[str, Any] = {}
    repeat, name = 1, os.path.splitext(os.path.basename(path))[0]
    for key, value in data.items():
        where = f"{path} line {tomlfile.line_of(text, key)}"
        try:
            if key == "repeat":
                if not isinstance(value, int) or value < 1:
                    raise UsageError("repeat must be a whole number of at least 1")
                repeat = value
                continue
            if key == "name":
                name = str(value)
                continue
            opt = replace(_dimension_option(key, "option", also=("name", "repeat")), flag=key)  # errors name the key
            if isinstance(value, list):
                if not value:
                    raise UsageError(f"{key} is an empty list; give at least one value")
                if not opt.sweep:
                    raise UsageError(f"{key} cannot be a sweep dimension; give one value")
                parsed = [opt.parse(v) for v in value]
                if len(set(map(repr, parsed))) != len(parsed):
                    raise UsageError(f"{key}: a value is listed twice in {quoted(value)}")
                grid[key] = value
            elif isinstance(value, dict):
                raise UsageError(f"[{key}]: tables are not sweep options; write key = value at the top level")
            else:
                opt.parse(value)
                fixed[key] = value
        except UsageError as e:
            raise UsageError(f"{where}: {e}") from None
    if not grid and not fixed:
        raise UsageError(f"{path}: empty sweep file; give at least one option, e.g. bs = [\"4K\", \"1M\"]")
    return SweepSpec(grid=grid, fixed=fixed, repeat=repeat, name=name)


class _LineProgress:
    """Progress for a log (stderr not a terminal): one line per point."""

    def __init__(self, total: int, done: int):
        self.total, self.done = total, done

    def start_point(self, label: str) -> None:
        self.label = label

    def progress(self, nbytes: int, elapsed_ns: int) -> None:
        pass

    def end_point(self, result: Result) -> None:
        self.done += 1
        print(f"[{self.done}/{self.total}] {self.label} ({result.spec.describe()}): {format_rate(result.bandwidth)}, "
              f"p99 {result.percentile(99) / 1e3:.0f} µs", file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


class _BarProgress(_LineProgress):
    """A rich progress bar: current point, live bandwidth, points done/total, ETA."""

    def __init__(self, total: int, done: int):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        super().__init__(total, done)
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[rate]}"), TimeRemainingColumn(), transient=False)
        self.task = self.bar.add_task("sweep", total=total, completed=done, rate="")
        self.bar.start()

    def start_point(self, label: str) -> None:
        self.bar.update(self.task, description=label, rate="")

    def progress(self, nbytes: int, elapsed_ns: int) -> None:
        if elapsed_ns:
            self.bar.update(self.task, rate=format_rate(nbytes / (elapsed_ns / 1e9)))

    def end_point(self, result: Result) -> None:
        self.bar.update(self.task, advance=1, rate=format_rate(result.bandwidth))

    def close(self) -> None:
        self.bar.stop()


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


def plan_line(given: SweepSpec, grid: Grid) -> str:
    """What every point of a new sweep measures, said before the first: the pattern, direction and
    timing each point takes (and whose defaults they are: the default grid's, or a job's, where a
    list was given), and how often each is measured: one sample means no spread."""
    specs = [p.spec for p in grid.points]

    def one(values, say) -> str:
        values = set(values)
        return say(values.pop()) if len(values) == 1 else "as the grid sets"

    pattern = one((s.pattern for s in specs), str)
    direction = one((s.direction for s in specs), lambda d: f"{d}s")
    runtime = one((s.runtime_ns for s in specs), lambda ns: "until --io-size" if ns is None else format_duration(ns))
    ramp = one((s.ramp_ns for s in specs), lambda ns: f"after a {format_duration(ns)} ramp" if ns else "no ramp")
    unset = [flag for key, flag in (("pattern", "--pattern"), ("runtime", "--runtime"), ("ramp", "--ramp"))
             if key not in given.grid and key not in given.fixed]
    whose = "the default grid's" if not given.grid else "run's defaults"
    dims = " x ".join(f"{BY_KEY[k].flag.lstrip('-')} {len(v)}" for k, v in given.with_defaults().grid.items())
    line = f"sweep of {len(grid.points)} point(s) ({dims or 'one point'}): {pattern} {direction}, {runtime} each, {ramp}"
    if unset:
        line += f" ({whose}; set by {', '.join(unset)})"
    if given.repeat == 1:
        line += "; each point measured once: one sample, no spread (--repeat 3 gives a spread)"
    else:
        line += f"; each point measured {given.repeat} times"
    return line


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


def run(store: RunStore | None, grid: Grid, plans: list[runner.Plan], *, show_progress: bool = True) -> SweepOutcome:
    """Measure every point and repeat not yet in the store, saving each as it
    completes. Under MPI every rank runs every point; rank 0 saves."""
    repeat = mpi.broadcast(store.info()["sweep"]["repeat"] if store else None)
    done = mpi.broadcast(store.completed() if store else None)
    # Repeat-major (the whole grid, then again): drift in the device shows up
    # as spread between repeats instead of hiding inside one point.
    todo = [(p, plan, rep) for rep in range(repeat) for p, plan in zip(grid.points, plans) if (p.key, rep) not in done]
    total = len(grid.points) * repeat
    ui_class = _BarProgress if show_progress and sys.stderr.isatty() else _LineProgress
    ui = ui_class(total, total - len(todo)) if show_progress and store else None
    if store:
        store.lock()  # one writer at a time: a second sweep of this run is refused, naming this one
        store.update_info(status="running")
    interrupted = False
    status = "failed"  # unless the loop below ends normally or is interrupted
    try:
        for point, plan, rep in todo:
            if ui:
                ui.start_point(point.label() + (f" #{rep + 1}" if repeat > 1 else ""))
            result = runner.execute(plan, record_environment=False, progress=ui.progress if ui else None)
            # the point in flight is not saved if it was interrupted: it is incomplete
            if mpi.broadcast(result.interrupted if result else None):
                interrupted = True
                break
            done.add((point.key, rep))
            if store:
                store.append(record(result, point.index, point.key, rep))
            if ui:
                ui.end_point(result)
        status = "interrupted" if interrupted else "complete"
    except KeyboardInterrupt:
        interrupted, status = True, "interrupted"
    finally:
        if ui:
            ui.close()
        if store:
            try:
                store.update_info(status=status)  # always final: complete, failed or interrupted
            finally:
                store.unlock()
    return SweepOutcome(store, len(done), total, interrupted, grid.skipped)
