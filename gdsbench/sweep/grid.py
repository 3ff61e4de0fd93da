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
from dataclasses import dataclass, field, replace
from typing import Any

from gdsbench.job import tomlfile
from gdsbench.job.errors import IncompatibleOptions, UsageError, quoted
from gdsbench.job.spec import BY_KEY, JobSpec, Option, spec_from_values, with_parsed
from gdsbench.job.units import format_duration

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
