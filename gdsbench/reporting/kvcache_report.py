"""`gdsbench kvcache`: on a terminal, what is run, then a row per tier and
operation, the requests' figures and the reference's pass criteria; and the
run's page (build), from its saved rows and run.json's figures."""

from __future__ import annotations

import os

from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_rate, format_size
from gdsbench.reporting import html
from gdsbench.results.kinds import require_kind
from gdsbench.results.store import load


def header(run, data_path: str) -> str:
    m = run.model
    storage = "no limit" if run.storage_budget == float("inf") else format_size(run.storage_budget)
    return (f"kvcache: {m.name} ({format_size(m.bytes_per_token)} of KV a token: {m.layers} layers x {m.kv_heads} KV "
            f"heads x {m.head_dim} x 2 x {m.dtype}), {run.users} users for {run.duration_s:g} s, generation "
            f"{run.generation}, seed {run.seed}\n"
            f"tiers: host memory {format_size(run.host_budget)}, storage {storage} ({run.directory})\n"
            f"{data_path}")


def _ms(value) -> str:
    return "-" if value is None else f"{value:,.1f}"


def table(f: dict) -> str:
    lines = [f"{'tier':8} {'op':6} {'count':>7} {'bytes':>9} {'rate':>11} {'p50 ms':>9} {'p95 ms':>9} {'p99 ms':>9} "
             f"{'device p95':>10}"]
    for tier, ops in f["tiers"].items():
        for op, row in ops.items():
            device = row.get("device", {}).get("p95_ms")
            lines.append(f"{tier:8} {op:6} {row['ops']:7d} {format_size(row['bytes']):>9} "
                         f"{format_rate(row['bytes_per_s']):>11} {_ms(row['total']['p50_ms']):>9} "
                         f"{_ms(row['total']['p95_ms']):>9} {_ms(row['total']['p99_ms']):>9} {_ms(device):>10}")
    hit = "-" if f["cache_hit_rate"] is None else f"{f['cache_hit_rate']:.1%}"
    lines.append(f"requests {f['requests_completed']} ({f['requests_per_s']:.2f}/s), {f['tokens_per_s']:,.1f} "
                 f"tokens/s, end to end p95 {_ms(f['end_to_end']['p95_ms'])} ms, I/O a request p95 "
                 f"{_ms(f['io_per_request']['p95_ms'])} ms, cache hit rate {hit} (multi-turn "
                 f"{f['multi_turn_hits']} hits, {f['multi_turn_misses']} misses)")
    if f["moves"]:
        lines.append("moved: " + ", ".join(f"{m['entries']} {m['from']} -> {m['to']}" for m in f["moves"]))
    verdicts = [f"{c['what']} {'PASS' if c['pass'] else 'FAIL'}" for c in f["criteria"]]
    if f["passed"] is None:
        lines.append("the reference's criteria: not judged (no request ended within the duration: lengthen --duration)")
    else:
        lines.append(f"the reference's criteria: {'PASS' if f['passed'] else 'FAIL'} ({', '.join(verdicts)})")
    if f["interrupted"]:
        lines.append("interrupted: the figures are of the time before Ctrl-C")
    return "\n".join(lines)


def verdict(figures: dict) -> str:
    """The run's answer in a line: the reference's criteria, then its headline figures."""
    passed = figures.get("passed")
    judged = ("not judged (no request ended within the duration)" if passed is None else
              f"{'PASS' if passed else 'FAIL'} on the reference's criteria (" +
              ", ".join(f"{c['what']} {'PASS' if c['pass'] else 'FAIL'}" for c in figures["criteria"]) + ")")
    return (f"{judged}; {figures.get('tokens_per_s', 0):,.1f} tokens/s, storage reads "
            f"{format_rate(figures.get('storage_read_bytes_per_s', 0))}")


def build(run_dir: str, out_dir: str | None = None) -> html.Report:
    """The run's page (default: RUN/report/), and its answer."""
    df = load(run_dir)
    info = df.attrs["run"]
    require_kind(info, run_dir, "kvcache", "the KV-cache page")
    figures = info.get("figures") or {}
    rows = df.to_dict("records")
    if not rows and not figures:
        raise UsageError(f"run {run_dir}: nothing was measured")
    answer = verdict(figures) if figures else "no figures saved (the run ended before its summary)"
    with html.run_pages(run_dir, out_dir) as out:
        tiers = [[r["tier"], r["op"], f"{int(r['ops']):,}", format_size(r["bytes"]), format_rate(r["bytes_per_s"]),
                  _ms(r["total_p50_ms"]), _ms(r["total_p95_ms"]), _ms(r["total_p99_ms"]),
                  _ms(_number(r.get("device_p95_ms")))] for r in rows]
        requests = [[k, _shown(k, figures[k])] for k in ("requests_completed", "requests_per_s", "tokens_generated",
                                                         "tokens_per_s", "cache_hit_rate", "multi_turn_hits",
                                                         "multi_turn_misses", "duration_s", "interrupted")
                    if k in figures]
        requests += [[f"end to end {p}", _ms(figures.get("end_to_end", {}).get(f"{p}_ms"))] for p in ("p50", "p95")]
        model = info.get("model", {})
        sections = [
            ("Answer", f"<p class='headline'>{html.esc(answer)}</p><p class='rule'>As the reference (MLPerf Storage "
                       "v3.0's kv-cache.py) judges a run: storage write and read p95 (the engine's time) under 500 "
                       "and 200 ms, host reads and writes together under 150 ms, cache hit rate over 30%.</p>"),
            ("Every tier", html.table(["tier", "op", "count", "bytes", "rate", "p50 ms", "p95 ms", "p99 ms",
                                       "device p95 ms"], tiers)),
            ("Requests", html.table(["", ""], requests)),
            ("Workload", html.table(["", ""], [[k, v] for k, v in model.items()] + [
                [k if k != "duration_s" else "duration asked (s)", info.get(k)]
                for k in ("users", "duration_s", "requests_per_user", "seed", "generation_mode",
                                           "budgets_bytes", "directory", "data_path")])),
        ] + html.left_out(df.attrs["problems"])
        path = os.path.join(out, "report.html")
        html.write_page(path, f"gdsbench kvcache: {info['run_id']}", sections)
    return html.Report(path, {}, {"answer": answer})


def _shown(key: str, value) -> str:
    if key == "cache_hit_rate":
        return "-" if value is None else f"{value:.1%}"
    return f"{value:,.2f}" if isinstance(value, float) else str(value)


def _number(value):
    """A saved optional figure: None where it was null (pandas reads it back as NaN)."""
    return None if value is None or value != value else value
