"""An objects run in words and on a page: each operation's rate and latency percentiles, as warp
reports them (ops/s, MiB/s where bytes move, p50/p90/p99, the longest)."""

from __future__ import annotations

import os

from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_rate, format_size
from gdsbench.reporting import html
from gdsbench.results.kinds import require_kind
from gdsbench.results.store import load

COLUMNS = ["op", "requests", "ops/s", "rate", "p50", "p90", "p99", "max", "first byte p50", "connections"]


def _us(value: float) -> str:
    return f"{value / 1e3:.2f} ms" if value >= 1000 else f"{value:.0f} us"


def _batched(row: dict) -> str:
    """A batched DELETE's objects, in words ("": one request an object)."""
    batch = row.get("batch") or 1
    return f"{row['objects_per_s']:,.0f} objects/s, {batch:.0f} a request" if batch > 1 else ""


def cells(row: dict) -> list[str]:
    moved = format_rate(row["bytes_per_s"]) if row["bytes"] else (f"{row['listed']:,} names" if row["listed"] else
                                                                  _batched(row))
    return [row["op"].upper(), f"{int(row['ops']):,}", f"{row['ops_per_s']:,.0f}", moved,
            *(_us(row[f"lat_p{p}_us"]) for p in (50, 90, 99)), _us(row["lat_max_us"]), _us(row["first_byte_p50_us"]),
            f"{int(row['connections']):,}"]


def row_line(row: dict) -> str:
    c = cells(row)
    rate = f", {c[3]}" if c[3] else ""
    return (f"  {c[0]:<6} {c[2]:>8} ops/s{rate} | latency p50 {c[4]}, p90 {c[5]}, p99 {c[6]}, max {c[7]} | "
            f"{c[1]} requests on {c[9]} connections")


def verdict(rows: list[dict]) -> str:
    return "; ".join(f"{r['op'].upper()} {r['ops_per_s']:,.0f} ops/s{f' ({_batched(r)})' if _batched(r) else ''} "
                     f"(p99 {_us(r['lat_p99_us'])})" for r in rows)


def build(run_dir: str, out_dir: str | None = None) -> html.Report:
    """The run's page (default: RUN/report/), and its answer."""
    df = load(run_dir)
    info = df.attrs["run"]
    require_kind(info, run_dir, "objects", "the objects page")
    rows = df.to_dict("records")
    if not rows:
        raise UsageError(f"run {run_dir}: nothing was measured")
    answer = verdict(rows)
    with html.run_pages(run_dir, out_dir) as out:
        setup = [[k, info.get(k)] for k in ("prefix", "objects", "qd", "threads", "ranks", "lists", "duration_s",
                                            "delete_batch", "data_path")]
        setup.insert(2, ["object size", format_size(info.get("object_bytes", 0))])
        rule = ("Each operation one request an object (a LIST one a page, a batched DELETE its batch), timed natively "
                "from its issue to its answer's end; ops/s over the slowest thread's time.")
        sections = [("Answer", f"<p class='headline'>{html.esc(answer)}</p><p class='rule'>{rule}</p>"),
                    ("Every operation", html.table(COLUMNS, [cells(r) for r in rows])),
                    ("Set-up", html.table(["", ""], setup))] + html.left_out(df.attrs["problems"])
        path = os.path.join(out, "report.html")
        html.write_page(path, f"gdsbench objects: {info['run_id']}", sections)
    return html.Report(path, {}, {"answer": answer})
