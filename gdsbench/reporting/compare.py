"""`gdsbench compare`: the same points measured on several tiers, as ratios
against the first run, with a headline a person can quote and overlaid charts.

Points are aligned on the sweep's dimensions (the options each run varied);
settings fixed per run (O_DIRECT on one tier, buffered on another) may differ
and are listed as a warning, as are differences in host and storage.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd

from gdsbench.job.errors import UsageError
from gdsbench.job.spec import BY_KEY, OPTIONS
from gdsbench.job.units import format_duration, format_rate, format_size
from gdsbench.reporting import charts, html
from gdsbench.results import analysis
from gdsbench.results.store import load

RATIOS = {  # column -> (label, higher is better)
    "bandwidth_bytes_per_s": ("bandwidth", True),
    "iops": ("IOPS", True),
    "lat_p50_ns": ("p50", False),
    "lat_p99_ns": ("p99", False),
    "cpu_s_per_gb": ("CPU per GB", False),
}
HOST_KEYS = ("hostname", "kernel", "cpu_model", "cpus", "ram_bytes", "gdsbench")
TARGET_KEYS = ("fs_type", "mount_options", "block_device", "model", "rotational", "scheduler")


@dataclass
class Run:
    label: str
    df: pd.DataFrame
    summary: pd.DataFrame

    @property
    def info(self) -> dict:
        return self.df.attrs["run"]


@dataclass
class Comparison:
    runs: list[Run]
    keys: list[str]  # columns the points are aligned on
    table: pd.DataFrame  # one row per aligned point: keys, each run's figures, ratios
    headlines: list[str]
    differences: list[str]
    html_path: str | None = None


def times(ratio: float) -> str:
    return f"{ratio:.0f}x" if ratio >= 10 else f"{ratio:.2g}x" if ratio < 1 else f"{ratio:.1f}x"


def _labels(dfs: list[pd.DataFrame]) -> list[str]:
    """One distinct label per run: its name, else its run id, else its folder (a copy of a run)."""
    for labels in ([df.attrs["run"]["name"] for df in dfs], [df.attrs["run"]["run_id"] for df in dfs],
                   [os.path.basename(os.path.normpath(df.attrs["run_dir"])) for df in dfs]):
        if len(set(labels)) == len(labels):
            return labels
    return [f"{df.attrs['run']['run_id']}#{i + 1}" for i, df in enumerate(dfs)]


def align_keys(runs: list[Run]) -> list[str]:
    """The dimension columns any run swept."""
    keys = {BY_KEY[k].column for run in runs for k in run.info["sweep"]["grid"]}
    return [c for c in analysis.dimension_columns() if c in keys]


def differences(runs: list[Run], keys: list[str]) -> list[str]:
    """Everything besides the aligned dimensions that is not the same in every run."""
    out = []

    def note(what: str, values: list) -> None:
        if len({repr(v) for v in values}) > 1:
            out.append(f"{what}: " + " vs ".join(f"{v} ({r.label})" for v, r in zip(values, runs)))

    for key in HOST_KEYS:
        note(key, [r.info["environment"]["host"].get(key) for r in runs])
    for key in TARGET_KEYS:
        note(f"storage {key}", [", ".join(sorted({str(t.get(key)) for t in r.info["environment"]["targets"].values()}))
                                for r in runs])
    for opt in OPTIONS:
        col = opt.column
        if col in keys or opt.name in ("path", "size", "offset"):
            continue
        note(opt.flag.lstrip("-"), [opt.format(r.df[col].iloc[0]) if col in r.df.columns else "-" for r in runs])
    note("repeats", [r.info["sweep"]["repeat"] for r in runs])
    note("data path", ["; ".join(sorted(set(r.summary["data_path"]))) if "data_path" in r.summary else "-" for r in runs])
    for r in runs:
        if "gpu_simulated" in r.summary and r.summary["gpu_simulated"].any():
            out.insert(0, f"{r.label} ran on a SIMULATED GPU (a CPU stand-in): its figures measure no GPU")
    return out


def _headline(base: Run, other: Run, merged: pd.DataFrame) -> str:
    """'flash/disk: 6.1x bandwidth at 1 MiB, 40x IOPS at 4 KiB QD32, 12x lower p99': bandwidth at the
    largest block size, IOPS and p99 at the smallest block size and deepest queue (of the points compared)."""
    a, b = base.label, other.label
    parts = []
    largest = merged[merged["bs_bytes"] == merged["bs_bytes"].max()]
    best = largest.loc[largest[f"bandwidth_bytes_per_s {b}"].idxmax()]
    parts.append(f"{times(best[f'bandwidth_bytes_per_s ratio {b}'])} bandwidth at {format_size(best['bs_bytes'])}")
    smallest = merged[merged["bs_bytes"] == merged["bs_bytes"].min()]
    deepest = smallest[smallest["qd"] == smallest["qd"].max()]
    pick = deepest.loc[deepest[f"iops {b}"].idxmax()]
    parts.append(f"{times(pick[f'iops ratio {b}'])} IOPS at {format_size(pick['bs_bytes'])} QD{int(pick['qd'])}")
    p99 = pick[f"lat_p99_ns ratio {b}"]
    parts.append(f"{times(1 / p99)} lower p99" if p99 <= 1 else f"{times(p99)} higher p99")
    return f"{b}/{a}: " + ", ".join(parts)


def compare(run_dirs: list[str]) -> Comparison:
    if len(run_dirs) < 2:
        raise UsageError("compare needs at least two runs: gdsbench compare RUN_A RUN_B")
    dfs = [load(d) for d in run_dirs]
    for d, df in zip(run_dirs, dfs):
        if df.empty:
            raise UsageError(f"run {d}: no completed points to compare")
    runs = [Run(label, df, analysis.summarize(df)) for label, df in zip(_labels(dfs), dfs)]
    keys = align_keys(runs)
    figures = list(RATIOS)
    # block size and queue depth name the headline's points even when not swept
    carried = [c for c in ("bs_bytes", "qd") if c not in keys]
    merged = None
    for run in runs:
        part = run.summary[keys + figures + carried].rename(
            columns={f: f"{f} {run.label}" for f in figures}
            | ({} if merged is None else {c: f"{c} {run.label}" for c in carried}))
        if merged is None:
            merged = part
        elif keys:
            merged = merged.merge(part, on=keys, how="inner")
        else:  # nothing swept: each run is one point, compared as such
            merged = merged.merge(part, how="cross")
    if merged is None or merged.empty:
        raise UsageError("the runs have no point in common (same " + ", ".join(keys) + "); compare runs of the same grid")
    base = runs[0]
    for run in runs[1:]:
        for f in figures:
            merged[f"{f} ratio {run.label}"] = merged[f"{f} {run.label}"] / merged[f"{f} {base.label}"]
    headlines = [_headline(base, run, merged) for run in runs[1:]]
    return Comparison(runs, keys, merged, headlines, differences(runs, keys))


def text_table(c: Comparison) -> tuple[list[str], list[list[str]]]:
    """Header and rows: each point, each run's bandwidth and p99, and the ratios."""
    base = c.runs[0].label
    header = ["point"] + [f"bandwidth {r.label}" for r in c.runs] + [f"p99 {r.label}" for r in c.runs]
    for r in c.runs[1:]:
        header += [f"{label} {r.label}/{base}" for label, _ in RATIOS.values()]
    rows = []
    for _, row in c.table.iterrows():
        out = [analysis.describe_point(row, c.keys)]
        out += [format_rate(row[f"bandwidth_bytes_per_s {r.label}"]) for r in c.runs]
        out += [format_duration(row[f"lat_p99_ns {r.label}"]) for r in c.runs]
        for r in c.runs[1:]:
            out += [f"{row[f'{f} ratio {r.label}']:.2f}" if pd.notna(row[f"{f} ratio {r.label}"]) else "-" for f in RATIOS]
        rows.append(out)
    return header, rows


def write(c: Comparison, out_dir: str) -> str:
    """Overlaid charts and one HTML page; returns the page's path."""
    with html.writing_pages(out_dir) as out:
        return _write(c, out)


def _write(c: Comparison, out_dir: str) -> str:
    bs_curves, qd_curves = [], []
    for run in c.runs:
        for label, df in analysis.series(run.summary, "bs_bytes"):
            bs_curves.append((f"{run.label} {label}".strip(), df))
        for label, df in analysis.series(run.summary, "qd"):
            qd_curves.append((f"{run.label} {label}".strip(), df))
    title = " vs ".join(r.label for r in c.runs)
    column = charts.throughput_column(qd_curves)[0]
    knees = {label: analysis.knee(df, column) if len(df) > 1 else None for label, df in qd_curves}
    png = {
        "bandwidth": charts.bandwidth_vs_block_size(bs_curves, os.path.join(out_dir, "compare_bandwidth.png"),
                                                    f"{title}: bandwidth by block size"),
        "latency": charts.throughput_latency(qd_curves, os.path.join(out_dir, "compare_throughput_latency.png"),
                                             f"{title}: throughput against latency", knees),
    }
    header, rows = text_table(c)
    sections = [("", "".join(f'<p class="headline">{html.esc(h)}</p>' for h in c.headlines))]
    if c.differences:
        sections.append(("Warning: these runs differ beyond the compared points",
                         "<ul>" + "".join(f'<li class="warn">{html.esc(d)}</li>' for d in c.differences) + "</ul>"))
    sections += [
        ("Bandwidth by block size", html.image(png["bandwidth"], "bandwidth by block size")),
        ("Throughput against latency", html.image(png["latency"], "throughput against latency")),
        ("Points", html.table(header, rows)),
        ("Runs", html.table(["label", "run", "host", "created"], [
            [r.label, r.info["run_id"], r.info["host"], r.info["created"]] for r in c.runs])),
    ]
    path = os.path.join(out_dir, "compare.html")
    html.write_page(path, f"gdsbench compare: {title}", sections)
    c.html_path = path
    return path
