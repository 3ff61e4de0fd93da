"""Datasets in a workload's shape: files of samples whose sizes are drawn as
DLIO draws them, written with gdsbench's verifiable pattern, and a manifest
(gdsbench-dataset.json) that says where every sample is. A directory without
a manifest (one DLIO generated, say) is read as it is: every file one sample.

Sample sizes follow DLIO's generator: a sample is d1 x d2 bytes, each
dimension drawn from a normal distribution of mean sqrt(record_bytes) and
standard deviation record_stdev / (2 sqrt(record_bytes)) (so the sizes' own
spread is about record_stdev / sqrt(2)). gdsbench rounds each up to whole
4 KiB blocks, the unit of O_DIRECT and of its pattern.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np

from gdsbench.job.errors import GdsbenchError, UsageError
from gdsbench.job.units import format_size
from gdsbench.system.environment import meminfo
from gdsbench.system.pattern import has_pattern
from gdsbench.system.prepare import BLOCK, prepare
from gdsbench.train.workloads import Workload

MANIFEST = "gdsbench-dataset.json"
TFRECORD = ".tfrecord"  # DLIO's TFRecord files, img_N_of_M.tfrecord
INDEX_SUFFIX = ".idx"  # DLIO's per-file record index (DALI's tfrecord2idx), under DATA/index/train/
SHAPE = ("files", "samples_per_file", "record_bytes", "record_stdev", "seed")  # the workload fields a dataset is made of
CACHE_FACTOR = 5  # MLPerf Storage: a dataset at least 5x the client's memory, so the page cache cannot hold it


def record_sizes(workload: Workload, count: int) -> np.ndarray:
    """`count` sample sizes in bytes, drawn as DLIO's generator draws them, rounded up to 4 KiB."""
    rng = np.random.default_rng(workload.seed)
    mean = math.sqrt(workload.record_bytes)
    if workload.record_stdev > 0:
        dims = np.maximum(rng.normal(mean, workload.record_stdev / 2 / mean, 2 * count).astype(np.int64), 1)
    else:
        dims = np.full(2 * count, int(mean), dtype=np.int64)
    sizes = dims[0::2] * dims[1::2]
    return (sizes + BLOCK - 1) // BLOCK * BLOCK


@dataclass
class Dataset:
    """Every sample: the file it is in (an index into paths), its offset and its length."""

    directory: str
    paths: list[str]
    file_index: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    patterned: bool  # written by gdsbench prepare: --verify can check it
    note: str = ""  # how it was read (a manifest, or a plain directory)
    workload: dict | None = None  # the workload its manifest says it was prepared for

    @property
    def samples(self) -> int:
        return len(self.length)

    @property
    def total_bytes(self) -> int:
        return int(self.length.sum())

    def sample(self, i: int) -> tuple[str, int, int]:
        return self.paths[self.file_index[i]], int(self.offset[i]), int(self.length[i])

    def describe(self) -> dict:
        return {"directory": self.directory, "files": len(self.paths), "samples": self.samples,
                "bytes": self.total_bytes, "mean_sample_bytes": float(self.length.mean()) if self.samples else 0.0,
                "stdev_sample_bytes": float(self.length.std()) if self.samples else 0.0, "patterned": self.patterned,
                "note": self.note}


def _file_name(workload: Workload, i: int) -> str:
    return f"{workload.name}_{i:0{len(str(workload.files - 1))}d}.dat"


@dataclass(frozen=True)
class Plan:
    """What prepare_dataset will write: the workload's files, and how much of it is already there."""

    workload: Workload
    directory: str
    sizes: np.ndarray  # files x samples_per_file, bytes
    present: int  # bytes of files already complete (kept)

    @property
    def total(self) -> int:
        return int(self.sizes.sum())

    def describe(self) -> str:
        w, sizes = self.workload, self.sizes
        left = f"; {format_size(self.present)} of it already there, {format_size(self.total - self.present)} to write" \
            if self.present else ""
        return (f"{self.directory}: {w.files} files x {w.samples_per_file} samples of {format_size(sizes.mean())} "
                f"(sd {format_size(sizes.std())}), {format_size(self.total)} in all{left}")


def _read_manifest(path: str) -> dict:
    """A manifest as written by prepare_dataset, checked: UsageError naming what is wrong."""
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: not a gdsbench dataset manifest ({e}); prepare the dataset again") from None
    problem = None
    files = record.get("files") if isinstance(record, dict) else None
    if not isinstance(record, dict) or not isinstance(record.get("workload"), dict):
        problem = "no workload"
    elif not isinstance(files, list) or not files:
        problem = "no files listed"
    else:
        for entry in files:
            ok = isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and _safe_name(entry[0]) \
                and isinstance(entry[1], list) and entry[1] \
                and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in entry[1])
            if not ok:
                problem = f"file entry {str(entry)[:60]} is not [name, [sample sizes]]"
                break
    if problem:
        raise UsageError(f"{path}: not a gdsbench dataset manifest ({problem}); prepare the dataset again")
    return record


def _safe_name(name: str) -> bool:
    """A file name inside the dataset's directory: one path component, not hidden."""
    return bool(name) and name == os.path.basename(name) and not name.startswith(".")


def plan_dataset(workload: Workload, directory: str) -> Plan:
    """Check that `directory` may hold this workload's dataset, and what is there already."""
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise UsageError(f"PATH {directory}: not a directory; give a directory for the dataset (a new one, or one "
                         "`gdsbench prepare --workload` wrote)")
    manifest = os.path.join(directory, MANIFEST)
    if os.path.exists(manifest):
        before = _read_manifest(manifest)["workload"]
        if any(before.get(k) != getattr(workload, k) for k in ("name",) + SHAPE):
            raise UsageError(f"{directory}: holds a dataset of another shape ({before.get('name')}: "
                             + ", ".join(f"{k} {before.get(k)}" for k in SHAPE) + f", see {MANIFEST}); give another "
                             "directory")
    sizes = record_sizes(workload, workload.samples).reshape(workload.files, workload.samples_per_file)
    present = 0
    for i, row in enumerate(sizes):
        path = os.path.join(directory, _file_name(workload, i))
        if os.path.isfile(path) and os.path.getsize(path) == int(row.sum()) and has_pattern(path, int(row.sum()) - BLOCK):
            present += int(row.sum())
    return Plan(workload, directory, sizes, present)


def _write_manifest(plan: Plan, complete: bool, files_done: int) -> None:
    w = plan.workload
    record = {"gdsbench_dataset": 1, "complete": complete, "files_written": files_done, "workload": w.to_dict(),
              "bytes": plan.total, "files": [[_file_name(w, i), row.tolist()] for i, row in enumerate(plan.sizes)]}
    manifest = os.path.join(plan.directory, MANIFEST)
    tmp = f"{manifest}.partial-{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(record, f)
        os.replace(tmp, manifest)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise UsageError(f"PATH {plan.directory}: cannot write the dataset's manifest: {e.strerror}; choose a "
                         "directory gdsbench may write in") from None


def prepare_dataset(plan: Plan, progress=None) -> Dataset:
    """Write a planned dataset: its manifest first (marked incomplete), then every file
    (those already complete are kept), then the manifest again, complete. A prepare
    that stops (no space, Ctrl-C) leaves a dataset that says it is incomplete, and the
    same command finishes it. Only files gdsbench made are ever rewritten (system/prepare.py)."""
    free = _free_bytes(plan.directory)
    need = plan.total - plan.present
    if free is not None and need > free:
        raise UsageError(f"--workload {plan.workload.name}: the dataset needs {format_size(need)} more"
                         f"{' (of ' + format_size(plan.total) + ')' if plan.present else ''}, only {format_size(free)} "
                         f"free in {plan.directory}; use --files to make it smaller")
    try:
        os.makedirs(plan.directory, exist_ok=True)
    except OSError as e:
        raise UsageError(f"PATH {plan.directory}: cannot create the directory: {e.strerror}") from None
    _write_manifest(plan, complete=False, files_done=0)
    done = 0
    for i, row in enumerate(plan.sizes):
        path = os.path.join(plan.directory, _file_name(plan.workload, i))
        try:
            prepare(path, int(row.sum()), seed=plan.workload.seed, size_flag=f"file {os.path.basename(path)}")
        except GdsbenchError as e:
            _write_manifest(plan, complete=False, files_done=i)
            raise type(e)(f"{plan.directory}: the dataset stopped after {i} of {plan.workload.files} files ({e}); "
                          "it is marked incomplete: fix that and run the same prepare again to finish it") from None
        done += int(row.sum())
        if progress:
            progress(done, plan.total)
    _write_manifest(plan, complete=True, files_done=plan.workload.files)
    return open_dataset(plan.directory)


def _free_bytes(directory: str) -> int | None:
    """Free bytes where the dataset will be written (its nearest existing parent)."""
    here = os.path.abspath(directory)
    while not os.path.exists(here):
        here = os.path.dirname(here)
    try:
        vfs = os.statvfs(here)
    except OSError:
        return None
    if vfs.f_blocks == 0:  # no blocks at all (procfs, sysfs): nothing can be written, and creating says so
        return None
    return vfs.f_bavail * vfs.f_frsize


def open_dataset(directory: str, fmt: str | None = None) -> Dataset:
    """The samples of a prepared dataset (its manifest); of a folder of TFRecord files, as DLIO
    generates them (every record a sample, from DLIO's index files or the records' own framing);
    or of any other directory (every file one sample, as DLIO's npz). `fmt`, the workload's
    format, refuses a folder whose files do not fit it."""
    if not os.path.isdir(directory):
        raise UsageError(f"PATH {directory}: not a directory; give the dataset's directory (make one with "
                         "`gdsbench prepare --workload unet3d NEW_DIR`)")
    manifest = os.path.join(directory, MANIFEST)
    if os.path.exists(manifest):
        record = _read_manifest(manifest)
        files, workload = record["files"], record["workload"]
        if record.get("complete") is False:  # absent: a manifest from before prepare wrote it first, always complete
            raise UsageError(f"{directory}: an incomplete dataset (prepare stopped after {record.get('files_written', '?')} "
                             f"of {len(files)} files); finish it with the same `gdsbench prepare --workload "
                             f"{workload.get('name')} {directory}` command")
        paths = [os.path.join(directory, name) for name, _ in files]
        lengths = [np.asarray(sizes, dtype=np.int64) for _, sizes in files]
        file_index = np.concatenate([np.full(len(x), i, dtype=np.int64) for i, x in enumerate(lengths)])
        offset = np.concatenate([np.cumsum(x) - x for x in lengths])
        length = np.concatenate(lengths)
        for path, x in zip(paths, lengths):  # a file that is missing or short fails here, not mid-run
            if not os.path.isfile(path) or os.path.getsize(path) < int(x.sum()):
                raise UsageError(f"{path}: missing or shorter than {MANIFEST} says; prepare the dataset again")
        return Dataset(directory, paths, file_index, offset, length, patterned=True,
                       note=f"{MANIFEST}: workload {workload.get('name')}", workload=workload)
    paths = sorted(os.path.join(root, name) for root, _, names in os.walk(directory) for name in names
                   if os.path.isfile(os.path.join(root, name)) and not name.endswith(INDEX_SUFFIX))
    paths = [p for p in paths if os.path.getsize(p) > 0]
    if not paths:
        raise UsageError(f"PATH {directory}: no files in it; make a dataset with "
                         f"`gdsbench prepare --workload unet3d {directory}`")
    records = [p for p in paths if p.endswith(TFRECORD)]
    if fmt == "tfrecord" and not records:
        raise UsageError(f"PATH {directory}: no {TFRECORD} files in it, and the workload reads TFRecord: give the "
                         f"folder DLIO generated for it (its train/ files), or make one with `gdsbench prepare "
                         f"--workload WORKLOAD NEW_DIR`")
    if records:
        if fmt not in (None, "tfrecord"):
            raise UsageError(f"PATH {directory}: holds {TFRECORD} files, and the workload reads {fmt}: use a "
                             "TFRecord workload (resnet50, cosmoflow, or --format tfrecord)")
        return _tfrecord_dataset(directory, records)
    length = np.array([os.path.getsize(p) for p in paths], dtype=np.int64)
    patterned = has_pattern(paths[0], 0)
    note = "no manifest: every file is one sample, read whole (as DLIO reads npz files)"
    if patterned:
        note += ("; its files carry gdsbench's pattern but no manifest says what they are: if a `prepare --workload` "
                 "did not finish here, run it again")
    return Dataset(directory, paths, np.arange(len(paths)), np.zeros(len(paths), dtype=np.int64), length,
                   patterned=patterned, note=note)


def _tfrecord_dataset(directory: str, paths: list[str]) -> Dataset:
    """Every record of every TFRecord file a sample."""
    files, offsets, lengths, indexed = [], [], [], 0
    for i, path in enumerate(paths):
        found, from_index = tfrecord_records(path)
        indexed += from_index
        files.append(np.full(len(found), i, dtype=np.int64))
        offsets.append(np.array([o for o, _ in found], dtype=np.int64))
        lengths.append(np.array([n for _, n in found], dtype=np.int64))
    how = ("from DLIO's index files" if indexed == len(paths) else
           "from the records' own framing (no DLIO index found)" if not indexed else
           f"{indexed} files from DLIO's index files, {len(paths) - indexed} from the records' own framing")
    return Dataset(directory, paths, np.concatenate(files), np.concatenate(offsets), np.concatenate(lengths),
                   patterned=False, note=f"TFRecord files: every record one sample ({how})")


def tfrecord_records(path: str) -> tuple[list[tuple[int, int]], bool]:
    """(offset, length) of each record of a TFRecord file, and whether DLIO's index gave them: its
    index file (DALI's tfrecord2idx format, one "offset length" line per record, which DLIO writes
    to DATA/index/train/NAME.idx) where there is one, else the file's own framing (an 8-byte
    little-endian length, its 4-byte CRC, the payload, the payload's 4-byte CRC)."""
    index = os.path.join(os.path.dirname(os.path.dirname(path)), "index", os.path.basename(os.path.dirname(path)),
                         os.path.basename(path) + INDEX_SUFFIX)
    if os.path.isfile(index):
        try:
            with open(index) as f:
                rows = [tuple(int(x) for x in line.split()) for line in f if line.strip()]
            if rows and all(len(r) == 2 and r[1] > 0 for r in rows):
                return rows, True
        except (OSError, ValueError):
            pass  # not DALI's format: read the framing instead
    size, out, at = os.path.getsize(path), [], 0
    with open(path, "rb") as f:
        while at + 16 <= size:
            f.seek(at)
            header = f.read(8)
            n = int.from_bytes(header, "little")
            end = at + 8 + 4 + n + 4
            if len(header) < 8 or end > size:
                raise UsageError(f"{path}: not a TFRecord file (a record at offset {at} runs past its end); give "
                                 "the folder of TFRecord files DLIO generated")
            out.append((at, end - at))
            at = end
    if at != size or not out:
        raise UsageError(f"{path}: not a TFRecord file ({size - at} bytes left over after its records)")
    return out, False


def disagreements(dataset: Dataset, workload: Workload) -> list[str]:
    """Where the dataset and the workload it is read as disagree, one line each: the dataset
    is what is read, but DLIO's MB/s counts the workload's record size per sample."""
    out = []
    made = dataset.workload
    if made is not None and made.get("name") != workload.name:
        out.append(f"{dataset.directory} was prepared for workload {made.get('name')}, and is read as {workload.name}")
    if made is not None:
        for key in SHAPE:
            if key != "seed" and made.get(key) != getattr(workload, key):
                out.append(f"the workload's {key} is {getattr(workload, key)}, the dataset's {made.get(key)}")
    mean = float(dataset.length.mean())
    if not 0.5 <= mean / workload.record_bytes <= 2:
        out.append(f"samples average {format_size(mean)}, the workload's record_bytes is "
                   f"{format_size(workload.record_bytes)}: train reads the dataset's samples, and MiB/s (as DLIO's MB/s) "
                   "counts the workload's record size per sample; 'read' is what was read")
    if workload.samples != dataset.samples:
        out.append(f"the workload has {workload.samples} samples ({workload.files} files x {workload.samples_per_file}), "
                   f"the dataset {dataset.samples}: steps come from the dataset")
    return out


def shard(samples: int, rank: int, ranks: int, epoch: int, seed: int) -> np.ndarray:
    """The sample indexes one accelerator reads in an epoch: its contiguous
    share, shuffled with a seed (DLIO's sampler; a new order each epoch)."""
    per = math.ceil(samples / ranks)
    mine = np.arange(rank * per, min((rank + 1) * per, samples))
    return np.random.default_rng(seed + epoch).permutation(mine)


def steps_per_epoch(samples: int, batch: int, ranks: int) -> int:
    """DLIO's: whole batches every accelerator gets, floor(samples / batch / ranks)."""
    return samples // batch // ranks


def too_few_steps(samples: int, batch: int, n: int, max_steps: int = 0) -> str | None:
    """Why n accelerators cannot be emulated on `samples` (fewer than 2 steps each), in the words
    train and predict both use, or None. AU leaves the first step out, so it needs two."""
    steps = steps_per_epoch(samples, batch, n)
    steps = min(steps, max_steps) if max_steps else steps
    if steps >= 2:
        return None
    return (f"--accelerators {n}: {samples} samples give each of {n} accelerators {steps} step(s) of {batch}; AU needs "
            "at least 2 (the first is left out): prepare more files (--files)")


def check_cache(dataset: Dataset, direct: bool, allow_cached: bool) -> str | None:
    """UsageError where buffered reads of this dataset could come from the page
    cache (it is under 5x this host's memory), unless allowed; else a note or None."""
    if direct:
        return None
    ram = meminfo("MemTotal") or 0
    if dataset.total_bytes >= CACHE_FACTOR * ram:
        return None
    message = (f"the dataset ({format_size(dataset.total_bytes)}) is under {CACHE_FACTOR}x this host's memory "
               f"({format_size(ram)}): buffered reads of it can come from the page cache")
    if not allow_cached:
        raise UsageError(f"--buffered: {message}; read it with O_DIRECT (drop --buffered), make it larger "
                         "(--files), or pass --allow-cached (the cache is dropped before each run)")
    return message + " (--allow-cached; its pages are dropped before each run)"
