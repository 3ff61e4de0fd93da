"""`gdsbench compare`: the same points measured on several tiers, as ratios
against the first run, with a headline a person can quote and overlaid charts.

Points are aligned on the sweep's dimensions (the options each run varied);
settings fixed per run (O_DIRECT on one tier, buffered on another) may differ
and are listed as a warning, as are differences in host and storage.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pandas as pd

from gdsbench.job.errors import UsageError
from gdsbench.job.spec import BY_KEY, OPTIONS
from gdsbench.job.units import format_duration, format_rate, format_size
from gdsbench.reporting import charts, html, measured
from gdsbench.results import analysis
from gdsbench.results.kinds import require_kind
from gdsbench.results.store import load

RATIOS = {  # column -> (label, higher is better)
    "bandwidth_bytes_per_s": ("bandwidth", True),
    "iops": ("IOPS", True),
    "lat_p50_ns": ("p50", False),
    "lat_p99_ns": ("p99", False),
    "cpu_s_per_gb": ("CPU per GB", False),
}
HOST_KEYS = ("hostname", "kernel", "cpu_model", "cpus", "ram_bytes", "gdsbench")
TARGET_KEYS = ("kind", "fs_type", "mount_options", "block_device", "model", "rotational", "scheduler", "protocol",
               "server", "cache")


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
    headlines: list[str]  # per run after the first: its full account, clause by clause (headline())
    differences: list[str]  # ranked: those that can change the figures most first
    notices: list[str] = field(default_factory=list)  # those, shown beside the headline
    coverage: str = ""  # where the grids differ: the points each run has that were left out (coverage())
    html_path: str | None = None
    summaries: list[str] = field(default_factory=list)  # per run after the first: its short headline
    details: list[list[str]] = field(default_factory=list)  # per run after the first: the clauses behind it
    tiers: list[str] = field(default_factory=list)  # differences that make the runs different tiers (tier_differences)


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


# What can change the figures most comes first: where the bytes came from (the
# page cache or storage) and the path they took, then the job, then the
# machine, then storage details.
FIRST_OPTIONS = ("direct", "uncached", "fadvise_hint", "warm", "mode", "engine", "gpu_backend")
NONE_MEANS = {"direct": "by mode", "runtime_ns": "5 s, or none with --io-size"}


def differences(runs: list[Run], keys: list[str]) -> tuple[list[str], list[str]]:
    """What, besides the aligned dimensions, is not the same in every run:
    (the differences that can change the figures most, the rest), each ranked."""
    first, rest = [], []

    def note(what: str, values: list, into: list) -> None:
        if len({repr(v) for v in values}) > 1:
            into.append(f"{what}: " + " vs ".join(f"{v} ({r.label})" for v, r in zip(values, runs)))

    def value(opt, r) -> str:
        if opt.column not in r.df.columns:
            return "-"
        v = r.df[opt.column].iloc[0]
        if v is None or v != v:
            return f"not set ({NONE_MEANS.get(opt.name, 'the default')})"
        return opt.format(v)

    for r in runs:
        if "gpu_simulated" in r.summary and r.summary["gpu_simulated"].any():
            first.append(f"{r.label} ran on a SIMULATED GPU (a CPU stand-in): its figures measure no GPU")
    for r in runs:
        cached = r.df["cached_fraction"].dropna() if "cached_fraction" in r.df.columns else []
        if len(cached) and cached.max() > 0.5:
            first.append(f"{r.label} read from RAM: up to {cached.max():.0%} of its region was in the page cache")
    by_name = {o.name: o for o in OPTIONS}
    for name in FIRST_OPTIONS:
        opt = by_name[name]
        if opt.column not in keys:
            note(opt.flag.lstrip("-") + (" (O_DIRECT)" if name == "direct" else ""), [value(opt, r) for r in runs],
                 first)
    note("data path", ["; ".join(sorted(set(r.summary["data_path"]))) if "data_path" in r.summary else "-" for r in runs],
         first)
    for opt in OPTIONS:
        if opt.column in keys or opt.name in ("path", "size", "offset") + FIRST_OPTIONS:
            continue
        note(opt.flag.lstrip("-"), [value(opt, r) for r in runs], rest)
    note("repeats", [r.info["sweep"]["repeat"] for r in runs], rest)
    for key in HOST_KEYS:
        note(key, [r.info["environment"]["host"].get(key) for r in runs], rest)
    for key in TARGET_KEYS:
        note(f"storage {key}", [", ".join(sorted({"none" if t.get(key) is None else str(t.get(key))
                                                  for t in r.info["environment"]["targets"].values()})) or "no target"
                                for r in runs], rest)
    return first, rest


TIER_DIFFERENCES = ("engine:", "direct (O_DIRECT):", "data path:", "storage ")


def tier_differences(found: list[str]) -> list[str]:
    """Of the differences found, those that make the runs different tiers, where their storage differs:
    its kind, file system and device, and the engine, O_DIRECT and data path that go with them. Two
    tiers compared on purpose differ so; said once, as what was compared, not as warnings."""
    if not any(d.startswith("storage ") for d in found):
        return []
    return [d for d in found if d.startswith(TIER_DIFFERENCES)]


HEADLINE_RULE = ("Headline rule: each figure sets each tier's best point against the other's best point (named), "
                 "then gives the range of the same ratio over the points both tiers measured. p99 reads one way in "
                 "both: N times lower or higher (N >= 1), the second tier's against the first's; where the best-IOPS "
                 "points differ in depth, the matched range leads.")
DEPTHS = ("qd", "threads", "procs")  # best points that differ in these are not like for like for latency


def _ratio_range(values: pd.Series) -> str:
    values = values.dropna()
    return f"{times(values.min())} to {times(values.max())}" if len(values) else "-"


def p99_words(gain: float) -> str:
    """'7.4x lower' or '2.0x higher': the second tier's p99 against the first's, from gain = first / second
    (> 1: the second is lower). N is always at least 1, and the word says which way."""
    return f"{times(gain)} lower" if gain >= 1 else f"{times(1 / gain)} higher"


def p99_range(gains: pd.Series) -> str:
    """The same words over matched points: '2.0x to 23x higher', '1.5x to 7.4x lower', or, where the
    tiers trade places, '3.0x higher to 2.0x lower' (gains as in p99_words)."""
    gains = gains.dropna()
    if not len(gains):
        return "-"
    low, high = gains.min(), gains.max()
    if low >= 1:
        return f"{times(low)} to {times(high)} lower"
    if high < 1:
        return f"{times(1 / high)} to {times(1 / low)} higher"
    return f"{p99_words(low)} to {p99_words(high)}"


def _differ_in_depth(pa, pb) -> bool:
    return any(c in pa.index and c in pb.index and pa[c] != pb[c] for c in DEPTHS)


def _p99_clause(pa, pb, gains: pd.Series, keys: list[str], left_out: str) -> tuple[str, str]:
    """p99 at the best-IOPS points and over the matched points, in one set of words (p99_words). Best
    points at different depths are not like for like (latency grows with depth): the matched range leads."""
    words = p99_words(pa["lat_p99_ns"] / pb["lat_p99_ns"])
    both = f"{format_duration(pb['lat_p99_ns'])} vs {format_duration(pa['lat_p99_ns'])}"
    if not _differ_in_depth(pa, pb):
        return (f"{words} p99", f"{words} p99 at those best-IOPS points ({both}; {p99_range(gains)} over matched "
                                f"points{left_out})")
    return (f"{p99_range(gains)} p99 over matched points", f"{p99_range(gains)} p99 over matched points{left_out} "
            f"({words} at those best-IOPS points, which differ in depth: {both})")


def _point(row, keys: list[str]) -> str:
    return analysis.describe_point(row, keys) if keys else "its only point"


def _grid(run: Run, keys: list[str]) -> set[tuple]:
    """The points a run measured, as their values of the aligned dimensions."""
    return set(run.summary[keys].itertuples(index=False, name=None))


def _unmatched(point, other: Run, keys: list[str]) -> str:
    """' (a point disk did not measure)' after a best point the other run has no match for, else ''."""
    if not keys or tuple(point[k] for k in keys) in _grid(other, keys):
        return ""
    return f" (a point {other.label} did not measure)"


def coverage(runs: list[Run], keys: list[str], merged: pd.DataFrame) -> str:
    """Where the runs' grids differ only partly, one line: how many points of each run had no match
    (left out of the table and the matched ranges), and the dimensions whose values differ; else ''."""
    common = set(merged[keys].itertuples(index=False, name=None)) if keys else set()
    left = [len(_grid(r, keys) - common) for r in runs] if keys else [0]
    if not any(left):
        return ""
    opts = {o.column: o for o in OPTIONS}
    values = {k: [", ".join(opts[k].format(v) for v in sorted(set(r.summary[k]))) for r in runs] for k in keys}
    differ = "; ".join(f"{opts[k].key} " + " vs ".join(f"{v} ({r.label})" for v, r in zip(vs, runs))
                       for k, vs in values.items() if len(set(vs)) > 1)
    return (f"compared the {len(merged)} point(s) every run measured; left out for want of a match: "
            + ", ".join(f"{n} of {r.label}'s {len(r.summary)} points" for n, r in zip(left, runs))
            + f" (the grids differ: {differ})")


def _notes(a: str, note_a: str, b: str, note_b: str) -> str:
    """The trust notes of a headline's two best points, where there are any."""
    notes = [f"{label}: {note}" for label, note in ((b, note_b), (a, note_a)) if note]
    return f" [{'; '.join(notes)}]" if notes else ""


def _trusted(merged: pd.DataFrame, a: str, b: str) -> tuple[pd.DataFrame, str]:
    """The matched points neither of whose repeats are flagged, for a ratio range; all of them
    (and a note) where none is unflagged."""
    flags = [c for c in (f"flagged {a}", f"flagged {b}") if c in merged.columns]
    if not flags:
        return merged, ""
    ok = merged[~merged[flags].astype(bool).any(axis=1)]
    if len(ok) == len(merged):
        return merged, ""
    if len(ok):
        return ok, f", {len(merged) - len(ok)} flagged left out"
    return merged, ", every one flagged"


def headline_parts(base: Run, other: Run, merged: pd.DataFrame, keys: list[str]) -> list[tuple[str, str]]:
    """Each figure of the headline as (its short form, its whole clause), such as ('3.4x bandwidth at
    1 MiB', '3.4x bandwidth at 1 MiB, best to best (4.85 GiB/s at qd=1 vs 1.42 GiB/s at qd=32; 2.4x to
    6.4x over matched points)'): bandwidth at the largest block size, IOPS and p99 at the smallest.
    Each best point is one whose repeats agree where there is one, and a point that is flagged, or
    was measured once, is said to be (analysis.best_point)."""
    a, b = base.label, other.label
    parts = []
    largest = merged["bs_bytes"].max()
    sa = base.summary[base.summary["bs_bytes"] == largest]
    sb = other.summary[other.summary["bs_bytes"] == largest]
    if len(sa) and len(sb):
        (pa, note_a), (pb, note_b) = (analysis.best_point(s, "bandwidth_bytes_per_s") for s in (sa, sb))
        matched, left_out = _trusted(merged[merged["bs_bytes"] == largest], a, b)
        short = f"{times(pb['bandwidth_bytes_per_s'] / pa['bandwidth_bytes_per_s'])} bandwidth at {format_size(largest)}"
        parts.append((short, f"{short}, best to best ({format_rate(pb['bandwidth_bytes_per_s'])} at "
                     f"{_point(pb, keys)}{_unmatched(pb, base, keys)} vs {format_rate(pa['bandwidth_bytes_per_s'])} "
                     f"at {_point(pa, keys)}{_unmatched(pa, other, keys)}; "
                     f"{_ratio_range(matched[f'bandwidth_bytes_per_s ratio {b}'])} over matched points{left_out})"
                     + _notes(a, note_a, b, note_b)))
    smallest = merged["bs_bytes"].min()
    sa = base.summary[base.summary["bs_bytes"] == smallest]
    sb = other.summary[other.summary["bs_bytes"] == smallest]
    if len(sa) and len(sb):
        (pa, note_a), (pb, note_b) = (analysis.best_point(s, "iops") for s in (sa, sb))
        small, left_out = _trusted(merged[merged["bs_bytes"] == smallest], a, b)
        short = f"{times(pb['iops'] / pa['iops'])} IOPS at {format_size(smallest)}"
        parts.append((short, f"{short}, best to best "
                     f"({pb['iops']:,.0f} at {_point(pb, keys)}{_unmatched(pb, base, keys)} vs {pa['iops']:,.0f} at "
                     f"{_point(pa, keys)}{_unmatched(pa, other, keys)}; "
                     f"{_ratio_range(small[f'iops ratio {b}'])} over matched points{left_out})"
                     + _notes(a, note_a, b, note_b)))
        parts.append(_p99_clause(pa, pb, 1 / small[f"lat_p99_ns ratio {b}"], keys, left_out))
    return parts


def headline(base: Run, other: Run, merged: pd.DataFrame, keys: list[str], parts=None) -> str:
    """The whole account in one line: 'shm/disk: ' and every clause of headline_parts (parts: those
    already computed)."""
    parts = headline_parts(base, other, merged, keys) if parts is None else parts
    return f"{other.label}/{base.label}: " + "; ".join(clause for _, clause in parts)


def short_headline(base: Run, other: Run, merged: pd.DataFrame, keys: list[str], parts=None) -> str:
    """'shm/disk: 3.4x bandwidth at 1 MiB, 6.0x IOPS at 4 KiB, 12x lower p99': what a person quotes, on
    one short line; the clauses behind each figure follow it (headline_parts; parts: those already computed)."""
    parts = headline_parts(base, other, merged, keys) if parts is None else parts
    once = [r.label for r in (other, base) if "repeats" in r.summary and len(r.summary) and (r.summary["repeats"] <= 1).all()]
    return (f"{other.label}/{base.label}: " + ", ".join(short for short, _ in parts)
            + (f" ({' and '.join(once)}: one sample a point, spread not measured)" if once else ""))


def compare(run_dirs: list[str]) -> Comparison:
    if len(run_dirs) < 2:
        raise UsageError("compare needs at least two runs: gdsbench compare RUN_A RUN_B")
    dfs = [load(d) for d in run_dirs]
    for d, df in zip(run_dirs, dfs):
        require_kind(df.attrs["run"], d, "sweep", "compare")
        if df.empty:
            raise UsageError(f"run {d}: no completed points to compare")
    runs = [Run(label, df, analysis.summarize(df)) for label, df in zip(_labels(dfs), dfs)]
    keys = align_keys(runs)
    figures = list(RATIOS)
    # block size and queue depth name the headline's points even when not swept
    carried = [c for c in ("bs_bytes", "qd") if c not in keys]
    merged = None
    for run in runs:
        part = run.summary[keys + figures + ["flagged"] + carried].rename(
            columns={f: f"{f} {run.label}" for f in figures + ["flagged"]}
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
    parts = {run.label: headline_parts(base, run, merged, keys) for run in runs[1:]}  # each figure found once
    first, rest = differences(runs, keys)
    tiers = tier_differences(first + rest)
    return Comparison(runs, keys, merged, [headline(base, run, merged, keys, parts[run.label]) for run in runs[1:]],
                      [d for d in first + rest if d not in tiers], notices=[n for n in first if n not in tiers],
                      coverage=coverage(runs, keys, merged),
                      summaries=[short_headline(base, run, merged, keys, parts[run.label]) for run in runs[1:]],
                      details=[[clause for _, clause in p] for p in parts.values()], tiers=tiers)


def text_table(c: Comparison) -> tuple[list[str], list[list[str]]]:
    """Header and rows: each point, each run's bandwidth, IOPS, p50 and p99,
    then each other run's gains over the first, all "higher is better" as the
    headline says them: throughput other/first, latency and CPU first/other."""
    base = c.runs[0].label
    header = ["point"]
    for label in ("bandwidth", "IOPS", "p50", "p99"):
        header += [f"{label} {r.label}" for r in c.runs]
    for r in c.runs[1:]:
        header += [f"throughput {r.label}/{base}", f"p50 {base}/{r.label}", f"p99 {base}/{r.label}",
                   f"CPU-s/GB {base}/{r.label}"]
    rows = []
    for _, row in c.table.iterrows():
        out = [analysis.describe_point(row, c.keys)]
        out += [format_rate(row[f"bandwidth_bytes_per_s {r.label}"]) for r in c.runs]
        out += [f"{row[f'iops {r.label}']:,.0f}" for r in c.runs]
        out += [format_duration(row[f"lat_p50_ns {r.label}"]) for r in c.runs]
        out += [format_duration(row[f"lat_p99_ns {r.label}"]) for r in c.runs]
        for r in c.runs[1:]:
            gains = [row[f"bandwidth_bytes_per_s ratio {r.label}"]] + [
                1 / row[f"{f} ratio {r.label}"] if row[f"{f} ratio {r.label}"] else float("nan")
                for f in ("lat_p50_ns", "lat_p99_ns", "cpu_s_per_gb")]
            out += [f"{g:.2f}x" if pd.notna(g) else "-" for g in gains]
        rows.append(out)
    return header, rows


def write(c: Comparison, out_dir: str, chosen: bool = False) -> str:
    """Overlaid charts and one HTML page; returns the page's path. chosen: the user named out_dir (--out),
    which is then refused if it holds files gdsbench did not write (html.writing_pages)."""
    with html.writing_pages(out_dir, chosen=chosen) as out:
        return _write(c, out)


def _write(c: Comparison, out_dir: str) -> str:
    # a tier is a line style, a series (queue depth, or block size) a colour: the legend reads as a grid; where
    # every tier has one series along an axis, each tier is a colour too (5 tiers, 4 line styles)
    bs_curves, qd_curves, styles = [], [], {}
    line_styles = ("-", "--", ":", "-.")
    colours: dict[tuple[str, str], str] = {}
    for kind, along in ((bs_curves, "bs_bytes"), (qd_curves, "qd")):
        per_run = [analysis.series(run.summary, along) for run in c.runs]
        one_each = all(len(series) <= 1 for series in per_run)
        for t, (run, series) in enumerate(zip(c.runs, per_run)):
            for label, df in series:
                name = f"{run.label} {label}".strip()
                colours.setdefault((along, label), f"C{len(colours) % 10}")
                styles[name] = {"color": f"C{t % 10}" if one_each else colours[(along, label)],
                                "linestyle": line_styles[t % len(line_styles)]}
                kind.append((name, df))
    title = " vs ".join(r.label for r in c.runs)
    sub = charts.wrapped("; ".join(measured.subtitle(r.df, r.label) for r in c.runs))
    column = charts.throughput_column(qd_curves)[0]
    knees = {label: analysis.knee(df, column) for label, df in qd_curves}
    base_curves = {name for name, _ in qd_curves if name.startswith(f"{c.runs[0].label} ") or name == c.runs[0].label}
    png = {
        "bandwidth": charts.bandwidth_vs_block_size(bs_curves, os.path.join(out_dir, "compare_bandwidth.png"),
                                                    f"{title}: bandwidth by block size", sub, styles),
        "latency": charts.throughput_latency(qd_curves, os.path.join(out_dir, "compare_throughput_latency.png"),
                                             f"{title}: throughput against latency", knees, sub, styles,
                                             label_depths=base_curves),
    }
    header, rows = text_table(c)
    top = "".join(f'<p class="headline">{html.esc(h)}</p>'
                  + "<ul>" + "".join(f"<li>{html.esc(d)}</li>" for d in details) + "</ul>"
                  for h, details in zip(c.summaries, c.details))
    if c.tiers:
        top += f'<p class="rule">Compared tiers differ in: {html.esc("; ".join(c.tiers))}.</p>'
    top += "".join(f'<p class="notice">{html.esc(n)}</p>' for n in c.notices + [c.coverage] if n)
    top += f'<p class="rule">{html.esc(HEADLINE_RULE)} Knees: {html.esc(analysis.KNEE_RULE)}.</p>'
    sections = [("", top)]
    sections += [(f"What was measured: {r.label}", html.table(["", ""], measured.what_was_measured(r.df, r.info)))
                 for r in c.runs]
    if c.differences:
        sections.append(("These runs differ beyond the compared points (most telling first)",
                         "<ul>" + "".join(f'<li class="warn">{html.esc(d)}</li>' for d in c.differences) + "</ul>"))
    sections += [
        ("Bandwidth by block size", html.image(png["bandwidth"], "bandwidth by block size")),
        ("Throughput against latency", html.image(png["latency"], "throughput against latency")),
        ("Points", html.table(header, rows)),
        ("Runs", html.table(["label", "run", "host", "created"], [
            [r.label, r.info["run_id"], r.info["host"], r.info["created"]] for r in c.runs])),
    ] + html.left_out([p for r in c.runs for p in r.df.attrs["problems"]])
    path = os.path.join(out_dir, "compare.html")
    html.write_page(path, f"gdsbench compare: {title}", sections)
    c.html_path = path
    return path
