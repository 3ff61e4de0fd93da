"""What `gdsbench train` and `gdsbench predict` print, and the page of a
train run: AU against accelerators (emulated, predicted, the threshold), AU
over time, and the distribution of step times."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd

from gdsbench.job.errors import UsageError
from gdsbench.job.spec import caching
from gdsbench.job.units import format_duration, format_rate, format_size
from gdsbench.reporting import charts, html
from gdsbench.results.kinds import require_kind
from gdsbench.results.store import load

MiB = 1 << 20


def _s(seconds) -> str:
    return format_duration(seconds * 1e9) if seconds is not None and not pd.isna(seconds) else "-"


def reader_rule(w) -> str:
    """How samples are read: DLIO's reader for the workload's format, as emulated (train/pipeline.py)."""
    fmt = w.file_format
    if fmt.row_groups:
        from gdsbench.train.parquet import WINDOW

        return f"{fmt.rule}'s rule: {w.read_threads} workers, each {WINDOW} row groups ahead at most"
    if fmt.streams:
        return f"{fmt.rule}'s rule: {w.read_threads} streams, {w.prefetch_batches} batches prefetched"
    return f"{fmt.rule}'s rule: {w.read_threads} read threads, {w.batches_in_flight} batches ahead"


def header(run) -> str:
    w, d, spec = run.workload, run.dataset, run.spec
    sizes = d.sample_bytes()
    units = f"{d.samples} samples in {d.units} row groups of {len(d.paths)} files" if d.rows is not None else \
        f"{d.samples} samples in {len(d.paths)} files"
    return (f"{w.name}: batch {w.batch} x {format_size(d.total_bytes / max(1, d.samples))} samples (sd "
            f"{format_size(sizes.std())}), compute {_s(w.compute_s)}/step, {reader_rule(w)}; "
            f"{units}; {spec.mode} mode, {spec.engine} "
            f"{caching(spec.direct, spec.uncached)}, {format_size(spec.bs)} chunks x {spec.qd}; "
            f"AU needed {w.au_threshold:.0%}")


def _throughput(row: dict) -> str:
    """DLIO's MB/s (samples times the workload's record size) beside what was read; where the two
    part (a dataset whose samples are not the workload's size), what was read leads and the gap is said."""
    nominal, read = row["mib_per_s"], row["read_mib_per_s"]
    if read and 0.5 <= nominal / read <= 2:
        return f"{nominal:.0f} MiB/s (read {read:.0f})"
    gap = f", {nominal / read:.3g}x what was read" if read else ""
    return f"read {read:.0f} MiB/s (DLIO's MB/s would say {nominal:.0f}: the workload's record size per sample{gap})"


def point_line(row: dict, workload) -> str:
    """One emulated count, as it completes."""
    verdict = "PASS" if row["passed"] else "FAIL"
    predicted, v3 = row.get("predicted_au_percent"), row.get("au_percent_v3")
    return (f"{row['accelerators']:>4} accelerators: AU {row['au_percent']:5.1f}% {verdict}"
            + (f" (predicted {predicted:.1f}%)" if predicted is not None else "")
            # where oversleeping short steps parts the two rules (metrics.py)
            + (f" (v3.0's rule, compute as measured: {v3:.1f}%)"
               if v3 is not None and f"{v3:.1f}" != f"{row['au_percent']:.1f}" else "")
            + f" | {row['samples_per_s']:.1f} samples/s, {_throughput(row)}"
            f" | step p50 {_s(row['step_time_p50_s'])} p99 {_s(row['step_time_p99_s'])}"
            f" | wait for data p50 {_s(row['wait_p50_s'])} p99 {_s(row['wait_p99_s'])}"
            + (f", step 1 {_s(row['first_wait_s'])} (outside AU)" if row.get("first_wait_s") is not None else "")
            + (f" | stragglers: mean {_s(row['straggler_mean_s'])}, p99 {_s(row['straggler_p99_s'])}"
               f" ({row['straggler_share']:.1%} of the time)" if row.get("straggler_share") is not None
               else " | stragglers: - (one accelerator: no barrier)")
            + (" | hosts: " + ", ".join(f"{h['host']} AU {h['au_percent']:.1f}%" for h in json.loads(row["per_host"]))
               + f"; across hosts {_s(row['straggler_across_hosts_mean_s'])} a step, most often held up by "
               f"{row['slowest_host']}" if row.get("per_host") else "")
            + f" | {row['steps_per_epoch']} steps")


def verdict(rows: list[dict], name: str, threshold: float) -> str:
    """The answer: the most accelerators that kept AU at or above the threshold (medians over repeats)."""
    if not rows:
        return f"{name}: nothing emulated"
    by_count = pd.DataFrame(rows).groupby("accelerators")["au_percent"].median()
    passing = [int(n) for n, au in by_count.items() if au >= 100 * threshold]
    need = f"AU >= {threshold:.0%}"
    if len(by_count) == 1:
        n, au = int(by_count.index[0]), float(by_count.iloc[0])
        return f"{name}: {n} accelerator(s): AU {au:.1f}%, {need}: {'PASS' if passing else 'FAIL'}"
    if not passing:
        return f"{name}: no count kept {need} (best AU {by_count.max():.1f}%): FAIL"
    best = max(passing)
    above = [int(n) for n in by_count.index if n > best]
    tail = f"; at {above[0]}: {by_count[above[0]]:.1f}%" if above else " (the largest count tried)"
    return f"{name}: the most accelerators with {need}: {best} (AU {by_count[best]:.1f}%){tail}"


def prediction_text(p) -> str:
    """The prediction, and every figure it used, to check by hand."""
    w = p.workload
    caveats = f"; uncertain: {len(p.warnings)} reason(s) below" if p.warnings else ""
    lines = [f"prediction for {w.name}: at most {p.max_accelerators} accelerator(s) keep AU >= {w.au_threshold:.0%} "
             f"({p.seconds:.0f} s: probe and model{caveats})",
             f"  demand per accelerator at 100% AU: {format_rate(p.demand_bytes_per_s)} "
             f"(batch {w.batch} x mean sample / compute {_s(w.compute_s)}); {p.steps} steps simulated",
             "  probe (readers reading as train reads, as fast as they can; spread: between repeats"
             + (f"; {p.hosts} hosts at once, readers counted over all" if p.hosts > 1 else "") + "): "
             + "; ".join(f"{q.readers} readers {format_rate(q.rate)} (feeds {q.rate / p.demand_bytes_per_s:.1f} "
                         f"accelerators, spread {q.spread:.0%})" for q in p.curve.points),
             "  predicted AU: " + ", ".join(f"{a['accelerators']}: {a['au_percent']:.1f}%"
                                            + (f" ({', '.join(a['flags'])})" if a.get("flags") else "") for a in p.au)]
    if p.warnings:  # the answer first, on one line; why it may be off, one reason a line, under it
        lines += ["  out of its depth:", *(f"    - {x}" for x in p.warnings)]
    return "\n".join(lines)


# ---- the page of a train run ----


def _au_chart(summary: pd.DataFrame, threshold: float, predicted: list[dict], path: str, title: str, sub: str) -> str:
    fig, ax = charts._figure()
    ax.plot(summary["accelerators"], summary["au_percent"], marker="o", color="C0", label="emulated (median)")
    if predicted:
        xs = [a["accelerators"] for a in predicted]
        ax.plot(xs, [a["au_percent"] for a in predicted], marker="x", linestyle="--", color="C1", label="predicted")
    ax.axhline(100 * threshold, color="C3", linestyle=":", label=f"threshold {threshold:.0%}")
    ax.set_xlabel("accelerators")
    ax.set_ylabel("accelerator utilisation (%)")
    ax.set_ylim(0, 105)
    ax.xaxis.get_major_locator().set_params(integer=True)
    return charts._save(fig, ax, path, title, sub)


def _au_time_chart(df: pd.DataFrame, threshold: float, path: str, title: str, sub: str) -> str:
    fig, ax = charts._figure()
    for i, (_, row) in enumerate(df.sort_values("accelerators").drop_duplicates("accelerators").iterrows()):
        ax.plot(row["au_time_s"], 100 * np.asarray(row["au_time"]), color=f"C{i % 10}",
                label=f"{row['accelerators']} accelerators")
    ax.axhline(100 * threshold, color="C3", linestyle=":", label=f"threshold {threshold:.0%}")
    ax.set_xlabel("time since the start (s), first epoch")
    ax.set_ylabel("utilisation of each step (%, mean over accelerators)")
    ax.set_ylim(0, 105)
    return charts._save(fig, ax, path, title, sub)


def _step_chart(df: pd.DataFrame, compute_s: float, path: str, title: str, sub: str) -> str:
    fig, ax = charts._figure()
    for i, (_, row) in enumerate(df.sort_values("accelerators").drop_duplicates("accelerators").iterrows()):
        values = np.sort(np.asarray(row["step_time_s_all"]))
        if values.size:
            ax.plot(values, np.arange(1, values.size + 1) / values.size, color=f"C{i % 10}",
                    label=f"{row['accelerators']} accelerators")
    ax.axvline(compute_s, color="grey", linestyle=":", label="compute time")
    ax.set_xscale("log")
    ax.set_xlabel("step time (s): wait for data + compute + barrier")
    ax.set_ylabel("share of steps at or under")
    return charts._save(fig, ax, path, title, sub)


def build(run_dir: str, out_dir: str | None = None) -> html.Report:
    """The run's page and charts (default: RUN/report/), and its answer."""
    df = load(run_dir)
    info = df.attrs["run"]
    require_kind(info, run_dir, "train", "the train page")
    if df.empty:
        raise UsageError(f"run {run_dir}: no accelerator count finished")
    w = info["workload"]
    summary = df.groupby("accelerators", as_index=False)[["au_percent", "samples_per_s", "mib_per_s",
                                                          "read_mib_per_s", "straggler_mean_s"]].median()
    predicted = (info.get("prediction") or {}).get("au", [])
    reader = info["reader"]
    sub = (f"{w['name']}: {info['dataset']['samples']} samples of {format_size(info['dataset']['mean_sample_bytes'])}, "
           f"batch {w['batch']}, compute {_s(w['compute_s'])}; {reader['mode']} {reader['engine']} "
           f"{caching(reader['direct'], reader.get('uncached', False))}")  # (runs from before --uncached: none)
    with html.run_pages(run_dir, out_dir) as out:
        au_png = _au_chart(summary, w["au_threshold"], predicted, os.path.join(out, "au_vs_accelerators.png"),
                           f"{info['name']}: accelerator utilisation by accelerators", sub)
        time_png = _au_time_chart(df, w["au_threshold"], os.path.join(out, "au_over_time.png"),
                                  f"{info['name']}: utilisation over time", sub)
        step_png = _step_chart(df, w["compute_s"], os.path.join(out, "step_times.png"),
                               f"{info['name']}: distribution of step times", sub)
        rows = [[int(r["accelerators"]), r["repeat"], f"{r['au_percent']:.1f} %", "PASS" if r["passed"] else "FAIL",
                 f"{r['predicted_au_percent']:.1f} %" if pd.notna(r.get("predicted_au_percent", None)) else "-",
                 f"{r['samples_per_s']:.1f}", _throughput(r), _s(r["step_time_p50_s"]),
                 _s(r["step_time_p99_s"]), _s(r["wait_p99_s"]), _s(r["straggler_mean_s"]),
                 f"{r['cached_fraction']:.0%}" if pd.notna(r["cached_fraction"]) else "remote: unseen"]
                for _, r in df.sort_values(["accelerators", "repeat"]).iterrows()]
        ds = info["dataset"]
        # the dataset read, as found on disk; then the workload's other fields (its file count only shapes `prepare`)
        workload_rows = [["dataset", ds["directory"]], ["files", ds["files"]], ["samples", ds["samples"]],
                         ["sample size (mean, sd)", f"{format_size(ds['mean_sample_bytes'])}, "
                                                    f"{format_size(ds['stdev_sample_bytes'])}"]]
        workload_rows += [[k, format_size(v) if k in ("record_bytes", "record_stdev", "transfer_size") else v]
                          for k, v in w.items() if k not in ("files", "samples_per_file")]
        answer = verdict(df.to_dict("records"), w["name"], w["au_threshold"])
        sections = [
            ("Answer", f"<p class='headline'>{html.esc(answer)}</p>"
                       "<p class='rule'>AU as DLIO computes it: compute of every step but the first, over the time "
                       "from the end of the first step's compute to the last barrier; mean over accelerators.</p>"),
            ("Utilisation by accelerators", html.image(au_png, "AU by accelerators")),
            ("Utilisation over time", html.image(time_png, "AU over time")),
            ("Step times", html.image(step_png, "step time distribution")),
            ("Every run", html.table(["accelerators", "repeat", "AU", "verdict", "predicted", "samples/s", "MiB/s: DLIO's (read)",
                                      "step p50", "step p99", "wait p99", "stragglers (mean)", "cached"], rows)),
            ("Workload", html.table(["", ""], workload_rows)),
        ] + html.left_out(df.attrs["problems"])
        if "per_host" in df and df["per_host"].notna().any():  # accelerators on several hosts (mpirun)
            sections.insert(-1, ("Per host (AU of its accelerators; steps it held up as the last host to arrive)",
                                 html.table(["accelerators", "repeat", "host", "ranks", "AU", "steps held up"], [
                                     [int(r["accelerators"]), r["repeat"], h["host"], ", ".join(map(str, h["ranks"])),
                                      f"{h['au_percent']:.1f} %", h["steps_held_up"]]
                                     for _, r in df[df["per_host"].notna()].iterrows()
                                     for h in json.loads(r["per_host"])])))
        if info.get("prediction"):
            p = info["prediction"]
            sections.append(("Prediction", html.table(["", ""], [
                ["most accelerators predicted", p["max_accelerators"]], ["probe and model time", f"{p['seconds']:.0f} s"],
                ["demand per accelerator", format_rate(p["demand_bytes_per_s"])],
                *[[f"probe: {q['readers']} readers", f"{format_rate(q['rate_bytes_per_s'])}, spread {q['spread']:.0%}"]
                  for q in p["probe"]],
                *[["out of its depth", x] for x in p["warnings"]]])))
        path = os.path.join(out, "report.html")
        html.write_page(path, f"gdsbench train: {info['run_id']}", sections)
    return html.Report(path, {"au": au_png, "au_over_time": time_png, "step_times": step_png}, {"answer": answer})
