#!/usr/bin/env python3
"""Storage into GPU memory, by every transfer mode, beside two ceilings
measured in the same run: pinned host-to-device copy bandwidth, and the
storage's own read bandwidth into host memory (the cpu mode).

For each mode it first verifies the data that landed in GPU memory, then
measures bandwidth, p50/p99 latency and CPU seconds per GB at each block
size. A mode that cannot run here is reported with the reason, not skipped
silently. Targets: bounce reaches 90% of min(storage->host, host->device) at
1 MiB and above; gds and kvikio within 5% of kvikio's own benchmark
(kvikio.benchmarks.single_node_io, which needs dask) at the same parameters:
its one CuFile.read of a 1 GiB file over a pool of threads, against
gdsbench's kvikio mode doing the same read and gds mode reading the same file
in kvikio's task size on as many threads.

The table and JSON are rewritten after every mode, so a crash or a timeout
later in the run loses nothing measured before it.

    python benchmarks/gpu_modes.py --file /data/gdsbench.dat            # on a GPU machine
    python benchmarks/gpu_modes.py --gpu-backend sim --quick            # tests this script on a CPU:
                                                                        # results are SIMULATED, not a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RESULTS, markdown_table, write_outputs  # noqa: E402

import gdsbench  # noqa: E402
from gdsbench import gpu  # noqa: E402
from gdsbench.units import format_duration, format_rate, format_size, parse_size  # noqa: E402

MODES = ["cpu", "bounce", "cached-bounce", "gds", "kvikio"]
SIZES = ["4K", "128K", "1M", "16M"]


def job(mode: str, bs: int, args) -> gdsbench.JobSpec:
    """The parameters each mode is measured with: parallel enough to keep the device busy."""
    common = dict(path=args.file, mode=mode, bs=bs, pattern="seq", runtime_ns=int(args.runtime * 1e9),
                  ramp_ns=int(args.ramp * 1e9), gpu_backend=args.gpu_backend)
    if mode == "gds":  # cuFile has no queue depth: parallelism from threads
        return gdsbench.JobSpec(threads=args.threads * args.qd, **common)
    if mode == "kvikio":
        return gdsbench.JobSpec(qd=args.qd, kvikio_threads=args.threads * 2, **common)
    return gdsbench.JobSpec(threads=args.threads, qd=args.qd, **common)


def h2d_ceiling(nbytes: int, repeats: int = 20) -> tuple[float | None, str]:
    """Pinned host -> device cudaMemcpy bandwidth (cupy), bytes/s, or None and why not."""
    try:
        import cupy

        pinned = cupy.cuda.alloc_pinned_memory(nbytes)
        dev = cupy.empty(nbytes, dtype=cupy.uint8)
        stream = cupy.cuda.Stream(non_blocking=True)
        rates = []
        for _ in range(repeats):
            start = time.perf_counter()
            cupy.cuda.runtime.memcpyAsync(dev.data.ptr, pinned.ptr, nbytes, cupy.cuda.runtime.memcpyHostToDevice,
                                          stream.ptr)
            stream.synchronize()
            rates.append(nbytes / (time.perf_counter() - start))
    except Exception as e:  # noqa: BLE001 - no cupy or no GPU: the modes still run and say why
        return None, f"not measured: {type(e).__name__}: {e}"
    return statistics.median(rates), ""


def message_row(label: str, bs: str, text: str) -> list:
    """A table row with no figures: why a mode, point or comparison has none."""
    return [label, bs, "-", "-", "-", "-", text]


KVIKIO_BENCH_BYTES = 1 << 30
KVIKIO_TASK_SIZE = 4 << 20  # kvikio's default task size
BYTE_UNITS = {"B": 1, "kiB": 1 << 10, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def kvikio_read_rate(output: str) -> float | None:
    """The mean read bandwidth (bytes/s) in single_node_io's output line
    'cufile read       |   1.23 GiB/s ± ...'; None when absent."""
    m = re.search(r"^cufile read\s*\|\s*([\d.]+)\s*([kKMGT]?i?B)/s", output, re.MULTILINE)
    return float(m.group(1)) * BYTE_UNITS[m.group(2)] if m and m.group(2) in BYTE_UNITS else None


def kvikio_comparison(args, threads: int) -> tuple[list[list], dict, list[bool]]:
    """kvikio's own benchmark, then gdsbench's kvikio and gds modes on the file
    it wrote with the same parameters; rows for the table, the raw record, and
    one verdict per comparison (False for one that could not be made).
    The benchmark's directory is made here and removed after."""
    workdir = os.path.join(os.path.dirname(os.path.abspath(args.file)), "kvikio-benchmark")
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    cmd = [sys.executable, "-m", "kvikio.benchmarks.single_node_io", "--nbytes", str(KVIKIO_BENCH_BYTES),
           "--nthreads", str(threads), "--api", "cufile", "--dir", workdir, "--nruns", "3"]
    raw: dict = {"command": " ".join(cmd)}
    try:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
        except subprocess.TimeoutExpired:
            raw["error"] = "kvikio's benchmark ran past 150 s"
            return [message_row("kvikio benchmark", "-", raw["error"])], raw, [False]
        raw.update(returncode=proc.returncode, output=proc.stdout[-4000:] + proc.stderr[-2000:])
        reference = kvikio_read_rate(proc.stdout)
        raw["reference_bytes_per_s"] = reference
        if reference is None:
            raw["error"] = f"kvikio's benchmark gave no read figure (exit {proc.returncode}); its output is in the JSON"
            return [message_row("kvikio benchmark", "-", raw["error"])], raw, [False]
        rows = [["kvikio benchmark", "1G", format_rate(reference), "-", "-", "-",
                 f"one CuFile.read of 1 GiB, {threads} threads, mean of 3, read right after kvikio wrote the file"]]
        path = os.path.join(workdir, "kvikio-single-file")
        common = dict(path=path, pattern="seq", runtime_ns=int(args.runtime * 1e9), ramp_ns=int(args.ramp * 1e9))
        # direct=False: kvikio's own settings (no O_DIRECT for its POSIX reads), as its benchmark ran
        same = {"kvikio": gdsbench.JobSpec(mode="kvikio", bs=KVIKIO_BENCH_BYTES, qd=1, kvikio_threads=threads,
                                           direct=False, **common),
                "gds": gdsbench.JobSpec(mode="gds", bs=KVIKIO_TASK_SIZE, threads=threads, **common)}
        verdicts = []
        for mode, spec in same.items():
            try:
                r = gdsbench.run(spec, record_environment=False)
            except Exception as e:  # noqa: BLE001 - reported in the table, the run goes on
                raw[mode] = {"error": str(e)}
                rows.append(message_row(f"{mode} vs kvikio benchmark", "-", f"FAILED: {e}"))
                verdicts.append(False)
                continue
            ratio = r.bandwidth / reference
            ok = ratio >= 0.95
            verdicts.append(ok)
            raw[mode] = {"summary": r.summary(), "ratio": ratio}
            rows.append([f"{mode} vs kvikio benchmark", format_size(spec.bs), format_rate(r.bandwidth),
                         format_duration(r.percentile(50)), format_duration(r.percentile(99)), f"{r.cpu_s_per_gb:.3f}",
                         f"{ratio:.3f} of kvikio's {'PASS' if ok else 'FAIL'} (target >= 0.95); "
                         f"page cache dropped first; path: {r.data_path}"])
        return rows, raw, verdicts
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", default="results/scratch/gpu_modes.dat", help="test file (prepared if absent)")
    ap.add_argument("--file-size", default="8G")
    ap.add_argument("--runtime", type=float, default=2.0)
    ap.add_argument("--ramp", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--qd", type=int, default=8)
    ap.add_argument("--gpu-backend", default="cuda", help="cuda, or sim to test this script without a GPU")
    ap.add_argument("--quick", action="store_true", help="small file, short runs, 1M only (a smoke test)")
    ap.add_argument("--out", default=RESULTS, help="directory for the table (default results/benchmarks)")
    args = ap.parse_args()
    simulated = args.gpu_backend != "cuda"
    sizes = SIZES
    if args.quick:
        args.file_size, args.runtime, args.ramp, args.threads, args.qd, sizes = "64M", 0.3, 0.0, 2, 2, ["1M"]
    os.makedirs(os.path.dirname(os.path.abspath(args.file)), exist_ok=True)
    gdsbench.prepare(args.file, parse_size(args.file_size))

    raw: dict = {"simulated": simulated, "status": gpu.status(), "modes": {}, "ceilings": {}}
    rows, verdicts = [], []
    h2d, why_not = (None, "not measured (simulated)") if simulated else h2d_ceiling(64 << 20)
    raw["ceilings"]["h2d_pinned_bytes_per_s"] = h2d
    notes = [f"pinned host->device copy (cupy, 64 MiB): {format_rate(h2d) if h2d else why_not}",
             "storage->host: the cpu rows (io_uring, O_DIRECT, same block size, threads and depth)",
             f"threads {args.threads}, queue depth {args.qd} (gds: {args.threads * args.qd} threads, "
             f"QD1; kvikio: {args.qd} preads in flight, {args.threads * 2} kvikio threads), "
             f"{args.runtime:g} s per point after a {args.ramp:g} s ramp, file {args.file_size}"]
    if simulated:
        notes.insert(0, "SIMULATED: GPU memory is a CPU stand-in; these figures measure nothing about a GPU")
    name = "gpu_modes-simulated" if simulated else "gpu_modes"
    header = ["mode", "bs", "bandwidth", "p50", "p99", "CPU-s/GB", "notes"]

    def save() -> None:  # after every mode: whatever ends this run, what it measured is on disk
        write_outputs(name, "Storage into GPU memory, by transfer mode", markdown_table(header, rows), notes, raw,
                      directory=args.out)

    storage: dict[int, float] = {}
    for mode in MODES:
        raw["modes"][mode] = {}
        try:
            # correctness first: every byte that landed where this mode puts it
            check = gdsbench.run(job(mode, 1 << 20, args).replace(verify=True, runtime_ns=None, ramp_ns=0,
                                                                     io_size=min(64 << 20, parse_size(args.file_size))),
                                 record_environment=False)
            verified = f"{check.verified_blocks} blocks, {check.verify_mismatches} bad"
        except gdsbench.GdsbenchError as e:
            raw["modes"][mode]["error"] = str(e)
            rows.append(message_row(mode, "-", f"cannot run here: {e}"))
            save()
            continue
        except Exception as e:  # noqa: BLE001 - e.g. a CUDA error: recorded, the other modes still run
            raw["modes"][mode]["error"] = f"{type(e).__name__}: {e}"
            rows.append(message_row(mode, "-", f"FAILED while verifying: {type(e).__name__}: {e}"))
            verdicts.append(False)
            save()
            continue
        for text in sizes:
            bs = parse_size(text)
            try:
                r = gdsbench.run(job(mode, bs, args), record_environment=False)
            except Exception as e:  # noqa: BLE001 - one failed point must not cost the others
                raw["modes"][mode][text] = {"error": f"{type(e).__name__}: {e}"}
                rows.append(message_row(mode, text, f"FAILED: {type(e).__name__}: {e}"))
                verdicts.append(False)
                continue
            if mode == "cpu":
                storage[bs] = r.bandwidth
            raw["modes"][mode][text] = {"summary": r.summary(), "data_path": r.data_path}
            note = ""
            if mode == "bounce" and bs >= 1 << 20 and h2d and storage.get(bs):
                ceiling = min(storage[bs], h2d)
                ok = r.bandwidth >= 0.9 * ceiling
                verdicts.append(ok)
                note = f"{r.bandwidth / ceiling:.0%} of min(storage, H2D) {'PASS' if ok else 'FAIL'}"
            rows.append([mode, text, format_rate(r.bandwidth), format_duration(r.percentile(50)),
                         format_duration(r.percentile(99)),
                         f"{r.cpu_s_per_gb:.3f}" if r.cpu_s_per_gb is not None else "-",
                         f"verified {verified}; {note}".rstrip("; ") + f"; path: {r.data_path}"])
        save()
    if not simulated:
        try:
            import kvikio.benchmarks.single_node_io  # noqa: F401 - imports dask and cupy
        except Exception as e:  # noqa: BLE001 - say why the comparison did not run
            raw["kvikio_reference"] = {"error": f"kvikio's benchmark cannot run: {type(e).__name__}: {e}"}
            rows.append(message_row("kvikio benchmark", "-", raw["kvikio_reference"]["error"]))
            verdicts.append(False)  # the gds and kvikio targets were not checked
        else:
            more, raw["kvikio_reference"], compared = kvikio_comparison(args, args.threads * 2)
            rows += more
            verdicts += compared
    save()
    print(markdown_table(header, rows) + "\n\n" + "\n".join(notes))
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
