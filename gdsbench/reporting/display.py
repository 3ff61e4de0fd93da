"""Text a person reads in a terminal: the summary of one run."""

from __future__ import annotations

from gdsbench.job.result import PERCENTILES, Result, per_host, percentile_key
from gdsbench.job.units import format_count, format_duration, format_rate, format_size


def _region(r: Result) -> str:
    """What was read: the whole region, where several processes or ranks each read a part of it."""
    spec, parts = r.spec, len(r.procs)
    if parts < 2:
        return f"{format_size(spec.size)} region"
    if spec.layout == "shared":
        return f"{format_size(spec.size * parts)} region, {parts} parts of {format_size(spec.size)}"
    if spec.layout == "shared-all":
        return f"{format_size(spec.size)} region, read whole by each of {parts} processes"
    return f"{parts} files, {format_size(spec.size)} of each"


def run_summary(r: Result) -> str:
    spec = r.spec
    target = (r.environment or {}).get("target") or {}
    where = spec.path if spec.path and spec.opens_target else f"(no target: {spec.engine} engine)"
    place = ", ".join(str(x) for x in (target.get("fs_type"), target.get("block_device")) if x)
    stop = []
    if spec.runtime_ns:
        stop.append(format_duration(spec.runtime_ns))
    if spec.io_size:
        stop.append(format_size(spec.io_size))
    cache = "" if r.cached_fraction is None else f", {r.cached_fraction:.1%} of region cached at start"
    lat = r.latency
    lines = [
        f"target     {where} ({_region(r)}{', ' + place if place else ''})",
        f"job        {spec.describe()}, stop after {' or '.join(stop)}{cache}",
        f"path       {r.data_path}",
        f"bandwidth  {format_rate(r.bandwidth)}  ({r.bandwidth / 1e9:.3f} GB/s)   "
        f"IOPS {format_count(r.iops)}   {format_size(r.bytes)} in {format_duration(r.elapsed_ns)}",
        "latency    "
        + "  ".join(
            [f"min {format_duration(lat.min)}"]
            + [f"{percentile_key(p)} {format_duration(r.percentile(p))}" for p in PERCENTILES]
            + [f"max {format_duration(lat.max)}"]
        ),
        f"           mean {format_duration(lat.mean)} ± {format_duration(lat.variance**0.5)} over {lat.count:,} "
        f"{spec.direction}s",
        f"cpu        process user {r.cpu_user_s:.2f} s  sys {r.cpu_sys_s:.2f} s"
        + (f"  = {r.cpu_s_per_gb:.3f} CPU-s per GB" if r.cpu_s_per_gb is not None else "")
        + (f"  (worker threads {r.worker_cpu_s_per_gb:.3f})" if r.worker_cpu_s_per_gb is not None else ""),
    ]
    if r.first_byte_seen:
        fb = r.first_byte
        lines.append(f"first byte p50 {format_duration(fb.percentile(50))}  p99 {format_duration(fb.percentile(99))}  "
                     f"max {format_duration(fb.max)}   connections {r.connections:,} for {r.ops:,} requests")
    if r.fsync and r.fsync.count:
        calls = f"{r.fsync.count:,} call{'' if r.fsync.count == 1 else 's'}"
        lines.append(f"fsync      {calls}, p50 {format_duration(r.fsync.percentile(50))}, max "
                     f"{format_duration(r.fsync.max)} (inside the measured time)")
    if r.streamed_bytes:
        lines.append(f"copy       {format_size(r.streamed_bytes)} read copied with streaming stores, the reads in flight "
                     "past half the last-level cache (over the whole run, a --ramp too)")
    if r.retries:
        lines.append(f"retries    {r.retries:,} requests tried again after a failure (--retries), not counted as reads")
    if r.first_pass and r.reread and r.first_byte_seen:  # a remote target: its server's cache cannot be seen
        lines.append("passes     " + "   ".join(
            f"{name} {format_size(part['bytes'])} at {format_rate(part['bandwidth_bytes_per_s'])}, "
            f"p50 {format_duration(part['lat_p50_ns'])}" for name, part in (("first read", r.first_pass),
                                                                             ("re-read", r.reread))))
    if r.stonewall:
        w = r.stonewall
        lines.append(f"stonewall  {format_rate(w['bandwidth_bytes_per_s'])}: {format_size(w['bytes'])} in "
                     f"{format_duration(w['elapsed_ns'])}, when the first worker finished (the line above is the full run)")
    if r.procs:
        skew = (f"start skew {format_duration(r.start_skew_ns)}" if r.start_skew_ns is not None else
                "started together at a barrier (each rank timed on its own clock)")
        lines.append(f"processes  {len(r.procs)}, {skew}")
        hosts = per_host(r.procs)
        if len(hosts) > 1:
            lines.append(f"hosts      {len(hosts)}: " + ", ".join(
                f"{h['host']} ({len(h['ranks'])} ranks) {format_rate(h['bandwidth_bytes_per_s'])}" for h in hosts))
        for p in r.procs:
            who = f"rank {p['rank']}" if "rank" in p else f"proc {p['proc']}"
            sim = " (simulated)" if spec.simulated else ""
            extra = (f" gpu {p['gpu']}{sim}" if p.get("gpu") is not None else "") + (
                f" cpus {p['cpus']}" if p.get("cpus") else "")
            lines.append(f"  {who:8} {p['host']} pid {p['pid']}: {format_rate(p['bandwidth_bytes_per_s'])}, "
                         f"p50 {format_duration(p['lat_p50_ns'])}, p99 {format_duration(p['lat_p99_ns'])}{extra}")
    if spec.verify:
        lines.append(f"verify     {r.verified_blocks:,} blocks checked, {r.verify_mismatches:,} mismatched"
                     + (f" (first at offset {r.first_mismatch_offset})" if r.verify_mismatches else ""))
    if r.interrupted:
        lines.append("status     INTERRUPTED: figures cover the part that ran")
    return "\n".join(lines)
