#!/usr/bin/env python3
"""gdsbench checkpoint against DLIO's checkpoint workload, as MLPerf Storage
v2.0 runs it (dlio_benchmark's mlperf_storage_v2.0 branch, commit 295c1c7,
which mlcommons/storage v2.0 installs): the same llama3-8b, scaled to fit
this machine (2 layers, a vocabulary of 8192: 881 MiB per rank, 6.6 GiB per
checkpoint), 8 ranks, 2 checkpoints written then read back.

1. Layout: the files DLIO wrote in one checkpoint folder, by name and size,
   against `gdsbench checkpoint --dry-run`'s (DLIO's torch.save adds its zip
   framing, a few KiB a file; gdsbench rounds up to whole 4 KiB blocks).
2. Throughput, alternating DLIO and gdsbench, each time: write the checkpoints
   (DLIO: a run with num_checkpoints_read=0), drop the page cache, read them back
   (DLIO: a second run with num_checkpoints_write=0), as the submission rules
   ask. Both tools' figures are MLPerf's: a checkpoint's duration is its longest
   rank's (DLIO's per-rank stats files), its throughput the checkpoint's bytes
   over that. gdsbench runs --buffered --no-fsync, as DLIO 2.0's code writes
   (torch.save through the page cache; its fsync option never reaches the
   code). Each tool's CPU time over its runs is measured: all its processes',
   start to exit, so it includes every rank's start-up (Python and its imports,
   torch's for DLIO), the launcher (mpirun for DLIO) and both phases.

The table says these conditions beside its figures: the write figure is how
fast each tool got its bytes into the page cache, not how fast the disk
stored them.

Needs root (drop_caches) and a DLIO venv with that commit installed:

    DLIO_TF=0 bash ../shared/dlio/setup.sh /tmp/dlio-ckpt-venv
    # fetch github:argonne-lcf/dlio_benchmark, then:
    git -C <its git dir> archive 295c1c7f3f095972f5c4e8d005549b393c011b88 | tar -x -C /tmp/dlio_src
    /tmp/dlio-ckpt-venv/bin/python -m pip install --no-deps --force-reinstall /tmp/dlio_src
    .venv/bin/python benchmarks/vs_dlio_checkpoint.py --dlio-venv /tmp/dlio-ckpt-venv   # about 12 minutes
    .venv/bin/python benchmarks/vs_dlio_checkpoint.py --quick   # a smoke test: 1 layer, vocabulary 1024, 1 repeat

`--dlio 3` runs MLPerf Storage v3.0's engine instead (mlcommons/DLIO_local_changes
at cbe2001, benchmarks/dlio_v3_setup.sh's venv; table vs_dlio_checkpoint_v3). Its
checkpoint code writes each file's raw tensor bytes (no torch.save framing)
through a streaming backend: mlpstorage's StreamingCheckpointing where the
mlpstorage package is installed, else DLIO's own SimpleStreamingCheckpointing.
mlpstorage is not on PyPI: by default (--backend simple) DLIO runs the latter,
32 MiB buffered writes and an fsync at the end of each file, 32 MiB buffered
reads, and gdsbench runs the same (--buffered --bs 32M --qd 1, fsync'd,
--no-verify: that code checks nothing). --backend streaming puts the setup's
copy of mlpstorage's package on DLIO's PYTHONPATH, as a v3.0 submission runs
(random data from dgen-py through a pool of 4 shared-memory buffers, 32 MiB
writes each followed by fadvise DONTNEED, an fsync at the end; each file read
back by 4 threads, a quarter each, in 128 MiB preads), and gdsbench reads with
--read-bs 128M --read-qd 4 (table vs_dlio_checkpoint_v3_streaming); with
--uncached, gdsbench writes and reads with fio's uncached=1 (RWF_DONTCACHE) in
--buffered's place, the kernel dropping each range's pages as mlpstorage's
DONTNEED does (table vs_dlio_checkpoint_v3_streaming_uncached). Each tool's
files of one checkpoint are also cut into 32 MiB chunks and hashed: how many are
unique says how much of what it wrote a deduplicating store could skip.

    bash benchmarks/dlio_v3_setup.sh /tmp/dlio3-venv
    .venv/bin/python benchmarks/vs_dlio_checkpoint.py --dlio 3 --dlio-venv /tmp/dlio3-venv [--backend streaming [--uncached]]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import drop_caches, markdown_table, median, write_outputs  # noqa: E402

from gdsbench.checkpoint import models  # noqa: E402
from gdsbench.checkpoint.on_disk import MANIFEST  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GDSBENCH = os.path.join(os.path.dirname(sys.executable), "gdsbench")
SHAPE = {"layers": 2, "vocab": 8192}
QUICK_SHAPE = {"layers": 1, "vocab": 1024}  # --quick: 3.0 GiB a checkpoint
DLIO_VERSION = ("import importlib.metadata as m; "
                "print('dlio_benchmark', m.version('dlio_benchmark'), 'torch', m.version('torch'))")
CHECKPOINTS = 2
GIB = 1 << 30
CHUNK = 32 << 20  # DLIO 3.0's write size (both backends) and SimpleStreamingCheckpointing's read size

# DLIO's hydra configuration for llama3-8b as mlcommons/storage v2.0 gives it, written here from
# gdsbench's own model table (gdsbench/checkpoint/models.py) with the scaled shape
CONFIG = """defaults:
 - _self_
 - workload: llama3_8b
 - override hydra/job_logging: disabled
 - override hydra/hydra_logging: disabled
"""


def workload_yaml(m: models.Model) -> str:
    return f"""model:
  name: llama_8b
  type: transformer
  num_layers: {m.layers}
  model_datatype: fp16
  optimizer_datatype: fp32
  parallelism: {{pipeline: {m.pp}, tensor: {m.tp}, zero_stage: {m.zero_stage}}}
  transformer: {{vocab_size: {m.vocab}, hidden_size: {m.hidden}, ffn_hidden_size: {m.ffn_hidden},
                num_attention_heads: {m.heads}, num_kv_heads: {m.kv_heads}}}
framework: pytorch
workflow: {{generate_data: False, train: False, checkpoint: True}}
checkpoint: {{checkpoint_folder: checkpoints, time_between_checkpoints: 0, num_checkpoints_write: {CHECKPOINTS},
             num_checkpoints_read: {CHECKPOINTS}, fsync: True}}
"""


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_dlio(venv: str, config: str, folder: str, out: str, write: int, read: int, ranks: int,
             pythonpath: str = "") -> dict:
    """One DLIO run (write-only or read-only); every rank's stats, and the CPU its processes used. DLIO makes the
    data-parallel count the ranks mpirun starts; `pythonpath` (mpirun passes it on with -x) is where DLIO finds
    mlpstorage's package, if anywhere."""
    argv = [os.path.join(venv, "bin", "mpirun"), "--allow-run-as-root", "--oversubscribe", "-np", str(ranks),
            *(["-x", "PYTHONPATH"] if pythonpath else []),
            os.path.join(venv, "bin", "dlio_benchmark"), f"--config-dir={config}", "workload=llama3_8b",
            f"++workload.checkpoint.checkpoint_folder={folder}", f"++workload.checkpoint.num_checkpoints_write={write}",
            f"++workload.checkpoint.num_checkpoints_read={read}", f"++hydra.run.dir={out}"]
    cpu0 = children_cpu()
    env = dict(os.environ, DFTRACER_ENABLE="0", **({"PYTHONPATH": pythonpath} if pythonpath else {}))
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=out)
    if proc.returncode:
        sys.exit(f"DLIO failed ({proc.returncode}): {proc.stderr[-1500:]}")
    stats = []
    for r in range(ranks):
        with open(os.path.join(out, f"{r}_per_epoch_stats.json")) as f:
            stats.append(json.load(f)["1"])
    with open(os.path.join(out, "summary.json")) as f:
        size = json.load(f)["metric"]["checkpoint_size_GB"] * GIB  # DLIO's GB are GiB
    return {"ranks": stats, "bytes": size, "cpu_s": children_cpu() - cpu0}


def dlio_figures(write_run: dict, read_run: dict) -> dict[str, list[float]]:
    """MLPerf's throughput of each checkpoint, bytes/s: its bytes over its longest rank's duration."""
    out = {}
    for phase, run, key in (("write", write_run, "save_ckpt"), ("read", read_run, "load_ckpt")):
        out[phase] = [run["bytes"] / max(r[f"{key}{k}"]["duration"] for r in run["ranks"])
                      for k in range(1, CHECKPOINTS + 1)]
    return out


# gdsbench's conditions, each DLIO's. 2.0: through the page cache (torch.save and torch.load), no fsync (its
# fsync setting never reaches the code). 3.0 (SimpleStreamingCheckpointing): 32 MiB buffered writes, one fsync
# a file, 32 MiB buffered reads, nothing checked. 3.0 with mlpstorage's StreamingCheckpointing: the same writes
# (each followed by fadvise DONTNEED, which gdsbench does not do), reads 4 at once of 128 MiB.
GDSBENCH_FLAGS = {"2": ["--buffered", "--no-fsync"], "3": ["--buffered", "--bs", "32M", "--qd", "1", "--no-verify"],
                  "3-streaming": ["--buffered", "--bs", "32M", "--qd", "1", "--read-bs", "128M", "--read-qd", "4",
                                  "--no-verify"]}
# --uncached: the streaming flags with fio's uncached=1 (RWF_DONTCACHE) in --buffered's place, mlpstorage's
# DONTNEED after each write and read done by the kernel
GDSBENCH_FLAGS["3-streaming-uncached"] = ["--uncached", *GDSBENCH_FLAGS["3-streaming"][1:]]
# what each row of the table measured, said beside its figures
CONDITIONS = {
    "2": {"write": "through the page cache, no fsync (gdsbench --buffered --no-fsync, as DLIO 2.0's code writes): "
                   "not the storage's write speed",
          "read": "page cache dropped before reading; both read through it"},
    "3": {"write": "32 MiB buffered writes, each file fsync'd before its rank's time ends (gdsbench --buffered "
                   "--bs 32M --qd 1)",
          "read": "page cache dropped before reading; 32 MiB buffered reads, one at a time, unchecked (gdsbench "
                  "--no-verify)"},
    "3-streaming": {
        "write": "32 MiB buffered writes, each file fsync'd before its rank's time ends; DLIO's each followed by "
                 "fadvise DONTNEED, gdsbench's not (gdsbench --buffered --bs 32M --qd 1)",
        "read": "page cache dropped before reading; 4 buffered reads of 128 MiB at once a file, unchecked (DLIO: 4 "
                "threads a quarter each; gdsbench --read-bs 128M --read-qd 4 --no-verify)"},
    "3-streaming-uncached": {
        "write": "32 MiB buffered writes, each file fsync'd before its rank's time ends; DLIO's each followed by "
                 "fadvise DONTNEED, gdsbench's uncached (RWF_DONTCACHE: writeback started by each write, its pages "
                 "dropped once written; gdsbench --uncached --bs 32M --qd 1)",
        "read": "page cache dropped before reading; 4 reads of 128 MiB at once a file, unchecked, the pages read "
                "dropped (DLIO: 4 threads a quarter each, each read followed by DONTNEED; gdsbench uncached, "
                "--read-bs 128M --read-qd 4 --no-verify)"},
}
CPU_CONDITIONS = "all processes, start to exit: launcher, every rank's start-up, write and read runs"


def run_gdsbench(folder: str, results: str, shape: dict, flags: list[str]) -> tuple[dict[str, list[float]], float]:
    cpu0 = children_cpu()
    proc = subprocess.run([GDSBENCH, "checkpoint", folder, "--model", "llama3-8b", "--layers", str(shape["layers"]),
                           "--vocab", str(shape["vocab"]), "--dp", str(shape["dp"]), "--checkpoints", str(CHECKPOINTS), *flags,
                           "--results", results, "--json"], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"gdsbench checkpoint failed: {proc.stderr[-1500:]}")
    rows = json.loads(proc.stdout)
    return ({phase: [r["throughput_bytes_per_s"] for r in rows if r["phase"] == phase] for phase in ("write", "read")},
            children_cpu() - cpu0)


def unique_chunks(folder: str) -> dict[str, int]:
    """The files of one checkpoint folder cut into 32 MiB chunks (a file's last may be shorter), hashed: how many
    chunks, and how many distinct. What a store that deduplicates whole chunks would have to keep."""
    seen, chunks = set(), 0
    for name in sorted(set(os.listdir(folder)) - {MANIFEST}):  # the checkpoint's files, not gdsbench's manifest
        with open(os.path.join(folder, name), "rb") as f:
            while piece := f.read(CHUNK):
                seen.add(hashlib.blake2b(piece, digest_size=16).digest())
                chunks += 1
    return {"chunks": chunks, "unique": len(seen)}


def layout_rows(venv: str, config: str, work: str, model: models.Model, framing: int,
                pythonpath: str = "") -> tuple[list[list], dict[str, int]]:
    """DLIO's files of one checkpoint against gdsbench's, by name and size: DLIO's the tensor bytes plus under
    `framing` bytes (torch.save's zip framing; 3.0 writes none, framing 1); and its chunks' uniqueness."""
    folder, out = os.path.join(work, "layout"), os.path.join(work, "layout-out")
    os.makedirs(out)
    run_dlio(venv, config, folder, out, 1, 0, model.ranks, pythonpath)
    uniqueness = unique_chunks(os.path.join(folder, "global_epoch1_step1"))
    dlio = {name: os.path.getsize(os.path.join(folder, "global_epoch1_step1", name))
            for name in os.listdir(os.path.join(folder, "global_epoch1_step1"))}
    ours = {f.name: f for r in range(model.ranks) for f in models.rank_files(model, r)}
    rows = []
    for name in sorted(set(dlio) | set(ours)):
        d, g = dlio.get(name), ours.get(name)
        same = d is not None and g is not None and 0 <= d - g.tensor_bytes < framing
        rows.append([name, d if d is not None else "missing", g.tensor_bytes if g else "missing", g.size if g else "-",
                     f"{d - g.tensor_bytes:+,}" if d is not None and g else "-", "SAME" if same else "DIFFERENT"])
    shutil.rmtree(folder)
    return rows, uniqueness


READ_COST_BYTES = 2 * GIB


def read_costs(work: str, size: int = READ_COST_BYTES, repeats: int = 3) -> dict[str, list[dict]]:
    """What reading a file in 32 MiB pieces costs in Python two ways, alternated, each after the page cache is
    dropped: DLIO 3.0's `f.read(n)`, a new bytes object each time (above glibc's largest mmap threshold, so each
    is mapped, faulted in, zeroed and unmapped), and `readv` into one buffer reused, as a native reader reads.
    Wall seconds and this process's CPU seconds, each run."""
    path = os.path.join(work, "read-cost.dat")
    block = os.urandom(CHUNK)
    with open(path, "wb") as f:
        for _ in range(size // CHUNK):
            f.write(block)
        os.fsync(f.fileno())

    def new_objects() -> None:
        with open(path, "rb") as f:
            while f.read(CHUNK):
                pass

    def one_buffer() -> None:
        buf, fd = bytearray(CHUNK), os.open(path, os.O_RDONLY)
        try:
            while os.readv(fd, [buf]):
                pass
        finally:
            os.close(fd)

    out = {"f.read (new object each read)": [], "readv into one buffer": []}
    for _ in range(repeats):
        for name, read in zip(out, (new_objects, one_buffer)):
            drop_caches()
            t0, c0 = time.perf_counter(), time.process_time()
            read()
            out[name].append({"seconds": time.perf_counter() - t0, "cpu_s": time.process_time() - c0})
    os.unlink(path)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dlio", choices=("2", "3"), default="2", help="DLIO 2.0 (MLPerf Storage v2.0's engine) or "
                    "3.0 (v3.0's fork, cbe2001); table vs_dlio_checkpoint or vs_dlio_checkpoint_v3")
    ap.add_argument("--dlio-venv", help="the DLIO venv (default /tmp/dlio-ckpt-venv; /tmp/dlio3-venv with --dlio 3)")
    ap.add_argument("--backend", choices=("simple", "streaming"), default="simple",
                    help="with --dlio 3: DLIO's own SimpleStreamingCheckpointing (mlpstorage absent), or mlpstorage's "
                         "StreamingCheckpointing, as a v3.0 submission runs (the setup's DLIO_VENV/mlpstorage on "
                         "DLIO's PYTHONPATH; table vs_dlio_checkpoint_v3_streaming)")
    ap.add_argument("--uncached", action="store_true", help="with --backend streaming: gdsbench writes and reads "
                    "with --uncached (RWF_DONTCACHE) instead of --buffered, dropping each range's pages as "
                    "mlpstorage's DONTNEED does (table vs_dlio_checkpoint_v3_streaming_uncached)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=8, help="ranks, each tool's data-parallel count (default 8, "
                    "llama3-8b's); the checkpoint's bytes stay the same, split among them (table name -ranksN)")
    ap.add_argument("--work", default=os.path.join(ROOT, "results", "scratch", "vs_dlio_checkpoint"))
    ap.add_argument("--out", metavar="DIR", help="where the table goes (default results/benchmarks)")
    ap.add_argument("--quick", action="store_true", help="a smoke test, not a measurement: 1 layer, a vocabulary "
                    "of 1024, 1 repeat; the table goes to results/scratch/benchmarks unless --out says otherwise")
    args = ap.parse_args()
    args.dlio_venv = args.dlio_venv or ("/tmp/dlio3-venv" if args.dlio == "3" else "/tmp/dlio-ckpt-venv")
    if args.backend == "streaming" and args.dlio != "3":
        sys.exit("--backend streaming: mlpstorage's StreamingCheckpointing is DLIO 3.0's; add --dlio 3")
    if args.uncached and args.backend != "streaming":
        sys.exit("--uncached: compares gdsbench's uncached I/O with mlpstorage's DONTNEED; add --dlio 3 --backend "
                 "streaming")
    streaming = args.backend == "streaming"
    variant = ("3-streaming" + ("-uncached" if args.uncached else "")) if streaming else args.dlio
    pythonpath = os.path.join(args.dlio_venv, "mlpstorage") if streaming else ""
    if streaming and not os.path.isfile(os.path.join(pythonpath, ".commit")):
        sys.exit(f"--backend streaming: no mlpstorage package at {pythonpath}; run `bash benchmarks/dlio_v3_setup.sh "
                 f"{args.dlio_venv}` (it needs the fork's mirror: fetch github:russfellows/mlc-storage)")
    flags, framing = GDSBENCH_FLAGS[variant], 64 * 1024 if args.dlio == "2" else 1
    shape = dict(QUICK_SHAPE if args.quick else SHAPE, dp=args.ranks)
    if args.quick:
        args.repeats = 1
        args.out = args.out or os.path.join(ROOT, "results", "scratch", "benchmarks")
    model = models.load("llama3-8b", shape)
    shutil.rmtree(args.work, ignore_errors=True)
    config = os.path.join(args.work, "config")
    os.makedirs(os.path.join(config, "workload"))
    with open(os.path.join(config, "config.yaml"), "w") as f:
        f.write(CONFIG)
    with open(os.path.join(config, "workload", "llama3_8b.yaml"), "w") as f:
        f.write(workload_yaml(model))
    layout, dlio_chunks = layout_rows(args.dlio_venv, config, args.work, model, framing, pythonpath)
    if streaming and dlio_chunks["unique"] <= 2:  # zeros: DLIO fell back to its own backend on an ImportError
        sys.exit(f"--backend streaming: DLIO wrote {dlio_chunks['unique']} distinct 32 MiB chunks, zeros: it fell back "
                 f"to SimpleStreamingCheckpointing (mlpstorage_py at {pythonpath} did not import in its ranks)")
    chunks = {"dlio": dlio_chunks}
    runs = {"dlio": [], "gdsbench": []}
    for i in range(args.repeats):  # D G D G ...: drift falls on both alike
        folder = tempfile.mkdtemp(dir=args.work)
        out_w, out_r = (os.path.join(args.work, f"dlio-{i}-{p}") for p in ("write", "read"))
        os.makedirs(out_w)
        os.makedirs(out_r)
        drop_caches()
        w = run_dlio(args.dlio_venv, config, folder, out_w, CHECKPOINTS, 0, model.ranks, pythonpath)
        drop_caches()
        r = run_dlio(args.dlio_venv, config, folder, out_r, 0, CHECKPOINTS, model.ranks, pythonpath)
        runs["dlio"].append({"throughput": dlio_figures(w, r), "cpu_s": w["cpu_s"] + r["cpu_s"]})
        shutil.rmtree(folder)
        drop_caches()
        figures, cpu = run_gdsbench(os.path.join(args.work, f"gdsbench-{i}"), os.path.join(args.work, "runs"), shape,
                                    flags)
        runs["gdsbench"].append({"throughput": figures, "cpu_s": cpu})
        if "gdsbench" not in chunks:  # after its timed runs: hashing reads the files back
            chunks["gdsbench"] = unique_chunks(os.path.join(args.work, f"gdsbench-{i}", "global_epoch1_step1"))
        shutil.rmtree(os.path.join(args.work, f"gdsbench-{i}"))
        print(f"repeat {i + 1}: DLIO {runs['dlio'][-1]}, gdsbench {runs['gdsbench'][-1]}", flush=True)
    header, rows, cpu = table(runs, CONDITIONS[variant])
    costs = read_costs(args.work) if variant == "3" else {}  # SimpleStreamingCheckpointing's f.read
    same = sum(1 for r in layout if r[-1] == "SAME")
    checkpoint_gib = sum(f.size for r in range(model.ranks) for f in models.rank_files(model, r)) / GIB
    layers = f"{shape['layers']} layer" + ("s" if shape["layers"] != 1 else "")
    conditions = {
        "2": f"gdsbench ran `{' '.join(flags)}`, as DLIO 2.0's code writes: through the page cache (torch.save) and "
             "without fsync (its checkpoint.fsync setting never reaches the code). So the write figures are how fast "
             "each tool handed its bytes to the page cache, not how fast the disk stored them: neither is the "
             "storage's write speed.",
        "3": f"gdsbench ran `{' '.join(flags)}`, as DLIO 3.0's SimpleStreamingCheckpointing (the backend DLIO at "
             "cbe2001 uses where mlpstorage is not installed, as here: mlpstorage is not on PyPI) moves each file: "
             "32 MiB buffered writes (zeros) and one fsync before the file is closed, inside the rank's time; 32 MiB "
             "buffered reads, one at a time, the bytes not checked. mlpstorage's StreamingCheckpointing, which an "
             "MLPerf v3.0 submission runs, differs (incompressible data, fadvise DONTNEED after each 32 MiB write, "
             "4 reader threads per file each reading a quarter in 128 MiB preads): `--backend streaming` compares "
             "it (table vs_dlio_checkpoint_v3_streaming).",
        "3-streaming": f"gdsbench ran `{' '.join(flags)}`, as DLIO 3.0 moves each file through mlpstorage's "
             "StreamingCheckpointing (mlpstorage_py at the setup's commit, on DLIO's PYTHONPATH), what an MLPerf "
             "v3.0 submission runs: random data from dgen-py through a pool of 4 shared-memory buffers, 32 MiB "
             "buffered writes each followed by fadvise DONTNEED (" + ("gdsbench's --uncached has the kernel start "
             "each write's writeback and drop its pages: RWF_DONTCACHE, fio's uncached=1" if args.uncached else
             "gdsbench has no such call here: its pages stay until the fsync") + "), one fsync before the file is "
             "closed, inside the rank's time; reads: 4 threads a file, each a quarter of it in 128 MiB preads after "
             "fadvise RANDOM, each followed by DONTNEED (gdsbench: 4 reads of 128 MiB in flight in order through "
             "io_uring, readahead left on" + (", the pages read dropped (uncached)" if args.uncached else "")
             + "), the bytes not checked."}[variant.removesuffix("-uncached")]
    sizes = {"2": "within torch.save's zip framing (under 64 KiB) of gdsbench's tensor bytes",
             "3": "equal to gdsbench's tensor bytes (3.0 writes raw bytes, no framing)"}[args.dlio]
    notes = [f"Conditions: llama3-8b scaled to {layers} and a vocabulary of {shape['vocab']} "
             f"({checkpoint_gib:.2f} GiB a checkpoint), {model.ranks} ranks, {CHECKPOINTS} checkpoints written then read back. "
             + conditions,
             f"Layout: {same} of {len(layout)} files of one checkpoint are DLIO's by name, with DLIO's size {sizes}:"
             "\n\n"
             + markdown_table(["file", "DLIO on disk", "gdsbench tensor bytes", "gdsbench writes", "DLIO - tensor bytes",
                               ""], layout),
             f"Throughput: medians over {args.repeats} alternating repeats x {CHECKPOINTS} checkpoints, each figure "
             "MLPerf's (a checkpoint's bytes over its longest rank's duration); the ratio is the median of the "
             "figures' ratios paired by repeat and checkpoint. Page cache dropped before each write "
             "and each read.",
             f"CPU: DLIO's processes used {cpu['dlio']:.0f} CPU-s for its write and read runs, gdsbench's "
             f"{cpu['gdsbench']:.0f} CPU-s, median per repeat (this machine has {os.cpu_count()} cores for {model.ranks} ranks). "
             "Each is every process of the tool's runs, start to exit: the launcher (mpirun for DLIO), every rank's "
             "start-up (Python and its imports, torch's for DLIO; DLIO starts its ranks twice, once to write and "
             "once to read), and both phases; not the reads' and writes' CPU alone.",
             "Data: each tool's files of one checkpoint cut into 32 MiB chunks (a file's last one shorter) and "
             "hashed (BLAKE2b), after the timed runs: "
             + "; ".join(f"{tool} {c['unique']} of {c['chunks']} chunks unique" for tool, c in chunks.items())
             + ". A store that deduplicates whole chunks keeps only the unique ones: where a tool's are fewer, the "
             "storage had less to store than the bytes its figure counts."]
    if args.dlio == "2":
        notes += ["Why writes can differ: DLIO's ranks torch.save their tensors, which pickles them and computes the zip "
             "format's CRC-32 over every byte on the CPU; gdsbench's ranks write the bytes with pwrite from a native "
             "loop. With more ranks than cores, DLIO's writes are held by that CPU work, not by the disk."]
    if costs:
        cost_rows = [[name, f"{READ_COST_BYTES / median([r['seconds'] for r in runs_]) / 2**20:,.0f} MiB/s",
                      f"{median([r['cpu_s'] for r in runs_]):.2f}"] for name, runs_ in costs.items()]
        notes += ["Why reads can differ: DLIO 3.0's reader calls `f.read(32 MiB)`, which makes a new bytes object each "
                  "time: larger than glibc's largest mmap threshold, each is mapped, its pages faulted in and zeroed, "
                  "and unmapped when dropped. gdsbench reads into buffers it keeps. The same two ways in one Python "
                  f"process, a 2 GiB file read in 32 MiB pieces, page cache dropped before each, {len(costs[next(iter(costs))])} "
                  "alternated runs, medians:\n\n" + markdown_table(["how", "read", "CPU-s"], cost_rows)]
    name = ("vs_dlio_checkpoint" + ("_v3" if args.dlio == "3" else "") + ("_streaming" if streaming else "")
            + ("_uncached" if args.uncached else "")
            + (f"-ranks{args.ranks}" if args.ranks != 8 else ""))
    md, _ = write_outputs(name, f"gdsbench checkpoint against DLIO {args.dlio}.0's checkpoint workload"
                          + (" through mlpstorage's StreamingCheckpointing" if streaming else ""),
                          markdown_table(header, rows), notes,
                          {"layout": layout, "runs": runs, "cpu_s": cpu, "shape": shape, "read_costs": costs,
                           "gdsbench_flags": flags, "backend": args.backend, "chunks": chunks,
                           **({"mlpstorage_commit": open(os.path.join(pythonpath, ".commit")).read().strip()}
                              if streaming else {})}, tools=("dlio", "mpi"),
                          commands={"dlio": [f"{args.dlio_venv}/bin/python", "-c", DLIO_VERSION],
                                    "mpi": [f"{args.dlio_venv}/bin/mpirun", "--version"]},
                          **({"directory": args.out} if args.out else {}))
    print(markdown_table(header, rows))
    print(f"wrote {md}")
    return 0


def table(runs: dict, conditions: dict[str, str]) -> tuple[list[str], list[list], dict]:
    """The table: each phase's median throughput in both tools, and the median of the ratios of figures paired by
    repeat and checkpoint (checkpoint k of one repeat against checkpoint k of the same repeat: the storage's speed
    can differ from the first checkpoint to the next alike for both), with their range and conditions; and a CPU
    row."""
    rows = []
    for phase in ("write", "read"):
        d = median([t for run in runs["dlio"] for t in run["throughput"][phase]])
        g = median([t for run in runs["gdsbench"] for t in run["throughput"][phase]])
        ratios = [gt / dt for dr, gr in zip(runs["dlio"], runs["gdsbench"])
                  for dt, gt in zip(dr["throughput"][phase], gr["throughput"][phase])]
        ratio = median(ratios)
        rows.append([phase, f"{d / GIB:.3f} GiB/s", f"{g / GIB:.3f} GiB/s",
                     f"{ratio:.2f} ({min(ratios):.2f}-{max(ratios):.2f})", conditions[phase],
                     "within 10%" if abs(ratio - 1) <= 0.10 else "DIFFERENT (see the notes)"])
    cpu = {t: median([run["cpu_s"] for run in runs[t]]) for t in runs}
    rows.append(["CPU-s per repeat", f"{cpu['dlio']:.0f}", f"{cpu['gdsbench']:.0f}",
                 f"{cpu['gdsbench'] / cpu['dlio']:.2f}", CPU_CONDITIONS, "information"])
    return ["phase", "DLIO", "gdsbench", "gdsbench / DLIO (range)", "conditions", ""], rows, cpu


if __name__ == "__main__":
    sys.exit(main())
