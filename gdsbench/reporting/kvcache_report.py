"""`gdsbench kvcache` on a terminal: what is run, then a row per tier and
operation, the requests' figures and the reference's pass criteria."""

from __future__ import annotations

from gdsbench.job.units import format_rate, format_size


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
