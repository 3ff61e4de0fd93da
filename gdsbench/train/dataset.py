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

from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_size
from gdsbench.system.environment import meminfo
from gdsbench.system.pattern import has_pattern
from gdsbench.system.prepare import BLOCK, prepare
from gdsbench.train.workloads import Workload

MANIFEST = "gdsbench-dataset.json"
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


def prepare_dataset(workload: Workload, directory: str, progress=None) -> Dataset:
    """Write the workload's file set into `directory` (kept where a previous
    prepare left the same one), then its manifest. Only files gdsbench made
    are ever rewritten (system/prepare.py)."""
    manifest = os.path.join(directory, MANIFEST)
    if os.path.exists(manifest):
        try:
            with open(manifest) as f:
                old = json.load(f)
        except (OSError, ValueError):
            old = {}
        before = old.get("workload") or {}
        if any(before.get(k) != getattr(workload, k) for k in SHAPE):
            raise UsageError(f"{directory}: holds a dataset of another shape ({before.get('name')}: "
                             + ", ".join(f"{k} {before.get(k)}" for k in SHAPE) + f", see {MANIFEST}); give another "
                             "directory")
    sizes = record_sizes(workload, workload.samples).reshape(workload.files, workload.samples_per_file)
    need = int(sizes.sum())
    os.makedirs(directory, exist_ok=True)
    vfs = os.statvfs(directory)
    if need > vfs.f_bavail * vfs.f_frsize and not os.path.exists(manifest):
        raise UsageError(f"--workload {workload.name}: the dataset needs {format_size(need)}, only "
                         f"{format_size(vfs.f_bavail * vfs.f_frsize)} free in {directory}; use --files to make it smaller")
    files = []
    done = 0
    for i, row in enumerate(sizes):
        name = _file_name(workload, i)
        prepare(os.path.join(directory, name), int(row.sum()), seed=workload.seed)
        files.append([name, row.tolist()])
        done += int(row.sum())
        if progress:
            progress(done, need)
    record = {"gdsbench_dataset": 1, "workload": workload.to_dict(), "bytes": need, "files": files}
    tmp = manifest + ".partial"
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, manifest)
    return open_dataset(directory)


def open_dataset(directory: str) -> Dataset:
    """The samples of a prepared dataset (its manifest), or of a plain directory (every file one sample)."""
    if not os.path.isdir(directory):
        raise UsageError(f"PATH {directory}: not a directory; make a dataset with "
                         f"`gdsbench prepare --workload unet3d {directory}`")
    manifest = os.path.join(directory, MANIFEST)
    if os.path.exists(manifest):
        try:
            with open(manifest) as f:
                record = json.load(f)
            files = record["files"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise UsageError(f"{manifest}: not a gdsbench dataset manifest ({e}); prepare the dataset again") from None
        paths = [os.path.join(directory, name) for name, _ in files]
        lengths = [np.asarray(sizes, dtype=np.int64) for _, sizes in files]
        file_index = np.concatenate([np.full(len(x), i, dtype=np.int64) for i, x in enumerate(lengths)])
        offset = np.concatenate([np.cumsum(x) - x for x in lengths])
        length = np.concatenate(lengths)
        for path, x in zip(paths, lengths):  # a file that is missing or short fails here, not mid-run
            if not os.path.isfile(path) or os.path.getsize(path) < int(x.sum()):
                raise UsageError(f"{path}: missing or shorter than {MANIFEST} says; prepare the dataset again")
        return Dataset(directory, paths, file_index, offset, length, patterned=True,
                       note=f"{MANIFEST}: workload {record['workload'].get('name')}")
    paths = sorted(os.path.join(root, name) for root, _, names in os.walk(directory) for name in names
                   if os.path.isfile(os.path.join(root, name)))
    paths = [p for p in paths if os.path.getsize(p) > 0]
    if not paths:
        raise UsageError(f"PATH {directory}: no files in it; make a dataset with "
                         f"`gdsbench prepare --workload unet3d {directory}`")
    length = np.array([os.path.getsize(p) for p in paths], dtype=np.int64)
    return Dataset(directory, paths, np.arange(len(paths)), np.zeros(len(paths), dtype=np.int64), length,
                   patterned=has_pattern(paths[0], 0),
                   note="no manifest: every file is one sample, read whole (as DLIO reads npz files)")


def shard(samples: int, rank: int, ranks: int, epoch: int, seed: int) -> np.ndarray:
    """The sample indexes one accelerator reads in an epoch: its contiguous
    share, shuffled with a seed (DLIO's sampler; a new order each epoch)."""
    per = math.ceil(samples / ranks)
    mine = np.arange(rank * per, min((rank + 1) * per, samples))
    return np.random.default_rng(seed + epoch).permutation(mine)


def steps_per_epoch(samples: int, batch: int, ranks: int) -> int:
    """DLIO's: whole batches every accelerator gets, floor(samples / batch / ranks)."""
    return samples // batch // ranks


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
