"""The charts of `gdsbench report` and `gdsbench compare` (matplotlib, PNG).

Every chart takes curves: a list of (label, DataFrame of summary rows, see
analysis.summarize), so a report draws one run's series and a comparison
overlays several runs' with the same code; a comparison also passes styles,
so a tier is a line style and a series a colour. Axes carry units; sizes are
binary (KiB, MiB); legends sit under the plot, so they never cover data and
a narrow screen keeps the plot wide. Every chart has a subtitle saying what
was measured, and is drawn at twice its display resolution for sharp screens.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator  # noqa: E402

from gdsbench.job.units import format_duration, format_size  # noqa: E402

FIGSIZE = (9.0, 5.5)  # inches
DPI = 110  # the display resolution: 990 x 605 CSS pixels
SCALE = 2  # drawn at twice that, for high-DPI screens
PIXELS = (int(FIGSIZE[0] * DPI * SCALE), int(FIGSIZE[1] * DPI * SCALE))
Curves = Sequence[tuple[str, pd.DataFrame]]
Styles = dict  # curve label -> {"color": ..., "linestyle": ...}


def rate_unit(max_bytes_per_s: float) -> tuple[float, str]:
    for factor, unit in ((1024**3, "GiB/s"), (1024**2, "MiB/s"), (1024, "KiB/s")):
        if max_bytes_per_s >= factor:
            return factor, unit
    return 1.0, "B/s"


def count_unit(max_count: float) -> tuple[float, str]:
    for factor, unit in ((1e6, "millions"), (1e3, "thousands")):
        if max_count >= factor:
            return factor, f" ({unit})"
    return 1.0, ""


CHART_LINE = 90  # characters of a chart's 11 pt subtitle that fit across it


def wrapped(subtitle: str) -> str:
    """A subtitle in lines that fit across a chart (a comparison of many tiers names each)."""
    return "\n".join(textwrap.wrap(subtitle, CHART_LINE))


def _figure():
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    ax.grid(True, which="major", alpha=0.3)
    return fig, ax


def _save(fig, ax, path: str, title: str, subtitle: str = "") -> str:
    ax.set_title(title + (f"\n{subtitle}" if subtitle else ""), fontsize=11)
    handles, labels = ax.get_legend_handles_labels()
    if labels:
        fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)), fontsize=8, frameon=False)
    fig.savefig(path, dpi=DPI * SCALE)
    plt.close(fig)
    return path


def _style(styles: Styles | None, label: str, i: int) -> dict:
    return (styles or {}).get(label, {"color": f"C{i % 10}", "linestyle": "-"})


def _log2_axis(axis, values, fmt) -> None:
    ticks = sorted({float(v) for v in values if v and v > 0})
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: fmt(v)))


def _latency_axis(ax) -> None:
    """Log scale in time units, ticks at 1, 2 and 5 of each decade."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_duration(v)))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel("latency per read")


def throughput_column(curves: Curves) -> tuple[str, float, str]:
    """IOPS for small blocks, bandwidth otherwise: (column, divisor, axis label)."""
    all_rows = pd.concat([df for _, df in curves])
    if all_rows["bs_bytes"].max() <= 64 * 1024:
        factor, unit = count_unit(all_rows["iops"].max())
        return "iops", factor, f"IOPS{unit}"
    factor, unit = rate_unit(all_rows["bandwidth_bytes_per_s"].max())
    return "bandwidth_bytes_per_s", factor, f"bandwidth ({unit})"


def bandwidth_vs_block_size(curves: Curves, path: str, title: str, subtitle: str = "",
                            styles: Styles | None = None) -> str:
    fig, ax = _figure()
    factor, unit = rate_unit(max(df["bandwidth_bytes_per_s"].max() for _, df in curves))
    for i, (label, df) in enumerate(curves):
        ax.plot(df["bs_bytes"], df["bandwidth_bytes_per_s"] / factor, marker="o", label=label or None,
                **_style(styles, label, i))
    ax.set_xscale("log", base=2)
    _log2_axis(ax.xaxis, pd.concat([df["bs_bytes"] for _, df in curves]), lambda v: format_size(v))
    ax.set_xlabel("block size")
    ax.set_ylabel(f"bandwidth ({unit})")
    ax.set_ylim(bottom=0)
    return _save(fig, ax, path, title, subtitle)


def throughput_latency(curves: Curves, path: str, title: str, knees: dict[str, int | None], subtitle: str = "",
                       styles: Styles | None = None, label_depths: set[str] | None = None) -> str:
    """Throughput against p50 (markers o) and p99 (markers s, thinner) as queue
    depth grows; a star on the p50 curve marks each curve's knee. Queue depths
    are written beside the p50 markers of the curves in label_depths (default:
    all), below and to the right, clear of the markers."""
    fig, ax = _figure()
    column, factor, xlabel = throughput_column(curves)
    for i, (label, df) in enumerate(curves):
        style = _style(styles, label, i)
        x = df[column] / factor
        ax.plot(x, df["lat_p50_ns"], marker="o", label=label or "p50", **style)
        ax.plot(x, df["lat_p99_ns"], marker="s", markersize=4, linewidth=0.8, alpha=0.7, label="_p99", **style)
        if label_depths is None or label in label_depths:
            for qd, xv, yv in zip(df["qd"], x, df["lat_p50_ns"]):
                ax.annotate(f"QD{qd}", (xv, yv), textcoords="offset points", xytext=(6, -11), fontsize=7,
                            color=style["color"])
        k = knees.get(label)
        if k is not None:
            ax.plot([x.iloc[k]], [df["lat_p50_ns"].iloc[k]], marker="*", markersize=16, color=style["color"],
                    linestyle="none", label="_knee")
    # one legend entry per curve, and one key for what the marks mean
    for marker, size, width, text in (("o", 6, 1.5, "p50 (each curve)"), ("s", 4, 0.8, "p99 (thin)"),
                                      ("*", 12, 0, "knee")):
        ax.plot([], [], marker=marker, markersize=size, linewidth=width, color="0.3", label=text)
    _latency_axis(ax)
    ax.set_xlabel(xlabel)
    ax.set_xlim(left=0)
    return _save(fig, ax, path, title, subtitle)


def latency_vs_queue_depth(curves: Curves, path: str, title: str, subtitle: str = "") -> str:
    fig, ax = _figure()
    styles = (("lat_p50_ns", "-", "p50"), ("lat_p99_ns", "--", "p99"), ("lat_p99.9_ns", ":", "p99.9"))
    for i, (label, df) in enumerate(curves):
        for column, style, name in styles:
            ax.plot(df["qd"], df[column], linestyle=style, marker="o", color=f"C{i % 10}", label=f"{label} {name}".strip())
    ax.set_xscale("log", base=2)
    _log2_axis(ax.xaxis, pd.concat([df["qd"] for _, df in curves]), lambda v: f"{v:g}")
    ax.set_xlabel("queue depth (reads in flight per thread)")
    _latency_axis(ax)
    return _save(fig, ax, path, title, subtitle)


def heatmap(summary: pd.DataFrame, path: str, title: str, subtitle: str = "") -> str:
    """Bandwidth over block size x queue depth: the best over other dimensions."""
    grid = summary.pivot_table(index="bs_bytes", columns="qd", values="bandwidth_bytes_per_s", aggfunc="max")
    factor, unit = rate_unit(float(np.nanmax(grid.to_numpy())))
    values = grid.to_numpy() / factor
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    image = ax.imshow(values, aspect="auto", cmap="viridis", origin="lower")
    ax.set_xticks(range(len(grid.columns)), [f"{q:g}" for q in grid.columns])
    ax.set_yticks(range(len(grid.index)), [format_size(b) for b in grid.index])
    ax.set_xlabel("queue depth")
    ax.set_ylabel("block size")
    high = np.nanmax(values)
    for (r, c), v in np.ndenumerate(values):
        if not np.isnan(v):
            ax.text(c, r, f"{v:.3g}", ha="center", va="center", fontsize=8,
                    color="black" if v > 0.6 * high else "white")
    fig.colorbar(image, ax=ax, label=f"bandwidth ({unit})")
    return _save(fig, ax, path, title, subtitle)


def timeline(rows: pd.DataFrame, path: str, title: str, subtitle: str = "") -> str:
    """Bandwidth in each timeline interval of one point, a line per repeat. The
    last interval ends with the run, usually part-way through: shorter than
    half an interval, its few bytes over a sliver of time would read as a
    spike, so it is left out; longer, it is drawn at its true width."""
    fig, ax = _figure()
    interval_s = float(rows["interval_ns"].iloc[0]) / 1e9
    peak = max(max(r, default=0) for r in rows["timeline_bytes"]) / interval_s
    factor, unit = rate_unit(peak)
    for rep, samples, elapsed in zip(rows["repeat"], rows["timeline_bytes"], rows["elapsed_ns"]):
        samples = np.asarray(samples, float)
        seconds = np.full(len(samples), interval_s)
        if len(samples):
            last = float(elapsed) / 1e9 - (len(samples) - 1) * interval_s
            if last < interval_s / 2:
                samples, seconds = samples[:-1], seconds[:-1]
            else:
                seconds[-1] = last
        t = np.arange(len(samples)) * interval_s + seconds / 2
        ax.plot(t, samples / seconds / factor, marker=".", label=f"repeat {rep + 1}")
    ax.set_xlabel(f"time since the end of the ramp (s; {interval_s * 1e3:g} ms intervals)")
    ax.set_ylabel(f"bandwidth ({unit})")
    ax.set_ylim(bottom=0)
    return _save(fig, ax, path, title, subtitle)
