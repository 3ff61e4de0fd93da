"""Turning a run's rows (one per point and repeat, see store.load) into what
people read: per-point medians with their spread, the knee of the
throughput-latency curve, the best points."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from gdsbench import _native
from gdsbench.job.spec import OPTIONS

SPREAD_LIMIT = 0.05  # MLPerf Storage's rule: repeats more than 5% apart are flagged
MEDIAN_COLUMNS = [
    "bandwidth_bytes_per_s", "iops", "lat_min_ns", "lat_mean_ns", "lat_p50_ns", "lat_p90_ns", "lat_p99_ns",
    "lat_p99.9_ns", "lat_p99.99_ns", "lat_max_ns", "cpu_s_per_gb", "cpu_user_s", "cpu_sys_s", "cached_fraction",
]


def dimension_columns() -> list[str]:
    """Columns that can be sweep dimensions, in option-table order."""
    return [opt.column for opt in OPTIONS if opt.sweep]


def varying(df: pd.DataFrame) -> list[str]:
    """Dimension columns that take more than one value in df."""
    return [c for c in dimension_columns() if c in df.columns and df[c].nunique(dropna=False) > 1]


def merged_histogram(rows: pd.DataFrame) -> _native.LatencyHistogram:
    """The exact union of the rows' latency histograms (adding bucket counts)."""
    merged = _native.LatencyHistogram()
    for row in rows.itertuples(index=False):
        counts = np.zeros(_native.LatencyHistogram.BUCKETS, dtype=np.uint64)
        counts[np.asarray(row.hist_index, dtype=np.int64)] = np.asarray(row.hist_count, dtype=np.uint64)
        merged.merge(_native.LatencyHistogram.from_state(
            counts, int(row.lat_min_ns), int(row.lat_max_ns), float(row.lat_mean_ns), float(row.hist_m2)))
    return merged


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """One row per point: its dimensions, the median of each figure over its
    repeats, the spread of bandwidth ((max - min) / median) and whether that
    exceeds 5% (flagged)."""
    dims = dimension_columns()
    rows = []
    for point, group in df.groupby("point", sort=True):
        bw = group["bandwidth_bytes_per_s"]
        median_bw = float(bw.median())
        spread = float((bw.max() - bw.min()) / median_bw) if median_bw else 0.0
        out: dict[str, Any] = {"point": point, "repeats": len(group)}
        out.update({c: group[c].iloc[0] for c in dims if c in group.columns})  # per column: keeps its dtype
        out.update({c: float(group[c].median()) for c in MEDIAN_COLUMNS if c in group.columns and group[c].notna().any()})
        out["spread"] = spread if len(group) > 1 else float("nan")  # one repeat: no spread to speak of
        out["flagged"] = len(group) > 1 and spread > SPREAD_LIMIT
        if "timeline_bytes" in group.columns and "interval_ns" in group.columns:
            swings = [timeline_spread(t, int(i), int(e)) for t, i, e in
                      zip(group["timeline_bytes"], group["interval_ns"], group["elapsed_ns"])]
            swings = [s for s in swings if s is not None]
            out["timeline_spread"] = float(np.median(swings)) if swings else float("nan")
        out["warnings"] = "; ".join(sorted({w for w in group.get("warnings", []) if w}))
        if "data_path" in group.columns:  # runs made before labels existed lack them
            out["data_path"] = "; ".join(sorted(set(group["data_path"])))
            out["gpu_simulated"] = bool(group["gpu_simulated"].any())
        rows.append(out)
    return pd.DataFrame(rows)


def describe_point(row: pd.Series | dict, columns: list[str]) -> str:
    """'bs=4 KiB qd=32' from a summary row, naming only the given columns."""
    opts = {o.column: o for o in OPTIONS}
    return " ".join(f"{opts[c].key}={opts[c].format(row[c])}" for c in columns) or "the only point"


def best_point(points: pd.DataFrame, column: str, highest: bool = True) -> tuple[pd.Series, str]:
    """The best point by `column` among those whose repeats agree, and a note for a headline.
    A flagged point (repeats more than 5% apart) is passed over for the best unflagged one,
    and the note counts the flagged points that measured more; where every point is flagged, the best of them, and the note gives
    its spread; with one repeat, the note says no spread was measured."""
    usable = points[~points["flagged"].astype(bool)] if "flagged" in points.columns else points
    pool = usable if len(usable) else points
    row = pool.loc[pool[column].idxmax() if highest else pool[column].idxmin()]
    if "repeats" in row and row["repeats"] < 2:
        return row, "1 repeat: spread not measured"
    if bool(row.get("flagged", False)):
        return row, f"FLAGGED: its repeats spread {row['spread']:.0%}, as every point's did"
    flagged = points.drop(usable.index)[column]
    passed = int((flagged > row[column]).sum() if highest else (flagged < row[column]).sum())
    return row, (f"{passed} flagged point(s) that measured more passed over" if passed else "")


def with_note(text: str, note: str) -> str:
    return f"{text} ({note})" if note else text


KNEE_SHARE = 0.90
KNEE_RULE = ("the knee is the smallest queue depth reaching 90% of the curve's peak throughput: deeper "
             "queues buy at most 10% more, and only add latency")


def knee(curve: pd.DataFrame, throughput: str) -> int | None:
    """Position (in curve order) of the knee of a throughput-latency curve: the
    first point reaching KNEE_SHARE of the curve's peak throughput. It does not
    depend on how finely the grid samples queue depth, as a rule comparing
    neighbouring steps would (with a 4x step, Little's law makes latency grow
    faster than throughput whenever throughput less than doubles). None for a
    curve of fewer than two points or no throughput, and for a curve that first
    reaches it at its deepest point: that curve has not levelled off (still_rising)."""
    t = curve[throughput].to_numpy(float)
    if len(t) < 2 or not np.nanmax(t) > 0:
        return None
    first = int(np.argmax(t >= KNEE_SHARE * np.nanmax(t)))
    return None if first == len(t) - 1 else first


def still_rising(curve: pd.DataFrame, throughput: str) -> bool:
    """Whether a throughput-latency curve was still rising at its deepest queue depth: it has
    no knee, and deeper queues may give more."""
    t = curve[throughput].to_numpy(float)
    return len(t) >= 2 and np.nanmax(t) > 0 and knee(curve, throughput) is None


def timeline_spread(samples, interval_ns: int, elapsed_ns: int) -> float | None:
    """How much one run's throughput swung within itself: (90th - 10th
    percentile) / median of its full intervals (a last interval shorter than
    half an interval is left out: its few bytes over a sliver of time read as a
    spike). None with fewer than three full intervals."""
    values = np.asarray(list(samples), float)
    if len(values):
        last = elapsed_ns - (len(values) - 1) * interval_ns
        if last < interval_ns / 2:
            values = values[:-1]
        else:  # as a rate over its own width
            values[-1] *= interval_ns / last
    if len(values) < 3:
        return None
    median = float(np.median(values))
    return float((np.percentile(values, 90) - np.percentile(values, 10)) / median) if median else None


def series(summary: pd.DataFrame, along: str) -> list[tuple[str, pd.DataFrame]]:
    """Split a summary into curves along one dimension (sorted by it): one per
    combination of the other varying dimensions, each with a label."""
    others = [c for c in varying(summary) if c != along]
    if not others:
        return [("", summary.sort_values(along))]
    out = []
    for _, group in summary.groupby(others, sort=True, dropna=False):
        out.append((describe_point(group.iloc[0], others), group.sort_values(along)))
    return out
