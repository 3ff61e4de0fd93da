#!/usr/bin/env python3
"""Storage into GPU memory, by every transfer mode, beside two ceilings
measured in the same run: pinned host-to-device copy bandwidth, and the
storage's own read bandwidth into host memory (the cpu mode).

For each mode it first verifies the data that landed in GPU memory, then
measures bandwidth, p50/p99 latency and CPU seconds per GB at each block
size. A mode that cannot run here is reported with the reason, not skipped
silently. Targets: bounce reaches 90% of min(storage->host, host->device) at
1 MiB and above; gds and kvikio within 5% of kvikio's own benchmark (run when
kvikio ships it).

    python benchmarks/gpu_modes.py --file /data/gdsbench.dat            # on a GPU machine
    python benchmarks/gpu_modes.py --gpu-backend sim --quick            # tests this script on a CPU:
                                                                        # results are SIMULATED, not a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, write_outputs  # noqa: E402

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


def h2d_ceiling(nbytes: int, repeats: int = 20) -> float | None:
    """Pinned host -> device cudaMemcpy bandwidth (cupy), bytes/s; None without a GPU."""
    try:
        import cupy
    except ImportError:
        return None
    pinned = cupy.cuda.alloc_pinned_memory(nbytes)
    dev = cupy.empty(nbytes, dtype=cupy.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        cupy.cuda.runtime.memcpyAsync(dev.data.ptr, pinned.ptr, nbytes, cupy.cuda.runtime.memcpyHostToDevice, stream.ptr)
        stream.synchronize()
        rates.append(nbytes / (time.perf_counter() - start))
    return statistics.median(rates)


def kvikio_reference(path: str, nbytes: int, threads: int) -> dict | None:
    """kvikio's own single-node benchmark on the same file size and threads, if kvikio ships it."""
    try:
        import kvikio.benchmarks.single_node_io  # noqa: F401
    except ImportError:
        return None
    cmd = [sys.executable, "-m", "kvikio.benchmarks.single_node_io", "--nbytes", str(nbytes), "--nthreads",
           str(threads), "--api", "cufile", "--dir", os.path.dirname(os.path.abspath(path)), "--nruns", "3"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    return {"command": " ".join(cmd), "returncode": proc.returncode, "output": proc.stdout[-4000:] + proc.stderr[-2000:]}


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
    ap.add_argument("--out", default=None, help="directory for the table (default results/benchmarks)")
    args = ap.parse_args()
    simulated = args.gpu_backend != "cuda"
    sizes = SIZES
    if args.quick:
        args.file_size, args.runtime, args.ramp, args.threads, args.qd, sizes = "64M", 0.3, 0.0, 2, 2, ["1M"]
    os.makedirs(os.path.dirname(os.path.abspath(args.file)), exist_ok=True)
    gdsbench.prepare(args.file, parse_size(args.file_size))

    status = gpu.status()
    raw: dict = {"simulated": simulated, "status": status, "modes": {}, "ceilings": {}}
    rows, verdicts = [], []
    h2d = None if simulated else h2d_ceiling(64 << 20)
    raw["ceilings"]["h2d_pinned_bytes_per_s"] = h2d
    storage: dict[int, float] = {}
    for mode in MODES:
        raw["modes"][mode] = {}
        try:  # correctness first: every byte that landed where this mode puts it
            check = gdsbench.run(job(mode, 1 << 20, args).replace(verify=True, runtime_ns=None, ramp_ns=0,
                                                                     io_size=min(64 << 20, parse_size(args.file_size))),
                                 record_environment=False)
            verified = f"{check.verified_blocks} blocks, {check.verify_mismatches} bad"
        except gdsbench.GdsbenchError as e:
            raw["modes"][mode]["error"] = str(e)
            rows.append([mode, "-", "-", "-", "-", "-", f"cannot run here: {e}"])
            continue
        for text in sizes:
            bs = parse_size(text)
            r = gdsbench.run(job(mode, bs, args), record_environment=False)
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
    if not simulated and "error" not in raw["modes"].get("kvikio", {}):
        raw["kvikio_reference"] = kvikio_reference(args.file, parse_size(args.file_size), args.threads * 2)
    table = markdown_table(["mode", "bs", "bandwidth", "p50", "p99", "CPU-s/GB", "notes"], rows)
    ceilings = [f"pinned host->device copy (cupy, 64 MiB): {format_rate(h2d) if h2d else 'not measured (no cupy/GPU)'}",
                "storage->host: the cpu rows (io_uring, O_DIRECT, same block size, threads and depth)"]
    notes = ceilings + [f"threads {args.threads}, queue depth {args.qd} (gds: {args.threads * args.qd} threads, "
                        f"QD1; kvikio: {args.qd} preads in flight, {args.threads * 2} kvikio threads), "
                        f"{args.runtime:g} s per point after a {args.ramp:g} s ramp, file {args.file_size}"]
    if simulated:
        notes.insert(0, "SIMULATED: GPU memory is a CPU stand-in; these figures measure nothing about a GPU")
    print(table + "\n\n" + "\n".join(notes))
    name = "gpu_modes-simulated" if simulated else "gpu_modes"
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, f"{name}.md"), "w") as f:
            f.write(table + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n")
        with open(os.path.join(args.out, f"{name}.json"), "w") as f:
            json.dump(raw, f, indent=1, default=str)
    else:
        write_outputs(name, "Storage into GPU memory, by transfer mode", table, notes, raw)
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
