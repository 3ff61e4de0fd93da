"""Sizes and durations with units: parsed from text, stored in base units
(bytes, nanoseconds), printed with units.

Sizes follow fio: K, M, G, T and P are binary (4K = 4096 bytes) whether written
4K, 4KB or 4KiB. Durations take ns, us, ms, s, m (minutes) and h; a bare number
is seconds, as in fio's runtime.
"""

from __future__ import annotations

import math
import re

from gdsbench.job.errors import UsageError, quoted

_SIZE_FACTORS = {"": 1, "b": 1}
for _i, _p in enumerate("kmgtp", start=1):
    for _suffix in (_p, _p + "b", _p + "ib"):
        _SIZE_FACTORS[_suffix] = 1024**_i

_DURATION_FACTORS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "": 1_000_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "min": 60_000_000_000,
    "h": 3_600_000_000_000,
}

_NUMBER = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zµ]*)\s*$", re.IGNORECASE)


def _amount(text: str, name: str, what: str, example: str, factors: dict[str, int], units: str) -> float:
    """The number text writes times its unit's factor; UsageError naming `name` if it is not one, or too
    large for a float (a number of 400 digits: int() of it would be a traceback)."""
    m = _NUMBER.match(str(text))
    if not m:
        raise UsageError(f"{name} {quoted(text)}: not a {what}; write it like {example}")
    unit = m.group(2).lower()
    if unit not in factors:
        raise UsageError(f"{name} {quoted(text)}: unknown unit {quoted(unit)}; use {units}")
    amount = float(m.group(1)) * factors[unit]
    if math.isinf(amount):
        raise UsageError(f"{name} {quoted(text)}: too large a {what}")
    return amount


def parse_size(text: str | int, name: str = "size") -> int:
    """'4K' -> 4096. Raises UsageError naming `name` on bad input."""
    if isinstance(text, int):
        return text
    n = _amount(text, name, "size", "4K, 1MiB or 10G", _SIZE_FACTORS, "B, K, M, G, T or P (binary: 4K = 4096 bytes)")
    if n != int(n):
        raise UsageError(f"{name} {quoted(text)}: not a whole number of bytes")
    return int(n)


def parse_duration(text: str | int | float, name: str = "duration") -> int:
    """'500ms' -> 500_000_000 ns; a bare number, written or numeric, is seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        text = repr(text)
    return int(round(_amount(text, name, "duration", "500ms, 10s or 2m", _DURATION_FACTORS, "ns, us, ms, s, m or h")))


def _digits(x: float) -> str:
    """Three significant digits, no exponent; whole numbers stay whole."""
    if x == int(x):
        return str(int(x))
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"


def format_size(n: float) -> str:
    """4096 -> '4 KiB'; 1.5 * 2**30 -> '1.50 GiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{_digits(n)} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def format_rate(bytes_per_s: float) -> str:
    return format_size(bytes_per_s) + "/s"


def format_duration(ns: float) -> str:
    """Nanoseconds -> '812 ns', '95.3 µs', '1.20 ms', '5.00 s'."""
    for unit, factor in (("ns", 1), ("µs", 1e3), ("ms", 1e6)):
        if ns < factor * 1000:
            return f"{_digits(ns / factor)} {unit}"
    return f"{_digits(ns / 1e9)} s"


def format_count(n: float) -> str:
    """1234567 -> '1.23 M'."""
    for unit, factor in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= factor:
            return f"{_digits(n / factor)} {unit}"
    return _digits(n)
