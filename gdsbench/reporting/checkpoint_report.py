"""A checkpoint run in words and on a page: each checkpoint's write and read
as MLPerf Storage reports them (duration: the longest rank's; throughput: the
minimum over ranks), their means, and what MLPerf leaves out: how the ranks'
times spread, and which rank was slowest."""

from __future__ import annotations

import os

import numpy as np

from gdsbench.job.errors import UsageError
from gdsbench.job.spec import caching
from gdsbench.job.units import format_size
from gdsbench.reporting import charts, html
from gdsbench.results.kinds import require_kind
from gdsbench.results.store import load

GIB = 1 << 30


def _gib_s(row: dict) -> str:
    return f"{row['throughput_bytes_per_s'] / GIB:.2f} GiB/s"


def _how(info: dict) -> str:
    """How each file is moved, in words: an object's parts, or a file's cache and fsync; the reads'
    transfers where they differ from the writes' (--read-bs, --read-qd)."""
    job = info["job"]
    read = job.get("read_bs", job["bs"]), job.get("read_qd", job["qd"])
    reads = "" if read == (job["bs"], job["qd"]) else f", read back in {format_size(read[0])} transfers, {read[1]} in flight"
    if info["directory"].startswith("s3://"):
        return f"{format_size(job['bs'])} parts, each object written whole (its upload completed){reads}"
    fsync = ", each file fsync'd" if info["fsync"] else ", no fsync"
    return f"{caching(job['direct'], job.get('uncached', False))}, {format_size(job['bs'])} transfers{fsync}{reads}"


def header(info: dict) -> str:
    m, job = info["model"], info["job"]
    scale = f", every tensor x {info['scale']:g} (--scale)" if info["scale"] != 1 else ""
    return (f"{m['name']}: TP {m['tp']} x PP {m['pp']} x DP {m['dp']} = {info['ranks']} ranks, ZeRO-{m['zero_stage']}, "
            f"{m['layers']} layers{scale}: {format_size(info['checkpoint_bytes'])} per checkpoint, "
            f"{info['checkpoints']} written then read; {job['mode']} {job['engine']} {_how(info)}\n"
            f"  writes: {info['data_path']['write']}\n  reads: {info['data_path']['read']}")


def row_line(row: dict) -> str:
    checked = f" | {row['verified_blocks']:,} blocks checked" if row["phase"] == "read" else ""
    return (f"  {row['phase']:5} checkpoint {row['checkpoint']}: {row['duration_s']:.3f} s (longest rank), "
            f"{_gib_s(row)} (its bytes / the longest rank's time) | ranks: median {row['rank_median_s']:.3f} s, fastest "
            f"{row['rank_min_s']:.3f} s, slowest rank {row['slowest_rank']} on {row['slowest_host']}{checked}")


def means(rows: list[dict]) -> dict[str, dict]:
    """Per phase: the mean duration and throughput over its checkpoints (MLPerf's figures)."""
    out = {}
    for phase in ("write", "read"):
        mine = [r for r in rows if r["phase"] == phase]
        if mine:
            out[phase] = {"checkpoints": len(mine), "duration_s": float(np.mean([r["duration_s"] for r in mine])),
                          "throughput_bytes_per_s": float(np.mean([r["throughput_bytes_per_s"] for r in mine]))}
    return out


def verdict(rows: list[dict]) -> str:
    return "; ".join(f"{phase}: {m['duration_s']:.3f} s and {m['throughput_bytes_per_s'] / GIB:.2f} GiB/s on average "
                     f"over {m['checkpoints']} checkpoints" for phase, m in means(rows).items())


def chart_subtitle(info: dict) -> str:
    """The header's first line, wrapped to the chart's width (its data paths are in the page's table)."""
    return charts.wrapped(header(info).splitlines()[0])


def _ranks_chart(rows: list[dict], path: str, title: str, sub: str) -> str:
    """Every rank's time in every checkpoint, by phase: the spread MLPerf's figures hide."""
    fig, ax = charts._figure()
    for i, phase in enumerate(("write", "read")):
        for row in (r for r in rows if r["phase"] == phase):
            seconds = row["rank_seconds"]
            ax.scatter(np.arange(len(seconds)), seconds, s=12, color=f"C{i}",
                       label=phase if row["checkpoint"] == 1 else None)
    ax.set_xlabel("rank")
    ax.set_ylabel("seconds, barrier to its last file")
    ax.set_ylim(bottom=0)
    return charts._save(fig, ax, path, title, sub)


def build(run_dir: str, out_dir: str | None = None) -> html.Report:
    """The run's page and chart (default: RUN/report/), and its answer."""
    df = load(run_dir)
    info = df.attrs["run"]
    require_kind(info, run_dir, "checkpoint", "the checkpoint page")
    rows = df.to_dict("records")
    if not rows:
        raise UsageError(f"run {run_dir}: no checkpoint was written")
    with html.run_pages(run_dir, out_dir) as out:
        png = _ranks_chart(rows, os.path.join(out, "rank_times.png"), f"{info['name']}: every rank's time",
                           chart_subtitle(info))
        table = [[r["phase"], r["checkpoint"], f"{r['duration_s']:.3f} s", _gib_s(r), f"{r['rank_median_s']:.3f} s",
                  f"{r['rank_min_s']:.3f} s", f"rank {r['slowest_rank']} ({r['slowest_host']})", format_size(r["bytes"]),
                  f"{r['verified_blocks']:,}" if r["phase"] == "read" else "-"]
                 for r in rows]
        m, answer = info["model"], verdict(rows)
        sections = [
            ("Answer", f"<p class='headline'>{html.esc(answer)}</p><p class='rule'>As MLPerf Storage v2.0 reports "
                       "a checkpoint: its duration is the longest rank's (from the start all ranks share to its last "
                       "file closed, fsync'd when written), its throughput its bytes over that duration, the minimum "
                       "over ranks; figures are means over checkpoints.</p>"),
            ("Every rank", html.image(png, "every rank's time")),
            ("Every checkpoint", html.table(["phase", "checkpoint", "duration", "throughput", "rank median",
                                             "fastest rank", "slowest rank", "bytes", "blocks checked"], table)),
            ("Model", html.table(["", ""], [[k, v] for k, v in m.items()] + [
                ["scale", info["scale"]], ["ranks", info["ranks"]], ["read shift", info["read_shift"]],
                ["per checkpoint", format_size(info["checkpoint_bytes"])], ["directory", info["directory"]],
                ["writes", info["data_path"]["write"]], ["reads", info["data_path"]["read"]]])),
        ] + html.left_out(df.attrs["problems"])
        if info.get("notes"):
            sections.append(("Notes", "".join(f"<p class='notice'>{html.esc(n)}</p>" for n in info["notes"])))
        path = os.path.join(out, "report.html")
        html.write_page(path, f"gdsbench checkpoint: {info['run_id']}", sections)
    return html.Report(path, {"rank_times": png}, {"answer": answer})
