"""Validate profiles: the thresholds a node is held to, in a TOML file with
a comment on each figure (profiles/*.toml ship with gdsbench).

A profile names reference points (what is measured and how), limits on their
figures (floors, ceilings, warn bands, fractions of another point), what a
change against a saved baseline may be, and how far repeats may spread. Every
error names the file and line.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from gdsbench.job import tomlfile
from gdsbench.job.errors import UsageError
from gdsbench.job.modes import MODES
from gdsbench.job.spec import BY_KEY, DAY, ENGINE_INFO, MAX_OFFSET
from gdsbench.job.units import parse_duration, parse_size

KiB, MiB = 1 << 10, 1 << 20
DAY_NS = DAY


class ProfileError(UsageError):
    """A profile (or --baseline file) that cannot be used: a usage error, exit 3 as gds-diag has it."""

    exit_code = 3


@dataclass(frozen=True)
class Point:
    """A reference point: one job, run once per round."""

    name: str
    about: str
    mode: str
    bs: int
    qd: int
    threads: int
    pattern: str = "seq"
    engine: str = "auto"
    rw: str = "read"  # "write": written, with an end fsync, into a file validate makes and removes

    def settings(self) -> dict:
        return {"mode": self.mode, "engine": self.engine, "bs": self.bs, "qd": self.qd, "threads": self.threads,
                "pattern": self.pattern, "rw": self.rw}


# The reference points and their defaults; a profile's [points.NAME] may change bs, qd, threads.
POINTS = {p.name: p for p in (
    Point("storage_seq", "storage to host memory, sequential", "cpu", MiB, qd=8, threads=4),
    Point("storage_rand", "storage to host memory, 4 KiB random", "cpu", 4 * KiB, qd=32, threads=1, pattern="rand"),
    Point("storage_write", "host memory to storage, sequential, fsync'd at the end, into a file validate makes and "
          "removes", "cpu", MiB, qd=8, threads=4, rw="write"),
    Point("h2d", "pinned host memory to GPU memory (copies only, no storage)", "bounce", MiB, qd=8, threads=4,
          engine="null"),
    Point("bounce", "storage to GPU through pinned host memory", "bounce", MiB, qd=8, threads=4),
    Point("gds", "storage to GPU memory by cuFile", "gds", MiB, qd=1, threads=32),
    Point("kvikio", "storage to GPU memory by kvikio", "kvikio", MiB, qd=8, threads=1),
)}

# Each figure of a point, and which way is better.
METRICS = {"gbps": "higher", "iops": "higher", "p50_us": "lower", "p99_us": "lower"}
METRIC_WORDS = {"gbps": "GB/s", "iops": "IOPS", "p50_us": "µs p50", "p99_us": "µs p99"}
LIMIT_KEYS = ("min", "max", "warn_below", "warn_above", "fraction_of")


@dataclass(frozen=True)
class Limit:
    point: str
    metric: str
    min: float | None = None  # FAIL below
    max: float | None = None  # FAIL above
    warn_below: float | None = None
    warn_above: float | None = None
    fraction_of: tuple[str, ...] = ()  # judge value / min(value of these points), not the value
    line: int | None = None


PCIE_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}  # PCIe generation -> GT/s per lane


@dataclass(frozen=True)
class Node:
    """What the node must have ([node] in a profile): nothing, unless the profile says."""

    gpus: int | None = None  # GPUs CUDA must see, at least
    gpu_models: tuple[str, ...] = ()  # each visible GPU's model must contain one of these ("H100", "H200")
    pcie_gen: int | None = None  # each GPU's link, read under load, at least this generation...
    pcie_width: int | None = None  # ...and this many lanes

    def to_dict(self) -> dict:
        return {k: v for k, v in vars(self).items() if v not in (None, ())}


ANY_NODE = Node()  # a profile without [node]


@dataclass(frozen=True)
class Profile:
    name: str = "default"
    about: str = ""
    source: str = ""  # the file it came from
    require_gds: bool = False  # a GPU read served by cuFile's compatibility mode: FAIL (else WARN)
    max_spread: float = 0.05  # (max - min) / median of a point's repeats above this: WARN
    runtime_ns: int = 2_000_000_000
    ramp_ns: int = 300_000_000
    repeats: int = 3
    integrity_bytes: int = 512 * MiB
    quick_runtime_ns: int = 400_000_000
    quick_repeats: int = 3
    quick_integrity_bytes: int = 256 * MiB
    node: Node = ANY_NODE
    points: dict[str, Point] = field(default_factory=lambda: dict(POINTS))
    limits: tuple[Limit, ...] = ()
    baseline_fail_drop: float = 0.15  # --baseline: GB/s or IOPS lower by more than this: FAIL
    baseline_warn_drop: float = 0.05
    baseline_fail_rise: float = 0.50  # --baseline: p50/p99 higher by more than this: FAIL
    baseline_warn_rise: float = 0.20

    def for_quick(self) -> Profile:
        return replace(self, runtime_ns=self.quick_runtime_ns, repeats=self.quick_repeats,
                       integrity_bytes=self.quick_integrity_bytes)

    def to_dict(self) -> dict:
        return {"name": self.name, "about": self.about, "source": self.source, "require_gds": self.require_gds,
                "max_spread": self.max_spread, "runtime_ns": self.runtime_ns, "ramp_ns": self.ramp_ns,
                "repeats": self.repeats, "integrity_bytes": self.integrity_bytes, "node": self.node.to_dict(),
                "points": {n: p.settings() for n, p in self.points.items()},
                "limits": [{k: v for k, v in vars(lim).items() if v not in (None, ())} for lim in self.limits],
                "baseline": {"fail_drop": self.baseline_fail_drop, "warn_drop": self.baseline_warn_drop,
                             "fail_rise": self.baseline_fail_rise, "warn_rise": self.baseline_warn_rise}}


def in_flight(p: Point) -> int:
    return p.bs * p.qd * p.threads


def matched_references(points: dict[str, Point], limits: tuple[Limit, ...]) -> tuple[dict[str, Point], tuple[Limit, ...]]:
    """A GPU point judged as a fraction of a storage point is judged against storage read with
    the same bytes in flight: where the storage point runs at another depth (gds at 32 x 1
    against storage_seq at 8 x 4), a reference point storage_at_POINT is added at the GPU
    point's depth and the limit names it instead."""
    points, out = dict(points), []
    for lim in limits:
        judged, refs = points[lim.point], []
        for name in lim.fraction_of:
            ref = points[name]
            if MODES[judged.mode].gpu and not MODES[ref.mode].gpu and in_flight(ref) != in_flight(judged):
                name = f"storage_at_{lim.point}"
                points[name] = replace(ref, name=name, about=f"storage to host memory at {lim.point}'s depth",
                                       bs=judged.bs, qd=judged.qd, threads=judged.threads)
            refs.append(name)
        out.append(replace(lim, fraction_of=tuple(refs)))
    return points, tuple(out)


def shipped() -> dict[str, str]:
    """The profiles that ship with gdsbench, by name."""
    folder = resources.files("gdsbench.validate") / "profiles"
    return {os.path.splitext(f.name)[0]: str(f) for f in folder.iterdir() if f.name.endswith(".toml")}


def load(name_or_path: str | None) -> Profile:
    """A shipped profile by name ('default', 'h200-gen5-nvme', ...) or a TOML file."""
    path = shipped().get(name_or_path or "default", name_or_path)
    if not os.path.exists(path):
        raise ProfileError(f"--profile {name_or_path}: no such file, and not a shipped profile "
                           f"({', '.join(sorted(shipped()))})")
    data, text = tomlfile.read(path, "--profile", ProfileError)
    return _Reader(path, text).profile(data)


class _Reader:
    """Turns a parsed profile into a Profile, naming the line of anything wrong."""

    def __init__(self, path: str, text: str):
        self.path, self.text = path, text

    def fail(self, table: str, key: str, message: str) -> ProfileError:
        line = tomlfile.line_of(self.text, key, table) or tomlfile.line_of(self.text, table.rpartition(".")[2],
                                                                          table.rpartition(".")[0])
        return ProfileError(f"{self.path} line {line or '?'}: [{table}] {key}: {message}")

    def table(self, data: dict, name: str, allowed: tuple[str, ...]) -> dict:
        section = data.get(name, {})
        if not isinstance(section, dict):
            raise self.fail("", name, "must be a table: [" + name + "]")
        for key in section:
            if key not in allowed:
                raise self.fail(name, key, f"unknown key; known here: {', '.join(allowed)}")
        return section

    def number(self, table: str, key: str, value: Any, low: float = 0.0, whole: bool = False,
               high: float | None = None) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and not isinstance(value, int)):
            raise self.fail(table, key, f"{value!r} is not a {'whole ' if whole else ''}number")
        if not math.isfinite(value):
            raise self.fail(table, key, f"{value} is not a finite number")
        if value < low:
            raise self.fail(table, key, f"{value} is below {low}")
        if high is not None and value > high:
            raise self.fail(table, key, f"{value} is above {high}")
        return value

    def parsed(self, table: str, key: str, value: Any, parse) -> int:
        try:
            return parse(value, key)
        except UsageError as e:
            raise self.fail(table, key, str(e)) from None

    def profile(self, data: dict) -> Profile:
        for key in data:
            if key not in ("profile", "node", "run", "points", "limits", "baseline"):
                raise self.fail("", key, "unknown table; a profile has [profile], [node], [run], [points.*], "
                                         "[limits.*], [baseline]")
        kw: dict[str, Any] = {"source": self.path}
        head = self.table(data, "profile", ("name", "about", "require_gds", "max_spread"))
        kw["name"] = str(head.get("name", os.path.splitext(os.path.basename(self.path))[0]))
        kw["about"] = str(head.get("about", ""))
        if "require_gds" in head:
            if not isinstance(head["require_gds"], bool):
                raise self.fail("profile", "require_gds", "must be true or false")
            kw["require_gds"] = head["require_gds"]
        if "max_spread" in head:
            kw["max_spread"] = self.number("profile", "max_spread", head["max_spread"], high=10.0)
        run = self.table(data, "run", ("runtime", "ramp", "repeats", "integrity_bytes", "quick_runtime",
                                       "quick_repeats", "quick_integrity_bytes"))
        for key, attr, parse, low in (("runtime", "runtime_ns", parse_duration, 1),
                                      ("ramp", "ramp_ns", parse_duration, 0),
                                      ("quick_runtime", "quick_runtime_ns", parse_duration, 1),
                                      ("integrity_bytes", "integrity_bytes", parse_size, 4 * KiB),
                                      ("quick_integrity_bytes", "quick_integrity_bytes", parse_size, 4 * KiB)):
            if key in run:
                kw[attr] = self.parsed("run", key, run[key], parse)
                high = DAY_NS if parse is parse_duration else MAX_OFFSET
                if not low <= kw[attr] <= high:
                    shown = "0" if kw[attr] == 0 else run[key]
                    raise self.fail("run", key, f"{shown} must be {'more than 0' if low else 'at least 0'} and at most "
                                                f"{'a day' if parse is parse_duration else 'the largest file'}"
                                                + (" (a measurement of nothing passes nothing)" if low and not kw[attr]
                                                   else ""))
        for key in ("repeats", "quick_repeats"):
            if key in run:
                kw[key] = int(self.number("run", key, run[key], low=1, whole=True, high=1000))
        kw["node"] = self.node(self.table(data, "node", ("gpus", "gpu_model", "pcie_gen", "pcie_width")))
        kw["points"] = self.points(self.table(data, "points", tuple(POINTS)))
        kw["points"], kw["limits"] = matched_references(kw["points"],
                                                        self.limits(self.table(data, "limits", tuple(POINTS))))
        base = self.table(data, "baseline", ("fail_drop", "warn_drop", "fail_rise", "warn_rise"))
        for key in base:
            kw[f"baseline_{key}"] = self.number("baseline", key, base[key], high=100.0)
        return Profile(**kw)

    def node(self, section: dict) -> Node:
        kw: dict[str, Any] = {}
        for key in ("gpus", "pcie_width"):
            if key in section:
                kw[key] = int(self.number("node", key, section[key], low=0 if key == "gpus" else 1, whole=True))
        if "pcie_gen" in section:
            gen = section["pcie_gen"]
            if isinstance(gen, bool) or gen not in PCIE_GTS:
                raise self.fail("node", "pcie_gen", f"{gen!r}: give a PCIe generation, {min(PCIE_GTS)} to {max(PCIE_GTS)}")
            kw["pcie_gen"] = gen
        if "gpu_model" in section:
            models = section["gpu_model"]
            models = [models] if isinstance(models, str) else models
            if not isinstance(models, list) or not models or not all(isinstance(m, str) and m.strip() for m in models):
                raise self.fail("node", "gpu_model", 'give a model name, or a list of them: "H200" or ["H100", "H200"]')
            kw["gpu_models"] = tuple(m.strip() for m in models)
        return Node(**kw)

    def points(self, section: dict) -> dict[str, Point]:
        points = dict(POINTS)
        for name, values in section.items():
            table = f"points.{name}"
            if not isinstance(values, dict):
                raise self.fail("points", name, "must be a table: [points." + name + "]")
            changes: dict[str, Any] = {}
            for key, value in values.items():
                if key == "bs":
                    changes["bs"] = self.parsed(table, key, value, parse_size)
                elif key in ("qd", "threads"):
                    deepest = max(e["max_depth"] for e in ENGINE_INFO.values())
                    changes[key] = int(self.number(table, key, value, low=1, whole=True,
                                                   high=deepest if key == "qd" else None))
                else:
                    raise self.fail(table, key, "unknown key; a point takes bs, qd, threads")
                try:  # the bounds of `gdsbench run`'s own options, in its words
                    BY_KEY[key].check(changes[key])
                except UsageError as e:
                    raise self.fail(table, key, str(e)) from None
            points[name] = replace(points[name], **changes)
        return points

    def limits(self, section: dict) -> tuple[Limit, ...]:
        limits = []
        for name, metrics in section.items():
            table = f"limits.{name}"
            if not isinstance(metrics, dict):
                raise self.fail("limits", name, "must be a table: [limits." + name + "]")
            for metric, spec in metrics.items():
                if metric not in METRICS:
                    raise self.fail(table, metric, f"unknown figure; known: {', '.join(METRICS)}")
                if not isinstance(spec, dict) or not spec:
                    raise self.fail(table, metric, "give an inline table, e.g. { min = 1.5, warn_below = 2.0 }")
                kw: dict[str, Any] = {}
                for key, value in spec.items():
                    if key == "fraction_of":
                        if not isinstance(value, list) or not value or any(v not in POINTS or v == name for v in value):
                            raise self.fail(table, metric, f"fraction_of must list other points: {', '.join(POINTS)}")
                        kw[key] = tuple(value)
                    elif key in LIMIT_KEYS:
                        kw[key] = self.number(table, metric, value)
                    else:
                        raise self.fail(table, metric, f"unknown limit {key!r}; known: {', '.join(LIMIT_KEYS)}")
                if set(kw) <= {"fraction_of"}:
                    raise self.fail(table, metric, "fraction_of needs a min, max, warn_below or warn_above for the ratio")
                for low, high in (("min", "max"), ("warn_below", "warn_above"), ("min", "warn_above"),
                                  ("warn_below", "max")):
                    if low in kw and high in kw and kw[low] > kw[high]:
                        raise self.fail(table, metric, f"{low} = {kw[low]:g} is above {high} = {kw[high]:g}: "
                                                       "no value could pass")
                limits.append(Limit(name, metric, line=tomlfile.line_of(self.text, metric, table), **kw))
        return tuple(limits)
