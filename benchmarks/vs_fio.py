#!/usr/bin/env python3
"""gdsbench against fio: the same jobs on the same file, fio and gdsbench in
counterbalanced pairs (A B, B A, ...), in one run. Prints and saves a table of
ratios gdsbench/fio for bandwidth or IOPS and for p50 and p99 latency.

Both tools time a read from its issue to its completion being seen (fio's
"lat", requested with lat_percentiles=1), drop the page cache before cold rows
(fio's invalidate=1; gdsbench's default) and visit each block once per pass in
random rows (fio's random map; gdsbench's permutation).

Buffers. gdsbench reads into 2 MiB-aligned huge-page-backed buffers; fio's
default malloc() buffers are scattered 4 KiB pages, and a 1 MiB O_DIRECT read
into them can exceed the disk's DMA segment limit and reach the device as two
512 KiB requests. So the reference is fio with huge-page buffers
(--mem=shmhuge, for which the script reserves a few huge pages and gives them
back after), which sends the device the same requests; fio with its default
buffers is measured too and shown beside it. The average device request size
of each tool, from /sys/block/<disk>/stat, is in the table, so the reason
for any gap is visible.

    .venv/bin/python benchmarks/vs_fio.py                # about 8 minutes, as root
    .venv/bin/python benchmarks/vs_fio.py --runtime 2 --repeats 2 --rows null
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, median, write_outputs  # noqa: E402

import gdsbench  # noqa: E402
from gdsbench.spec import spec_from_values  # noqa: E402
from gdsbench.target import describe, inspect  # noqa: E402
from gdsbench.units import format_duration, format_rate  # noqa: E402

SCRATCH = os.path.join("results", "scratch")


@dataclass
class Row:
    name: str
    fio: dict  # fio job options
    gds: dict  # gdsbench options, as a user writes them
    metric: str  # "iops" or "bandwidth"
    file: str  # "disk" (cold, O_DIRECT), "warm" (buffered, in page cache) or "none"
    min_ratio: float = 0.97  # target for the throughput ratio
    compare_latency: bool = True
    notes: list[str] = field(default_factory=list)


ROWS = [
    Row("psync 4K rand QD1 O_DIRECT", dict(ioengine="psync", rw="randread", bs="4k", iodepth=1, direct=1),
        dict(engine="psync", bs="4K", pattern="rand", qd=1, direct=True), "iops", "disk"),
    Row("io_uring 4K rand QD32 O_DIRECT", dict(ioengine="io_uring", rw="randread", bs="4k", iodepth=32, direct=1),
        dict(engine="io_uring", bs="4K", pattern="rand", qd=32, direct=True), "iops", "disk"),
    Row("io_uring 128K seq QD16 O_DIRECT", dict(ioengine="io_uring", rw="read", bs="128k", iodepth=16, direct=1),
        dict(engine="io_uring", bs="128K", pattern="seq", qd=16, direct=True), "bandwidth", "disk"),
    Row("io_uring 1M seq QD8 O_DIRECT", dict(ioengine="io_uring", rw="read", bs="1m", iodepth=8, direct=1),
        dict(engine="io_uring", bs="1M", pattern="seq", qd=8, direct=True), "bandwidth", "disk"),
    Row("psync 4K rand warm cache", dict(ioengine="psync", rw="randread", bs="4k", iodepth=1, direct=0, invalidate=0),
        dict(engine="psync", bs="4K", pattern="rand", qd=1, direct=False, warm=True), "iops", "warm", min_ratio=1.05),
    Row("psync 1M seq warm cache", dict(ioengine="psync", rw="read", bs="1m", iodepth=1, direct=0, invalidate=0),
        dict(engine="psync", bs="1M", pattern="seq", qd=1, direct=False, warm=True), "bandwidth", "warm"),
    Row("null 4K", dict(ioengine="null", rw="read", bs="4k", iodepth=1, size="1g"),
        dict(engine="null", bs="4K", size="1G"), "iops", "none", min_ratio=1.0, compare_latency=False,
        notes=["null moves no data: its latency is each tool's own bookkeeping, so p50/p99 are shown, not judged"]),
]


HUGEPAGES = "/proc/sys/vm/nr_hugepages"


class DiskCounters:
    """Reads and sectors completed by one block device, from /sys/block/<disk>/stat."""

    def __init__(self, path: str):
        disk = describe(inspect(path)).get("block_device")
        self.stat = f"/sys/block/{disk}/stat" if disk else None

    def sample(self) -> tuple[int, int]:
        if not self.stat:
            return (0, 0)
        fields = open(self.stat).read().split()
        return int(fields[0]), int(fields[2])

    def measure(self, fn, *args) -> dict:
        """Run fn(*args) and add the average device read request it caused, in bytes."""
        before = self.sample()
        out = fn(*args)
        reads, sectors = (b - a for a, b in zip(before, self.sample()))
        out["device_request_bytes"] = sectors * 512 / reads if reads > 100 else None
        return out


def reserve_hugepages(extra: int) -> int | None:
    """Reserve `extra` more 2 MiB pages for fio's --mem=shmhuge; returns the old count, None if not allowed."""
    try:
        old = int(open(HUGEPAGES).read())
        with open(HUGEPAGES, "w") as f:
            f.write(str(old + extra))
        if int(open(HUGEPAGES).read()) < old + extra:
            release_hugepages(old)
            return None
        return old
    except OSError:
        return None


def release_hugepages(old: int) -> None:
    with open(HUGEPAGES, "w") as f:
        f.write(str(old))


def run_fio(row: Row, path: str | None, runtime: float, ramp: float, seed: int, huge: bool = False) -> dict:
    args = ["fio", "--name=vs_fio", "--output-format=json", "--time_based", f"--runtime={runtime}",
            f"--ramp_time={ramp}", "--lat_percentiles=1", "--percentile_list=50:99", f"--randseed={seed}"]
    if path:
        args.append(f"--filename={path}")
    args += [f"--{k}={v}" for k, v in row.fio.items()]
    if huge:
        args.append("--mem=shmhuge")
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    read = json.loads(out[out.index("{"):])["jobs"][0]["read"]
    pct = read["lat_ns"]["percentile"]
    return {"bandwidth": read["bw_bytes"], "iops": read["iops"],
            "p50": pct["50.000000"], "p99": pct["99.000000"]}


def run_fio_huge(row: Row, path: str | None, runtime: float, ramp: float, seed: int) -> dict:
    return run_fio(row, path, runtime, ramp, seed, huge=True)


def run_gdsbench(row: Row, path: str | None, runtime: float, ramp: float, seed: int) -> dict:
    values = dict(row.gds, runtime=f"{runtime}s", ramp=f"{ramp}s", seed=seed)
    spec = spec_from_values(values).replace(path=path or "")
    r = gdsbench.run(spec, record_environment=False)
    return {"bandwidth": r.bandwidth, "iops": r.iops, "p50": r.percentile(50), "p99": r.percentile(99),
            "cached_fraction": r.cached_fraction}


def warm_up(path: str) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runtime", type=float, default=3.0, help="seconds per measurement (default 3)")
    ap.add_argument("--ramp", type=float, default=0.5, help="seconds of ramp before each (default 0.5)")
    ap.add_argument("--repeats", type=int, default=6, help="pairs per row, in the order AB BA AB ... (default 6)")
    ap.add_argument("--disk-size", default="4G", help="size of the cold-read file (default 4G)")
    ap.add_argument("--rows", default="", help="only rows whose name contains this text")
    ap.add_argument("--name", default="vs_fio", help="output name under results/benchmarks/")
    args = ap.parse_args()

    os.makedirs(SCRATCH, exist_ok=True)
    files = {"disk": os.path.join(SCRATCH, "vs_fio-disk.dat"), "warm": os.path.join(SCRATCH, "vs_fio-warm.dat")}
    gdsbench.prepare(files["disk"], gdsbench.units.parse_size(args.disk_size))
    gdsbench.prepare(files["warm"], 1 << 30)
    counters = DiskCounters(files["disk"])

    old_hugepages = reserve_hugepages(32)
    reference = run_fio_huge if old_hugepages is not None else run_fio
    try:
        table, raw = measure_rows(args, files, counters, reference)
    finally:
        if old_hugepages is not None:
            release_hugepages(old_hugepages)

    header = ["job", "metric", "fio", "gdsbench", "ratio gds/fio (min-max)", "target", "p50 fio / gds",
              "p50 ratio", "p99 fio / gds", "p99 ratio", "verdict", "fio default buffers (ratio gds/it)",
              "device request fio / gds / fio default"]
    md = markdown_table(header, table)
    ref_name = "fio with huge-page buffers (--mem=shmhuge)" if reference is run_fio_huge else "fio (no huge pages could be reserved: default buffers)"
    notes = [f"Reference: {ref_name}. {args.repeats} pairs per row in the order fio-gdsbench, gdsbench-fio, ... "
             f"(counterbalanced), {args.runtime:g} s each after a {args.ramp:g} s ramp; ratios are the median of the "
             "per-pair ratios. fio with its default malloc buffers ran after each pair (not counterbalanced). "
             "Random rows use a new seed for each pair (fio --randseed, gdsbench --seed): the tools' random orders "
             "differ, and this disk's speed depends on which blocks are read.",
             "Targets: throughput ratio >= 0.97 (warm-cache 4K psync >= 1.05, null >= 1.0); p50 within 10% of fio's.",
             "Device request: average size of the read requests the disk completed during each tool's runs "
             "(/sys/block/<disk>/stat); '-' where the page cache or the null engine served everything."]
    notes += [n for row in ROWS if args.rows in row.name for n in row.notes]
    print("\n" + md)
    paths = write_outputs(args.name, "gdsbench vs fio", md, notes, raw)
    print("\nwrote " + ", ".join(paths))
    return 0 if all(r["verdict"] == "PASS" for r in raw["rows"]) else 1


def measure_rows(args, files, counters, reference):
    table, raw = [], {"rows": []}
    for row in ROWS:
        if args.rows not in row.name:
            continue
        path = files.get(row.file)
        fio, gds, fio_default = [], [], []
        for i in range(args.repeats):
            # A B, then B A: whoever goes first in a pair gets a rested device
            # (this virtio disk bursts), so the order is counterbalanced.
            order = [(reference, fio), (run_gdsbench, gds)]
            for tool, into in (order if i % 2 == 0 else order[::-1]) + [(run_fio, fio_default)]:
                if row.file == "warm":
                    warm_up(path)
                # a new random order for both tools each pair: the disk is sensitive to
                # which blocks are read, so no single order may decide a row
                into.append(counters.measure(tool, row, path, args.runtime, args.ramp, i + 1))
        m = row.metric
        ratios = {k: median([g[k] / f[k] for f, g in zip(fio, gds)]) for k in (m, "p50", "p99")}
        spread = [g[m] / f[m] for f, g in zip(fio, gds)]
        vs_default = median([g[m] / f[m] for f, g in zip(fio_default, gds)])
        ok_tput = ratios[m] >= row.min_ratio
        ok_p50 = abs(ratios["p50"] - 1) <= 0.10 if row.compare_latency else None
        verdict = "PASS" if ok_tput and ok_p50 is not False else "FAIL"
        fmt = (lambda v: f"{v / 1e3:,.1f}k") if m == "iops" else format_rate

        def request(runs):
            sizes = [r["device_request_bytes"] for r in runs if r["device_request_bytes"]]
            return f"{median(sizes) / 1024:.0f}K" if sizes and row.file == "disk" else "-"

        table.append([
            row.name, m, fmt(median([f[m] for f in fio])), fmt(median([g[m] for g in gds])),
            f"**{ratios[m]:.3f}** ({min(spread):.3f}-{max(spread):.3f})", f">= {row.min_ratio:.2f}",
            f"{format_duration(median([f['p50'] for f in fio]))} / {format_duration(median([g['p50'] for g in gds]))}",
            f"{ratios['p50']:.3f}" + ("" if row.compare_latency else " (not judged)"),
            f"{format_duration(median([f['p99'] for f in fio]))} / {format_duration(median([g['p99'] for g in gds]))}",
            f"{ratios['p99']:.3f}", verdict,
            f"{fmt(median([f[m] for f in fio_default]))} ({vs_default:.3f})",
            f"{request(fio)} / {request(gds)} / {request(fio_default)}",
        ])
        raw["rows"].append({"name": row.name, "metric": m, "target_ratio": row.min_ratio, "fio": fio, "gdsbench": gds,
                            "fio_default_buffers": fio_default, "median_ratios": ratios,
                            "ratio_vs_fio_default_buffers": vs_default, "verdict": verdict, "notes": row.notes})
        print(" | ".join(str(c) for c in table[-1]), flush=True)
    return table, raw


if __name__ == "__main__":
    sys.exit(main())
