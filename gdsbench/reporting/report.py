"""`gdsbench report`: PNG charts and one self-contained HTML page for a run."""

from __future__ import annotations

import json
import os

import pandas as pd

from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_count, format_duration, format_rate, format_size
from gdsbench.reporting import charts, html, measured
from gdsbench.reporting.html import Report
from gdsbench.results import analysis
from gdsbench.results.store import load

SIMULATED = "SIMULATED"  # the summary's first line when any point ran on the CPU stand-in for a GPU


def _knees(curves, column: str) -> dict[str, int | None]:
    return {label: analysis.knee(df, column) for label, df in curves}


def _spread_text(row) -> str:
    """A point's spread between repeats, or why there is none."""
    if row["repeats"] < 2:
        return "n/a (1 repeat)"
    return f"{row['spread']:.1%}" + (" FLAGGED" if row["flagged"] else "")


def _summary(df: pd.DataFrame, summary: pd.DataFrame, knees, qd_curves, column: str) -> dict[str, str]:
    info = df.attrs["run"]
    dims = analysis.varying(summary)
    best_bw, bw_note = analysis.best_point(summary, "bandwidth_bytes_per_s")
    best_iops, iops_note = analysis.best_point(summary, "iops")
    problems = df.attrs.get("problems") or []
    planned = info.get("points")  # a run.json edited by hand may have lost the plan: the points still count
    skipped = info.get("skipped") or []
    lines = [
        ("run", f"{info['run_id']} ({info['status']}), gdsbench {info['gdsbench']} on {info['host']}"),
        ("points", (f"{len(summary)} of {len(planned)} measured" if isinstance(planned, list) else
                    f"{len(summary)} measured (run.json does not list the points planned)")
                   + f", {int(summary['repeats'].max())} repeat(s) each"
                   + (f"; {len(skipped)} skipped as nonsensical" if skipped else "")),
        ("best bandwidth", analysis.with_note(f"{format_rate(best_bw['bandwidth_bytes_per_s'])} at "
                                              f"{analysis.describe_point(best_bw, dims)}", bw_note)),
        ("best IOPS", analysis.with_note(f"{format_count(best_iops['iops'])} at "
                                         f"{analysis.describe_point(best_iops, dims)}", iops_note)),
    ]
    def amount(row) -> str:
        return format_count(row["iops"]) + " IOPS" if column == "iops" else format_rate(row["bandwidth_bytes_per_s"])

    for label, df_curve in qd_curves:
        k = knees.get(label)
        if analysis.still_rising(df_curve, column):
            last = df_curve.iloc[-1]
            text = (f"none: still rising at QD{int(last['qd'])} ({amount(last)}, p50 {format_duration(last['lat_p50_ns'])}); "
                    "deeper queues may give more")
        elif k is None:
            text = "queue depth not swept"
        else:
            row, peak = df_curve.iloc[k], df_curve.loc[df_curve[column].idxmax()]
            text = (f"QD{int(row['qd'])}: {amount(row)}, p50 {format_duration(row['lat_p50_ns'])}, "
                    f"p99 {format_duration(row['lat_p99_ns'])} (peak {amount(peak)} at QD{int(peak['qd'])}, "
                    f"p50 {format_duration(peak['lat_p50_ns'])})")
        lines.append((f"knee {label}".strip(), text))
    if any(len(curve) >= 2 for _, curve in qd_curves):
        lines.append(("knee rule", analysis.KNEE_RULE))
    cached = df["cached_fraction"].dropna()
    lines.append(("page cache", f"{cached.min():.1%} to {cached.max():.1%} of the region cached at the start of a point"
                  if len(cached) else "not applicable (null engine)"))
    if "data_path" in summary.columns:
        lines.append(("data path", " | ".join(sorted(set(summary["data_path"])))))
        if summary["gpu_simulated"].any():
            lines.insert(0, (SIMULATED, "points marked simulated ran on a CPU stand-in for a GPU: "
                                        "they measure nothing about a GPU"))
    best = summary.loc[summary["bandwidth_bytes_per_s"].idxmax()]
    swing = best.get("timeline_spread")
    swing_text = (f"the best point's throughput swung {swing:.0%} within its own run (10th to 90th percentile "
                  "of its intervals)") if swing == swing and swing is not None else ""
    if int(summary["repeats"].max()) < 2:
        lines.append(("spread between repeats", "n/a (1 repeat): run the sweep with --repeat 3 to measure it"
                      + (f"; meanwhile {swing_text}" if swing_text else "")))
    else:
        flagged = summary[summary["flagged"]]
        lines.append(("flagged (repeats > 5% apart)", ", ".join(
            f"{analysis.describe_point(r, dims)} ({r['spread']:.0%})" for _, r in flagged.iterrows()) or "none"))
        if swing_text:
            lines.append(("within-run swing", swing_text))
    warnings = sorted({w for w in summary["warnings"] if w})
    if warnings:
        lines.append(("warnings", " | ".join(warnings)))
    if problems:  # lines of points.jsonl that could not be read: what this page does not show
        lines.insert(1, ("WARNING", f"{len(problems)} saved line(s) could not be read and are left out: "
                                    + " | ".join(problems)))
    return dict(lines)


def _per_host_rows(df: pd.DataFrame, dims: list[str]) -> list[list]:
    """A row per host of every point and repeat that ran on more than one host (MPI across hosts)."""
    if "hosts" not in df or not (df["hosts"] > 1).any():
        return []
    rows = []
    for _, r in df[df["hosts"] > 1].iterrows():
        for h in json.loads(r["per_host"]):
            rows.append([analysis.describe_point(r, dims), int(r["repeat"]), h["host"],
                         ", ".join(map(str, h["ranks"])), format_size(h["bytes"]), format_rate(h["bandwidth_bytes_per_s"])])
    return rows


def build(run_dir: str, out_dir: str | None = None, timeline_point: int | None = None) -> Report:
    """The run's HTML page and charts, in out_dir (default: the run's report/)."""
    df = load(run_dir)
    if df.empty:
        damaged = df.attrs.get("problems", [])
        if damaged:  # every line was damaged: a resume would measure again what was lost, not find it
            raise UsageError(f"run {run_dir}: no point to report: every line of its points file is damaged "
                             f"({len(damaged)}; the first: {damaged[0]})")
        raise UsageError(f"run {run_dir}: no completed points yet; finish it with `gdsbench sweep --resume`")
    with html.run_pages(run_dir, out_dir) as out:
        return _build(df, out, timeline_point)


def _build(df: pd.DataFrame, out_dir: str, timeline_point: int | None) -> Report:
    run_dir = df.attrs["run_dir"]
    info = df.attrs["run"]
    summary = analysis.summarize(df)
    name = info["name"]
    png = {}

    sub = measured.subtitle(df, name)
    bs_curves = analysis.series(summary, "bs_bytes")
    png["bandwidth_vs_block_size"] = charts.bandwidth_vs_block_size(
        bs_curves, os.path.join(out_dir, "bandwidth_vs_block_size.png"), f"{name}: bandwidth by block size", sub)
    qd_curves = analysis.series(summary, "qd")
    column = charts.throughput_column(qd_curves)[0]
    knees = _knees(qd_curves, column)
    png["throughput_latency"] = charts.throughput_latency(
        qd_curves, os.path.join(out_dir, "throughput_latency.png"),
        f"{name}: throughput against latency as queue depth grows", knees, sub)
    png["latency_vs_queue_depth"] = charts.latency_vs_queue_depth(
        qd_curves, os.path.join(out_dir, "latency_vs_queue_depth.png"), f"{name}: latency percentiles by queue depth",
        sub)
    others = [c for c in analysis.varying(summary) if c not in ("bs_bytes", "qd")]
    png["heatmap"] = charts.heatmap(summary, os.path.join(out_dir, "heatmap.png"),
                                    f"{name}: bandwidth by block size and queue depth"
                                    + (" (best over " + ", ".join(others) + ")" if others else ""), sub)
    if timeline_point is None:
        timeline_point = int(summary.loc[summary["bandwidth_bytes_per_s"].idxmax(), "point"])
    rows = df[df["point"] == timeline_point]
    if rows.empty:
        raise UsageError(f"--point {timeline_point}: no such point in {run_dir} (points 0-{int(summary['point'].max())})")
    label = analysis.describe_point(summary[summary["point"] == timeline_point].iloc[0], analysis.varying(summary))
    png["timeline"] = charts.timeline(rows, os.path.join(out_dir, "timeline.png"), f"{name}: timeline of {label}", sub)

    lines = _summary(df, summary, knees, qd_curves, column)
    dims = analysis.varying(summary)
    table_rows = [
        [analysis.describe_point(r, dims), format_rate(r["bandwidth_bytes_per_s"]), format_count(r["iops"]),
         format_duration(r["lat_p50_ns"]), format_duration(r["lat_p99_ns"]), format_duration(r["lat_p99.9_ns"]),
         f"{r['cpu_s_per_gb']:.3f}" if pd.notna(r.get("cpu_s_per_gb")) else "-", int(r["repeats"]),
         _spread_text(r)]
        for _, r in summary.iterrows()
    ]
    sections = [
        ("What was measured", html.table(["", ""], measured.what_was_measured(df, info))),
        ("Summary", html.table(["", ""], list(lines.items()))),
        ("Bandwidth by block size", html.image(png["bandwidth_vs_block_size"], "bandwidth by block size")),
        ("Throughput against latency", html.image(png["throughput_latency"], "throughput-latency curve")),
        ("Latency by queue depth", html.image(png["latency_vs_queue_depth"], "latency percentiles by queue depth")),
        ("Bandwidth heatmap", html.image(png["heatmap"], "bandwidth heatmap")),
        (f"Timeline of {label}", html.image(png["timeline"], "throughput timeline")),
        ("Points (medians over repeats)", html.table(
            ["point", "bandwidth", "IOPS", "p50", "p99", "p99.9", "CPU-s/GB", "repeats", "spread"], table_rows)),
    ]
    hosts = _per_host_rows(df, dims)
    if hosts:
        sections.append(("Per host (each repeat; a host's bytes over its ranks' latest end minus earliest start)",
                         html.table(["point", "repeat", "host", "ranks", "bytes", "bandwidth"], hosts)))
    if info.get("skipped"):
        sections.append(("Skipped points", html.table(["point", "why"], [
            [" ".join(f"{k}={v}" for k, v in s["values"].items()), s["reason"]] for s in info["skipped"]])))
    target_rows = [[path, ", ".join(f"{k}={v}" for k, v in t.items() if v not in (None, ""))]
                   for path, t in info["environment"]["targets"].items()]
    host = {k: format_size(v) if k.endswith("_bytes") and v else v for k, v in info["environment"]["host"].items()}
    sections.append(("Environment", html.table(["", ""], [[k, v] for k, v in host.items()]) +
                     (html.table(["target", "storage"], target_rows) if target_rows else "")))
    html_path = os.path.join(out_dir, "report.html")
    html.write_page(html_path, f"gdsbench report: {info['run_id']}", sections)
    return Report(html_path, png, lines)
