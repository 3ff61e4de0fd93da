#!/usr/bin/env python3
"""gdsbench against fio: the same jobs on the same file, fio and gdsbench
alternating (fio, gdsbench, fio, ..., fio) in one run. Prints and saves a
table of ratios gdsbench/fio for bandwidth or IOPS and for p50 and p99
latency, each the median over the row's gdsbench runs (each against the mean
of the fio runs either side) with a 95% confidence interval, so that a gap is
told apart from this machine's noise.

Both tools time a read from its issue to its completion being seen. fio
stamps "issue" in two places: a synchronous read (psync) just before the
pread(2) call, its "clat"; an asynchronous one (io_uring) when its io_u is
ready to queue, before submission, its "lat". gdsbench stamps every read just
before it is queued, so each row compares against the fio window that starts
there: clat for psync, lat for io_uring (both are kept in the JSON). fio's lat
for a psync read adds fio's own bookkeeping between preparing an io_u and
calling pread: 30-80 ns at the median here, 3-5% of a warm-cache 4 KiB read.
Both tools drop the page cache before cold rows (fio's invalidate=1; gdsbench's default) and visit each block once per pass in
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

Write rows: every run of either tool writes one file made anew by `gdsbench
prepare` just before it (as --job does for a write job). The buffered write
row measures memory more than the disk: it is shown, not judged, and stays
out of the headline.

    .venv/bin/python benchmarks/vs_fio.py                # about 30 minutes, as root
    .venv/bin/python benchmarks/vs_fio.py --rows write   # the write rows only: about 15-25 minutes
    .venv/bin/python benchmarks/vs_fio.py --runtime 2 --repeats 2 --rows null
    .venv/bin/python benchmarks/vs_fio.py --quick --rows write   # a smoke test (to results/scratch/benchmarks)
    .venv/bin/python benchmarks/vs_fio.py --job ssd-test.fio --section rand-read   # both tools, one job file
    .venv/bin/python benchmarks/vs_fio.py --fio /tmp/fio-src/fio --rows uncached   # rows a newer fio runs

The uncached rows (fio's uncached=1, gdsbench's --uncached: RWF_DONTCACHE) need fio 3.39 or later:
Debian 12's fio 3.33 has no such option, so they are left out, saying so, unless --fio names a newer
fio (one built from its source: ./configure --disable-native && make).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, median, write_outputs  # noqa: E402
from stats import interval_label, judge, median_interval  # noqa: E402

import gdsbench  # noqa: E402
from gdsbench.job.spec import spec_from_values  # noqa: E402
from gdsbench.job.units import format_duration, format_rate, format_size  # noqa: E402
from gdsbench.system.targets import target_for  # noqa: E402

SCRATCH = os.path.join("results", "scratch")


@dataclass
class Row:
    name: str
    fio: dict  # fio job options
    gds: dict  # gdsbench options, as a user writes them
    metric: str  # "iops" or "bandwidth"
    file: str  # "disk" (cold, O_DIRECT), "warm" (buffered, in page cache), "write" (each tool its own file) or "none"
    min_ratio: float = 0.97  # target for the throughput ratio
    compare_latency: bool = True
    judged: bool = True  # False: shown for information, outside the headline (its verdict and the exit status)
    notes: list[str] = field(default_factory=list)
    min_fio: tuple[int, int] = (0, 0)  # the oldest fio that has every option of the row

    @property
    def fio_window(self) -> str:
        """fio's latency that starts where gdsbench's does (see the module docstring)."""
        return "clat" if self.fio["ioengine"] in ("psync", "pvsync2", "null") else "lat"  # (pvsync2: psync's clock)


# io_uring's own options, each as fio names it (None: a switch, --fixedbufs) and as gdsbench does, on the
# QD32 row: their throughput judged, their p50 shown (the QD32 p50 band is the row above's own question)
IO_URING_OPTION_ROWS = [
    ("fixedbufs", {"fixedbufs": None}, {"fixedbufs": True}, []),
    ("registerfiles", {"registerfiles": None}, {"registerfiles": True}, []),
    ("sqthread_poll", {"sqthread_poll": 1}, {"sqthread_poll": True}, []),
    ("sqthread_poll on CPU 1", {"sqthread_poll": 1, "sqthread_poll_cpu": 1},
     {"sqthread_poll": True, "sqthread_poll_cpu": 1}, []),
    ("complete batches of 8", {"iodepth_batch_complete_min": 8}, {"complete_batch": 8}, []),
]
HIPRI_NOTE = ("hipri (IOPOLL) has no row: this machine's virtio disk has no polled queues (queue/io_poll 0), "
              "where fio's reads fail 'Operation not supported' and gdsbench refuses --hipri in one line")

UNCACHED_FIO = (3, 39)  # fio's uncached=1 (RWF_DONTCACHE) came in fio 3.39

ROWS = [
    Row("psync 4K rand QD1 O_DIRECT", dict(ioengine="psync", rw="randread", bs="4k", iodepth=1, direct=1),
        dict(engine="psync", bs="4K", pattern="rand", qd=1, direct=True), "iops", "disk"),
    Row("io_uring 4K rand QD32 O_DIRECT", dict(ioengine="io_uring", rw="randread", bs="4k", iodepth=32, direct=1),
        dict(engine="io_uring", bs="4K", pattern="rand", qd=32, direct=True), "iops", "disk"),
    Row("io_uring 4K rand QD32 O_DIRECT, fio reaping in batches",
        dict(ioengine="io_uring", rw="randread", bs="4k", iodepth=32, direct=1, iodepth_batch_complete_max=32),
        dict(engine="io_uring", bs="4K", pattern="rand", qd=32, direct=True), "iops", "disk", compare_latency=False,
        notes=["fio reaping in batches (p50 shown, not judged: this row is there to explain the one above): "
               "fio by default reaps one completion at a time and resubmits before reaping the next, so each "
               "completion's latency includes fio's resubmissions of those reaped "
               "before it; with iodepth_batch_complete_max equal to the depth it reaps every ready completion "
               "at once, as gdsbench does. The 'in flight' column (IOPS x mean latency, Little's law) shows "
               "the difference"]),
    Row("io_uring 128K seq QD16 O_DIRECT", dict(ioengine="io_uring", rw="read", bs="128k", iodepth=16, direct=1),
        dict(engine="io_uring", bs="128K", pattern="seq", qd=16, direct=True), "bandwidth", "disk"),
    Row("io_uring 1M seq QD8 O_DIRECT", dict(ioengine="io_uring", rw="read", bs="1m", iodepth=8, direct=1),
        dict(engine="io_uring", bs="1M", pattern="seq", qd=8, direct=True), "bandwidth", "disk"),
    Row("psync 4K rand warm cache", dict(ioengine="psync", rw="randread", bs="4k", iodepth=1, direct=0, invalidate=0),
        dict(engine="psync", bs="4K", pattern="rand", qd=1, direct=False, warm=True), "iops", "warm", min_ratio=1.05),
    Row("psync 1M seq warm cache", dict(ioengine="psync", rw="read", bs="1m", iodepth=1, direct=0, invalidate=0),
        dict(engine="psync", bs="1M", pattern="seq", qd=1, direct=False, warm=True), "bandwidth", "warm"),
    Row("psync 4K randwrite QD1 O_DIRECT end_fsync",
        dict(ioengine="psync", rw="randwrite", bs="4k", iodepth=1, direct=1, end_fsync=1),
        dict(engine="psync", bs="4K", rw="randwrite", qd=1, direct=True, fsync_end=True), "iops", "write"),
    Row("io_uring 4K randwrite QD32 O_DIRECT end_fsync",
        dict(ioengine="io_uring", rw="randwrite", bs="4k", iodepth=32, direct=1, end_fsync=1),
        dict(engine="io_uring", bs="4K", rw="randwrite", qd=32, direct=True, fsync_end=True), "iops", "write"),
    Row("io_uring 1M write QD8 O_DIRECT end_fsync",
        dict(ioengine="io_uring", rw="write", bs="1m", iodepth=8, direct=1, end_fsync=1),
        dict(engine="io_uring", bs="1M", rw="write", qd=8, direct=True, fsync_end=True), "bandwidth", "write"),
    Row("psync 1M write buffered end_fsync",
        dict(ioengine="psync", rw="write", bs="1m", iodepth=1, direct=0, end_fsync=1, invalidate=0),
        dict(engine="psync", bs="1M", rw="write", qd=1, direct=False, fsync_end=True), "bandwidth", "write",
        judged=False,
        notes=["psync 1M write buffered end_fsync: NOT JUDGED, shown for information and left out of the headline "
               "(its ratio is not in bold, its verdict says 'not judged', and the exit status ignores it): "
               "buffered writes with end_fsync, time-based over a 1 GiB file: each tool rewrites the file's pages in "
               "the page cache many times, and the one fsync at the end flushes the last copy of each, so both "
               "measure memory more than the disk (gdsbench's row warns so). fio runs with invalidate=0 here: by "
               "default it drops the file's cached pages at the start of every pass over it, which starts their "
               "write-back each time (seen: 0.65 GiB/s against gdsbench's 14.5 GiB/s, with 4 MiB device writes during "
               "fio's runs); gdsbench drops them once, before the run"]),
    *(Row(f"io_uring 4K rand QD32 O_DIRECT + {name}",
          dict(ioengine="io_uring", rw="randread", bs="4k", iodepth=32, direct=1, **fio_options),
          dict(engine="io_uring", bs="4K", pattern="rand", qd=32, direct=True, **gds_options), "iops", "disk",
          compare_latency=False, notes=notes)
      for name, fio_options, gds_options, notes in IO_URING_OPTION_ROWS),
    # buffered, each read's or write's pages dropped by the kernel (fio's pvsync2 is gdsbench's psync with flags)
    # (gdsbench with --fadvise-hint: fio advises the kernel of a buffered job's pattern by default, fadvise_hint=1,
    # which doubles a sequential reader's readahead; gdsbench only when asked)
    Row("psync 1M seq uncached", dict(ioengine="pvsync2", rw="read", bs="1m", iodepth=1, direct=0, uncached=1),
        dict(engine="psync", bs="1M", pattern="seq", qd=1, uncached=True, fadvise_hint=True), "bandwidth", "disk",
        min_fio=UNCACHED_FIO),
    Row("io_uring 1M seq QD8 uncached", dict(ioengine="io_uring", rw="read", bs="1m", iodepth=8, direct=0, uncached=1),
        dict(engine="io_uring", bs="1M", pattern="seq", qd=8, uncached=True, fadvise_hint=True), "bandwidth", "disk",
        min_fio=UNCACHED_FIO),
    # (pvsync2, not io_uring: fio 3.42's io_uring engine puts uncached's flag on its end_fsync too, which the
    # kernel refuses, EINVAL)
    Row("psync 1M write uncached end_fsync",
        dict(ioengine="pvsync2", rw="write", bs="1m", iodepth=1, direct=0, uncached=1, end_fsync=1),
        dict(engine="psync", bs="1M", rw="write", qd=1, uncached=True, fsync_end=True, fadvise_hint=True), "bandwidth",
        "write", min_fio=UNCACHED_FIO),
    Row("null 4K", dict(ioengine="null", rw="read", bs="4k", iodepth=1, size="1g"),
        dict(engine="null", bs="4K", size="1G"), "iops", "none", min_ratio=1.0, compare_latency=False,
        notes=["null moves no data: its latency is each tool's own bookkeeping, so p50/p99 are shown, not judged"]),
]


HUGEPAGES = "/proc/sys/vm/nr_hugepages"
# fio (3.33) takes its random offsets from a fixed seed while randrepeat is on, its default: randseed=2
# and randseed=3 read the very same offsets (seen in write_iolog). With randrepeat=0 randseed sets them
# (the same seed, the same offsets; another seed, others). Before this, every fio run of a random row
# re-read the blocks its previous runs had read, ever warmer in the virtio disk's host cache, while
# each gdsbench run read new ones: that alone made ssd-test.fio's rand-read 0.554 of fio.
FIO_SEED = "randrepeat=0"


class DiskCounters:
    """Requests and sectors completed by one block device, reads or writes, from /sys/block/<disk>/stat."""

    def __init__(self, path: str):
        disk = target_for(path).describe().get("block_device")
        self.stat = f"/sys/block/{disk}/stat" if disk else None

    def sample(self, writes: bool) -> tuple[int, int]:
        if not self.stat:
            return (0, 0)
        fields = open(self.stat).read().split()
        return (int(fields[4]), int(fields[6])) if writes else (int(fields[0]), int(fields[2]))

    @contextlib.contextmanager
    def requests(self, writes: bool):
        """Around a whole run (set-up, ramp and window): the device requests it completed and their
        sectors, put into the dict yielded (device_requests, device_request_bytes)."""
        before, out = self.sample(writes), {}
        yield out
        requests, sectors = (b - a for a, b in zip(before, self.sample(writes)))
        out.update(device_requests=requests, device_request_bytes=sectors * 512 / requests if requests else None)

    def measure(self, fn, row: Row, *args) -> dict:
        """Run fn(row, *args) and add the average device request of the row's direction it caused, in bytes."""
        writes = "write" in row.fio["rw"]
        before = self.sample(writes)
        out = fn(row, *args)
        requests, sectors = (b - a for a, b in zip(before, self.sample(writes)))
        out["device_request_bytes"] = sectors * 512 / requests if requests > 100 else None
        return out


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be at least 1")
    return value


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


def fio_figures(out: str, writes: bool) -> dict:
    """The first job's read (or write) section of fio's --output-format=json (after any text fio prints first)."""
    return json.loads(out[out.index("{"):])["jobs"][0]["write" if writes else "read"]


FIO = "fio"  # the fio every run uses (--fio)


def fio_version(fio: str) -> tuple[int, int]:
    """fio's version as (major, minor), from `fio --version` ("fio-3.33")."""
    out = subprocess.run([fio, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    m = re.match(r"fio-(\d+)\.(\d+)", out)
    if not m:
        sys.exit(f"--fio {fio}: its --version said {out!r}, not fio-MAJOR.MINOR")
    return int(m.group(1)), int(m.group(2))


def run_fio(row: Row, path: str | None, runtime: float, ramp: float, seed: int, huge: bool = False) -> dict:
    # in ms: fio reads "0.5" as 0 seconds, which fio 3.42 refuses with time_based
    args = [FIO, "--name=vs_fio", "--output-format=json", "--time_based", f"--runtime={round(runtime * 1000)}ms",
            f"--ramp_time={round(ramp * 1000)}ms", "--lat_percentiles=1", "--clat_percentiles=1",
            "--percentile_list=50:99", f"--randseed={seed}", "--randrepeat=0"]  # see FIO_SEED
    if path:
        args.append(f"--filename={path}")
    args += [f"--{k}" if v is None else f"--{k}={v}" for k, v in row.fio.items()]  # None: a switch (--fixedbufs)
    if huge:
        args.append("--mem=shmhuge")
    read = fio_figures(subprocess.run(args, capture_output=True, text=True, check=True).stdout,
                       "write" in row.fio["rw"])
    pct = {w: read[f"{w}_ns"]["percentile"] for w in ("lat", "clat")}
    window = row.fio_window
    return {"bandwidth": read["bw_bytes"], "iops": read["iops"], "window": window,
            "p50": pct[window]["50.000000"], "p99": pct[window]["99.000000"], "mean": read[f"{window}_ns"]["mean"],
            **{f"{w}_{q}": pct[w][f"{q}.000000"] for w in pct for q in (50, 99)}}


def run_fio_huge(row: Row, path: str | None, runtime: float, ramp: float, seed: int) -> dict:
    return run_fio(row, path, runtime, ramp, seed, huge=True)


def run_gdsbench(row: Row, path: str | None, runtime: float, ramp: float, seed: int) -> dict:
    values = dict(row.gds, runtime=f"{runtime}s", ramp=f"{ramp}s", seed=seed)
    spec = spec_from_values(values).replace(path=path or "")
    r = gdsbench.run(spec, record_environment=False)
    return {"bandwidth": r.bandwidth, "iops": r.iops, "p50": r.percentile(50), "p99": r.percentile(99),
            "mean": r.latency.mean,
            "cached_fraction": r.cached_fraction, "beside_workers": beside_workers(r.to_dict())}


def beside_workers(figures: dict) -> float | None:
    """CPU-seconds a second that a gdsbench run's process spent outside its worker threads during the measured
    window (the harness: its progress polling, Python, what else the process holds), from a result's --json
    figures: the whole process's CPU in the window less the workers'."""
    seconds = figures["elapsed_ns"] / 1e9
    if not seconds:
        return None
    process = figures["cpu_user_s"] + figures["cpu_sys_s"]
    workers = figures["worker_cpu_user_s"] + figures["worker_cpu_sys_s"]
    return max(process - workers, 0.0) / seconds


def warm_up(path: str) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


WRITE_FILE = "1G"  # the file the write rows and write jobs write (--write-size)


def prepare_files(disk_size: str, scratch: str = SCRATCH, warm: bool = True) -> tuple[dict[str, str], DiskCounters]:
    """The rows' files (a cold one read with O_DIRECT, a warm one read from the page cache unless
    warm=False: job files read the cold one only) and the disk's counters; and where the write rows'
    file goes, which fresh_file makes before every run."""
    os.makedirs(scratch, exist_ok=True)
    files = {"disk": os.path.join(scratch, "vs_fio-disk.dat"), "warm": os.path.join(scratch, "vs_fio-warm.dat"),
             "write": os.path.join(scratch, "vs_fio-write.dat")}
    gdsbench.prepare(files["disk"], gdsbench.job.units.parse_size(disk_size))
    if warm:
        gdsbench.prepare(files["warm"], 1 << 30)
    return files, DiskCounters(files["disk"])


def fresh_file(path: str, size: int) -> None:
    """The file one write run writes, laid out anew by `prepare` just before that run (of either tool):
    gdsbench writes only into such a file; where a file lies on this disk sets its write speed (a file
    fio wrote once took 1.7x its own file's IOPS), so every run gets a fresh placement and neither tool
    keeps a luckier or an already-rewritten file. prepare fsyncs, so no write-back of it is left to
    fall inside the run."""
    if os.path.exists(path):  # the last run's writes left it no longer gdsbench's: made again
        os.remove(path)
    gdsbench.prepare(path, size)


def job_file_rows(args, files, counters: DiskCounters) -> tuple[list[list], dict]:
    """--job FILE: both tools run each job of one fio job file (or --section's), on the same prepared
    file: fio from the file itself, gdsbench from it by `run --fio-job` (its options said as flags).
    Only the file name, size (the prepared file's), runtime, ramp and seed are set for both, in a
    copy of the job both read. Alternated fio, gdsbench, ..., fio; ratios as the rows' are. A write
    job writes one file, made anew by `prepare` before every run of either tool: where a file lies
    on this disk sets its write speed (a file fio wrote once took 1.7x its own file's IOPS), so
    each run gets a fresh placement, and neither tool keeps a luckier file."""
    from gdsbench.job import fio_job
    from gdsbench.job.errors import UsageError

    sections = [args.section] if args.section else fio_job.read(args.job).sections()
    table, raw = [], {"job_file": args.job, "jobs": []}
    for section in sections:
        try:
            fio_job.translate(args.job, section)
        except UsageError as e:
            table.append([section, "-", "-", "-", "-", f"gdsbench refuses it: {e}"])
            raw["jobs"].append({"job": section, "refused": str(e)})
            continue
        options = dict(fio_job.read(args.job).items(section))
        writes = options.get("rw", options.get("readwrite", "read")) in ("write", "randwrite")
        metric = "iops" if int(gdsbench.job.units.parse_size(options.get("bs", "4k"))) < (1 << 20) else "bandwidth"
        target = os.path.join(os.path.dirname(files["disk"]), "vs_fio-job-write.dat") if writes else files["disk"]
        size = args.write_bytes if writes else os.path.getsize(target)
        copy = {k: v for k, v in options.items() if k not in ("directory", "filename", "size", "runtime",
                                                               "ramp_time", "time_based", "randseed", "randrepeat")}
        copy.update(filename=target, size=str(size), runtime=f"{round(args.runtime * 1000)}ms",
                    ramp_time=f"{round(args.ramp * 1000)}ms")

        def job_file(tool: str, seed: int, section=section, copy=copy) -> str:
            """The job as both tools read it, its seed inside: fio applies a command line's --randseed
            to no job of a job file, so every run read the same offsets, ever warmer in the host's cache."""
            path = os.path.join(os.path.dirname(files["disk"]), f"vs_fio-job-{tool}.fio")
            with open(path, "w") as f:
                f.write(f"[{section}]\n" + "".join(f"{k}\n" if v is None else f"{k}={v}\n" for k, v in copy.items())
                        + f"time_based\nrandseed={seed}\n{FIO_SEED}\n")
            return path

        def fresh(target=target, writes=writes) -> None:  # a write job's file, laid out anew for this run
            if writes:
                fresh_file(target, args.write_bytes)

        def fio_once(seed: int, job_file=job_file, writes=writes, fresh=fresh) -> dict:
            fresh()
            with counters.requests(writes) as device:
                side = fio_figures(subprocess.run([FIO, "--output-format=json", job_file("fio", seed)],
                                                  capture_output=True, text=True, check=True).stdout, writes)
            return {"bandwidth": side["bw_bytes"], "iops": side["iops"], **device}

        def gdsbench_once(seed: int, job_file=job_file, fresh=fresh, writes=writes) -> dict:
            fresh()
            with counters.requests(writes) as device:
                out = subprocess.run([sys.executable, "-m", "gdsbench", "run", "--fio-job", job_file("gdsbench", seed),
                                      "--seed", str(seed), "--json"], capture_output=True, text=True, check=True).stdout
            d = json.loads(out)
            return {"bandwidth": d["bandwidth_bytes_per_s"], "iops": d["iops"], **device}

        fio_runs, gds_runs = [fio_once(1)], []
        for i in range(args.repeats):  # fio, gdsbench, fio, ...: each gdsbench run between two fio runs
            gds_runs.append(gdsbench_once(i + 2))
            fio_runs.append(fio_once(i + 2))
        ratios = [g[metric] / ((a[metric] + b[metric]) / 2) for g, a, b in zip(gds_runs, fio_runs, fio_runs[1:])]
        mid, ci = median(ratios), median_interval(ratios)
        verdict = judge(mid, ci, 0.97)
        shown = format_rate if metric == "bandwidth" else (lambda x: f"{x:,.0f} IOPS")
        table.append([section, metric, shown(median([r[metric] for r in fio_runs])),
                      shown(median([r[metric] for r in gds_runs])), f"{mid:.3f} ({ci[0]:.3f}-{ci[1]:.3f})", verdict,
                      " / ".join(f"{median([r['device_requests'] for r in runs]):,.0f}" for runs in (fio_runs, gds_runs))])
        raw["jobs"].append({"job": section, "metric": metric, "fio": fio_runs, "gdsbench": gds_runs, "ratios": ratios,
                            "verdict": verdict})
        if writes and os.path.exists(target):
            os.remove(target)
    return table, raw


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fio", default="fio", metavar="PATH", help="the fio to run (default: fio on PATH); the uncached "
                    "rows need fio 3.39 or later")
    ap.add_argument("--runtime", type=float, default=3.0, help="seconds per measurement (default 3)")
    ap.add_argument("--ramp", type=float, default=0.5, help="seconds of ramp before each (default 0.5)")
    ap.add_argument("--repeats", type=positive_int, default=10,
                    help="gdsbench runs per row, each between two fio runs (default 10)")
    ap.add_argument("--disk-size", default="4G", help="size of the cold-read file (default 4G)")
    ap.add_argument("--rows", default="", help="only rows whose name contains this text")
    ap.add_argument("--name", default="vs_fio", help="output name under results/benchmarks/")
    ap.add_argument("--job", metavar="FILE.fio", help="instead of the rows: run each job of this fio job file in both "
                    "tools (gdsbench by `run --fio-job`)")
    ap.add_argument("--section", metavar="NAME", help="with --job: only this job of the file")
    ap.add_argument("--scratch", default=SCRATCH, metavar="DIR", help="where the files both tools read and write go "
                    "(default results/scratch); e.g. a RAM block device's filesystem, where no host cache decides "
                    "which offsets are fast")
    ap.add_argument("--write-size", default=WRITE_FILE, metavar="SIZE",
                    help=f"the file each write run writes, made anew before every run (default {WRITE_FILE})")
    ap.add_argument("--out", metavar="DIR", help="where the table goes (default results/benchmarks)")
    ap.add_argument("--quick", action="store_true", help="a smoke test of the script, not a measurement: 0.5 s runs "
                    "after a 0.1 s ramp, 2 repeats, a 256 MiB cold file and 128 MiB write file; the table goes to "
                    "results/scratch/benchmarks unless --out says otherwise")
    args = ap.parse_args()
    global FIO
    FIO = args.fio
    tool_commands = {"commands": {"fio": [FIO, "--version"]}}
    if args.quick:
        args.runtime, args.ramp, args.repeats, args.disk_size, args.write_size = 0.5, 0.1, 2, "256M", "128M"
        args.out = args.out or os.path.join(SCRATCH, "benchmarks")
    args.write_bytes = int(gdsbench.job.units.parse_size(args.write_size))
    where = {"directory": args.out} if args.out else {}

    files, counters = prepare_files(args.disk_size, args.scratch, warm=not args.job)
    if args.job:
        table, raw = job_file_rows(args, files, counters)
        md = markdown_table(["job", "metric", "fio (median)", "gdsbench (median)", "ratio gds/fio (CI)", "verdict",
                             "device requests a run, fio / gds (median)"], table)
        notes = [f"Both tools from one job file, {args.job}: fio reads it, gdsbench reads it by `run --fio-job` "
                 "(its translation of each option is gdsbench's, said on each run's stderr). Only the file name, size "
                 f"(the prepared file's), runtime ({args.runtime:g} s), ramp ({args.ramp:g} s), time_based and the "
                 f"random seed are set, the same for both; alternated fio, gdsbench, ..., fio ({args.repeats} gdsbench "
                 "runs), each ratio against the mean of the fio runs either side, the median with a distribution-free "
                 "interval; target 0.97 as for the rows. A write job writes one file, made anew by `gdsbench prepare` "
                 "before every run of either tool, so neither keeps a faster-placed file.",
                 f"Seeds: each run its own, in the job as randseed, with {FIO_SEED} for fio (without it fio 3.33 "
                 "reads the same offsets whatever randseed says, so its later runs re-read what its earlier ones "
                 "had, warm in the host's cache).",
                 "Device requests: the requests of the job's direction the disk completed during each whole run "
                 "(set-up and ramp included; /sys/block/<disk>/stat)."]
        print("\n" + md)
        paths = write_outputs(args.name, f"gdsbench vs fio from one job file ({os.path.basename(args.job)})", md,
                              notes, raw, tools=("fio",), **tool_commands, **where)
        print("\nwrote " + ", ".join(paths))
        return 0 if all(j.get("verdict", "PASS") == "PASS" for j in raw["jobs"]) else 1
    old_hugepages = reserve_hugepages(32)
    reference = run_fio_huge if old_hugepages is not None else run_fio
    try:
        table, raw = measure_rows(args, files, counters, reference)
    finally:
        if old_hugepages is not None:
            release_hugepages(old_hugepages)

    header = ["job", "metric", "fio", "gdsbench", "ratio gds/fio (CI)", "target", "p50 fio / gds",
              "p50 ratio (CI)", "p99 fio / gds", "p99 ratio", "in flight fio / gds", "verdict",
              "fio default buffers (ratio gds/it)", "device request fio / gds / fio default"]
    md = markdown_table(header, table)
    ref_name = ("fio with huge-page buffers (--mem=shmhuge)" if reference is run_fio_huge
                else "fio (no huge pages could be reserved: default buffers)")
    notes = [f"Reference: {ref_name}. Each row runs fio, gdsbench, fio, ... fio ({args.repeats} gdsbench runs, "
             f"{args.repeats + 1} fio runs), {args.runtime:g} s each after a {args.ramp:g} s ramp; each gdsbench "
             "run is divided by the mean of the fio runs either side of it, which cancels a linear drift, and the "
             "table shows the median of those ratios with a distribution-free confidence interval for it (order "
             f"statistics; {interval_label(args.repeats)} for {args.repeats} independent values). The interval "
             "is approximate: neighbouring ratios share a fio run, so they are "
             "not independent, and it covers somewhat less than stated. fio with its default malloc buffers ran "
             f"{max(1, args.repeats // 2)} times after the alternation, for information. Random rows use a new "
             "seed at each step (fio --randseed with --randrepeat=0, without which fio (3.33, at least) ignores the seed and "
             "re-reads the same offsets every run; gdsbench --seed): the tools' random orders differ, and this "
             "disk's speed depends on which blocks are read.",
             "Verdict: PASS when the median meets the target; FAIL when the whole interval misses it (a real gap); "
             "NOISE when the median misses but the interval reaches the target: this machine cannot tell.",
             "Targets: throughput ratio >= 0.97 (warm-cache 4K psync >= 1.05, null >= 1.0); p50 within 10% of fio's.",
             "Latency window: fio's clat for psync and pvsync2 rows (fio stamps a synchronous read just before the call), "
             "its lat for io_uring rows (stamped when the io_u is ready to queue); gdsbench stamps each read just before it "
             "is queued. The JSON keeps both fio windows for every run.",
             "In flight: IOPS x mean latency (Little's law), the reads each tool's latency window holds open on "
             "average; at most the queue depth. Where the disk is the limit, more in flight means the same IOPS "
             "with longer latencies, so a p50 gap at QD > 1 with equal IOPS is this count, not the clock.",
             "Device request: average size of the requests the disk completed during each tool's runs, reads for "
             "read rows and writes for write rows (/sys/block/<disk>/stat); '-' where the page cache or the null "
             "engine served everything.",
             f"Write rows: every run of either tool writes one {format_size(args.write_bytes)} file made anew by "
             "`gdsbench prepare` just before that run (gdsbench writes only into such a file; where a file lies on "
             "this disk sets its write speed, and a file fio laid out itself or had already rewritten wrote faster), "
             "with end_fsync (gdsbench's --fsync-end) inside the measured time; fio's figures are its 'write' "
             "section's.",
             "Headline: the judged rows only (ratios in bold, their verdicts, the exit status)."
             + (" A row marked 'not judged' is shown for information: quote the judged rows, not it."
                if any(not r["judged"] for r in raw["rows"]) else "")]
    notes += [n for row in ROWS if args.rows in row.name for n in row.notes]
    if any(args.rows in name for name in (f"QD32 O_DIRECT + {o[0]}" for o in IO_URING_OPTION_ROWS)):
        notes.append(HIPRI_NOTE)
    print("\n" + md)
    if raw["left_out"]:
        notes.append(f"Left out, not run, for an option this fio ({'.'.join(map(str, raw['fio_version']))}) does not "
                     f"have: {'; '.join(raw['left_out'])}. Give --fio a newer one.")
    paths = write_outputs(args.name, "gdsbench vs fio", md, notes, raw, tools=("fio",), **tool_commands, **where)
    print("\nwrote " + ", ".join(paths))
    return 0 if all(r["verdict"] == "PASS" for r in raw["rows"] if r["judged"]) else 1


def shown_verdict(row: Row, verdict: str) -> str:
    """The table's verdict cell: the rule's word, or for a row outside the headline, that it is not judged."""
    return verdict if row.judged else f"not judged (information; by the rule: {verdict})"


def measure_rows(args, files, counters, reference):
    version = fio_version(FIO)
    table, raw = [], {"rows": [], "left_out": [], "fio_version": list(version)}
    for row in ROWS:
        if args.rows not in row.name:
            continue
        if version < row.min_fio:  # an option this fio does not have: said in the notes, not run
            raw["left_out"].append(f"{row.name} (fio {'.'.join(map(str, row.min_fio))} or later)")
            continue
        fio, gds, fio_default = [], [], []

        def measure(tool, seed: int, row=row) -> dict:
            path = files.get(row.file)
            if row.file == "write":  # one file of one size, made anew before this run, whichever tool runs
                fresh_file(path, args.write_bytes)
                if tool is not run_gdsbench:
                    row = dataclasses.replace(row, fio={**row.fio, "size": args.write_bytes})
            if row.file == "warm":
                warm_up(path)
            return counters.measure(tool, row, path, args.runtime, args.ramp, seed)

        # fio, gdsbench, fio, gdsbench, ..., fio: every gdsbench run sits between
        # two fio runs and is compared with their mean, so a device or machine
        # that drifts during the row (this one does) cancels out. A new random
        # order for both tools at each step: the disk is sensitive to which
        # blocks are read, so no single order may decide a row.
        for i in range(2 * args.repeats + 1):
            tool, into = (reference, fio) if i % 2 == 0 else (run_gdsbench, gds)
            into.append(measure(tool, i // 2 + 1))
        # fio with its default buffers, for information, after the alternation (evenly
        # spaced runs are what makes the mean of two neighbours cancel a linear drift)
        fio_default += [measure(run_fio, i + 1) for i in range(max(1, args.repeats // 2))]
        m = row.metric
        per_run = {k: [g[k] / ((a[k] + b[k]) / 2) for a, g, b in zip(fio, gds, fio[1:])] for k in (m, "p50", "p99")}
        ratios = {k: median(v) for k, v in per_run.items()}
        intervals = {k: median_interval(v) for k, v in per_run.items()}
        vs_default = median([g[m] for g in gds]) / median([f[m] for f in fio_default])
        verdicts = [judge(ratios[m], intervals[m], row.min_ratio)]
        if row.compare_latency:
            verdicts.append(judge(ratios["p50"], intervals["p50"], 0.90, 1.10))
        verdict = "FAIL" if "FAIL" in verdicts else "NOISE" if "NOISE" in verdicts else "PASS"
        fmt = (lambda v: f"{v / 1e3:,.1f}k") if m == "iops" else format_rate

        def request(runs, row=row):
            sizes = [r["device_request_bytes"] for r in runs if r["device_request_bytes"]]
            return f"{median(sizes) / 1024:.0f}K" if sizes and row.file in ("disk", "write") else "-"

        def in_flight(runs):  # Little's law: reads in flight on average, as each tool's latency window counts them
            return median([r["iops"] * r["mean"] / 1e9 for r in runs])

        def ci(k, intervals=intervals):
            return f"{intervals[k][0]:.3f}-{intervals[k][1]:.3f}"

        table.append([
            row.name, m, fmt(median([f[m] for f in fio])), fmt(median([g[m] for g in gds])),
            (f"**{ratios[m]:.3f}**" if row.judged else f"{ratios[m]:.3f}") + f" ({ci(m)})",
            f">= {row.min_ratio:.2f}" + ("" if row.judged else ", not judged"),
            f"{format_duration(median([f['p50'] for f in fio]))} ({row.fio_window}) / "
            f"{format_duration(median([g['p50'] for g in gds]))}",
            f"{ratios['p50']:.3f} ({ci('p50')})" + ("" if row.compare_latency else " not judged"),
            f"{format_duration(median([f['p99'] for f in fio]))} / {format_duration(median([g['p99'] for g in gds]))}",
            f"{ratios['p99']:.3f}", f"{in_flight(fio):.1f} / {in_flight(gds):.1f}", shown_verdict(row, verdict),
            f"{fmt(median([f[m] for f in fio_default]))} ({vs_default:.3f})",
            f"{request(fio)} / {request(gds)} / {request(fio_default)}",
        ])
        raw["rows"].append({"name": row.name, "metric": m, "target_ratio": row.min_ratio, "fio": fio, "gdsbench": gds,
                            "fio_default_buffers": fio_default, "per_run_ratios": per_run, "median_ratios": ratios,
                            "median_95ci": intervals, "ratio_vs_fio_default_buffers": vs_default,
                            "judged": row.judged, "verdict": verdict if row.judged else "not judged",
                            "verdict_by_the_rule": verdict, "notes": row.notes})
        print(" | ".join(str(c) for c in table[-1]), flush=True)
    return table, raw


if __name__ == "__main__":
    sys.exit(main())
