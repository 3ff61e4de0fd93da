"""One declared option: its kind, flag, help and bounds, and how a value a
user writes (a flag, a sweep file, a workload file) is parsed into its base
unit, checked against those bounds and shown again. The job's option table
(job/spec.py) and a training workload's fields (train/workloads.py) are
made of these; the command line's flags are built from them
(commands/options.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gdsbench.job import units
from gdsbench.job.errors import UsageError, clip, quoted


@dataclass(frozen=True)
class Option:
    kind: str  # "path", "size", "duration", "int", "choice", "bool", "str", "gpus"; "seconds" and "number" (floats)
    flag: str  # CLI flag, e.g. "--bs"
    help: str
    choices: tuple[str, ...] = ()
    negative: str | None = None  # flag that sets a bool False, e.g. "--buffered"
    aliases: tuple[str, ...] = ()  # other flags for the same option
    native: bool = True  # passed to the native Job
    sweep: bool = True  # may be a sweep dimension
    low: int | None = None  # bounds of a number, checked when parsed and by validate()
    high: int | None = None
    name: str = ""  # the field it sets (runtime_ns); filled in by the table that holds it
    engine: str | None = None  # the engine that declares it, and alone takes it (None: the job's own)
    at_most_depth: bool = False  # an engine's int that may not exceed --qd either

    @property
    def key(self) -> str:
        """The name users write in sweep files and APIs: the flag without dashes ("io_size", "runtime")."""
        return self.flag.lstrip("-").replace("-", "_").lower()

    @property
    def column(self) -> str:
        """Its results column, the unit in the name: bs -> bs_bytes; runtime_ns stays."""
        return f"{self.name}_bytes" if self.kind == "size" and not self.name.endswith("_bytes") else self.name

    def parse(self, text: Any) -> Any:
        """Convert one value as written by a user (CLI, sweep file) to its base unit, and check its bounds."""
        value = self.convert(text)
        self.check(value)
        return value

    def convert(self, text: Any) -> Any:
        """One value as written by a user, in its base unit (its bounds not checked yet)."""
        if text is None:
            return None
        if self.kind in ("size", "duration") and isinstance(text, bool):
            example = "4K" if self.kind == "size" else "10s"
            raise UsageError(f"{self.flag} {quoted(text)}: write a {self.kind} such as {example}")
        if self.kind == "choice":
            if text not in self.choices:
                raise UsageError(f"{self.flag} {clip(text)}: unknown; choose one of {', '.join(self.choices)}")
            return text
        read = READERS.get(self.kind)
        return read(self.flag, text) if read else str(text)

    def check(self, value: Any) -> None:
        """UsageError unless value is within this option's own bounds."""
        if value is None or self.kind not in ("size", "duration", "int", "seconds", "number"):
            return
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            low = "1 byte" if self.kind == "size" and self.low == 1 else self.format(self.low)
            limit = f"at least {low}" if self.high is None else f"between {low} and {self.format(self.high)}"
            shown = clip(self.format(value)) if abs(value) < 1e300 else quoted(value)  # beyond a float: as written
            raise UsageError(f"{self.flag} {shown}: must be {limit}")

    def format(self, value: Any) -> str:
        """A value in the unit a person would write it in."""
        if value is None:
            return "-"
        if self.kind == "size":
            return units.format_size(value)
        if self.kind == "duration":
            return units.format_duration(value)
        if self.kind == "int":
            return str(int(value))
        if self.kind == "gpus":
            return ",".join(str(i) for i in value)
        if self.kind in ("seconds", "number"):
            return f"{value:g}" + (" s" if self.kind == "seconds" else "")
        return str(value)

    def to_column(self, value: Any) -> Any:
        """Its value as stored in results tables (GPU lists as "0,1")."""
        return self.format(value) if self.kind == "gpus" else value


def _whole(flag: str, text: Any) -> int:
    if isinstance(text, bool) or (isinstance(text, float) and not text.is_integer()):
        raise UsageError(f"{flag} {quoted(text)}: not a whole number")
    try:
        return int(text)
    except (TypeError, ValueError, OverflowError):
        raise UsageError(f"{flag} {quoted(text)}: not a whole number") from None


def _number(flag: str, text: Any) -> float:
    """A finite number."""
    if isinstance(text, bool):
        raise UsageError(f"{flag} {quoted(text)}: not a number")
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UsageError(f"{flag} {quoted(text)}: not a number") from None
    if not math.isfinite(value):
        raise UsageError(f"{flag} {quoted(text)}: not a finite number")
    return value


def _seconds(flag: str, text: Any) -> float:
    """A number of seconds, or a duration written with a unit ("112ms")."""
    if isinstance(text, str):
        return units.parse_duration(text, flag) / 1e9
    return _number(flag, text)


def parse_bool(flag: str, text: Any) -> bool:
    if isinstance(text, bool):
        return text
    lowered = str(text).lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"{flag} {quoted(text)}: write true or false")


def parse_gpus(text: Any) -> tuple[int, ...]:
    """--gpu as written ("0", "0,1", 1, [0, 1]) -> (0,) or (0, 1): the one place it is parsed."""
    items = list(text) if isinstance(text, (list, tuple)) else str(text).split(",")
    if not items or not all(str(i).strip().isdigit() for i in items):
        raise UsageError(f"--gpu {clip(text)}: give GPU indexes such as 0 or 0,1")
    return tuple(int(str(i).strip()) for i in items)


def option(default: Any, kind: str, flag: str, help: str, **kw: Any) -> Any:
    """A dataclass field that carries its Option, for a table to gather (job/spec.py's OPTIONS)."""
    return field(default=default, metadata={"option": Option(kind, flag, help, **kw)})


# How a value of each kind is read from what a user wrote: (flag, text) -> its base unit ("path" and
# "str" are kept as text; a choice is checked against the option's own choices).
READERS = {
    "size": lambda flag, text: units.parse_size(text, flag),
    "duration": lambda flag, text: units.parse_duration(text, flag),
    "int": _whole,
    "seconds": _seconds,
    "number": _number,
    "bool": parse_bool,
    "gpus": lambda flag, text: parse_gpus(text),
}
