"""The statistics behind the comparison scripts' verdicts (vs_fio, vs_clients): the median of paired ratios,
a distribution-free confidence interval for that median, and the verdict rule on the two.

    PASS   the median meets the target
    FAIL   the whole interval misses it (a real gap)
    NOISE  the median misses but the interval reaches the target: this machine cannot tell

The interval is the order statistics x(k) and x(n+1-k) with the largest k that still covers the level
(95%); with fewer than 6 values no k does, and it is the whole range (min-max), which covers less:
interval_label says which it is and how much it covers, for every table that prints one."""

from __future__ import annotations

import math
import statistics


def interval_coverage(n: int, k: int) -> float:
    """How often the order statistics x(k) and x(n+1-k) of n independent values bracket their median."""
    return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n


def median_k(n: int, level: float = 0.95) -> int:
    """The k of median_interval for n values."""
    k = 1
    while k + 1 <= n // 2 and interval_coverage(n, k + 1) >= level:
        k += 1
    return k


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval for the median: the order
    statistics x(k) and x(n+1-k) with the largest k that still covers `level`.
    With too few values (under 6) it is the whole range, which covers less:
    interval_coverage(n, 1) says how much."""
    x, n = sorted(values), len(values)
    k = median_k(n, level)
    return x[k - 1], x[n - k]


def interval_label(n: int, level: float = 0.95) -> str:
    """What median_interval of n values is, as a table says it: 'min-max, 75.0% CI' where it is the
    whole range (too few values for `level`), else '97.9% CI' (its coverage for independent values)."""
    k = median_k(n, level)
    coverage = interval_coverage(n, k)
    return f"min-max, {coverage:.1%} CI" if k == 1 else f"{coverage:.1%} CI"


def judge(median_value: float, interval: tuple[float, float], low: float, high: float = math.inf) -> str:
    """PASS when the median is inside [low, high]; FAIL when the whole
    confidence interval is outside it (a real gap, not noise); else NOISE."""
    if low <= median_value <= high:
        return "PASS"
    if interval[1] < low or interval[0] > high:
        return "FAIL"
    return "NOISE"


def paired_verdict(ratios: list[float], low: float, high: float = math.inf, level: float = 0.95) -> dict:
    """The verdict on side-by-side ratios: their median, its interval (and what that interval is), and
    judge()'s word on them against the target [low, high]."""
    if not ratios:
        raise ValueError("no ratios to judge")
    mid, interval = statistics.median(ratios), median_interval(ratios, level)
    return {"n": len(ratios), "median": mid, "interval": interval, "interval_is": interval_label(len(ratios), level),
            "verdict": judge(mid, interval, low, high)}
