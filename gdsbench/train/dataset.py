"""Datasets in a workload's shape: files of samples whose sizes are drawn as
DLIO draws them, written with gdsbench's verifiable pattern, and a manifest
(gdsbench-dataset.json) that says where every sample is. A directory without
a manifest (one DLIO generated, say) is read as its files' format says
(train/formats.py): TFRecord files record by record, parquet files row group by
row group, other files each one sample. Parquet datasets are real parquet files
(train/parquet.py), their manifest listing each file's bytes.

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
from gdsbench.system import pattern
from gdsbench.system.environment import meminfo
from gdsbench.system.folders import Folder, LocalFolder, folder_for
from gdsbench.system.prepare import BLOCK, is_signed, write_with
from gdsbench.train import parquet
from gdsbench.train.formats import BESIDE, FORMATS, PLAIN, Format
from gdsbench.train.workloads import BUILT_IN, OPTIONS, Workload

MANIFEST = "gdsbench-dataset.json"
SHAPE = ("files", "samples_per_file", "record_bytes", "record_stdev", "seed")  # the workload fields a dataset is made of
CACHE_FACTOR = 5  # MLPerf Storage: a dataset at least 5x the client's memory, so the page cache cannot hold it


def shape_of(workload: Workload) -> tuple[str, ...]:
    """The fields a dataset of this workload is made of (parquet's row groups too)."""
    return SHAPE + (("row_group",) if workload.file_format.row_groups else ())


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
    """Every read unit: the file it is in (an index into paths), its offset and its length. A unit
    is a sample; in a parquet dataset it is a row group's span, holding `rows` samples."""

    directory: str
    paths: list[str]
    file_sizes: np.ndarray  # of each file, bytes
    file_index: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    patterned: bool  # written by gdsbench prepare: --verify can check it
    folder: Folder  # where it is: its files are listed, checked and evicted through it
    note: str = ""  # how it was read (a manifest, or a plain directory)
    workload: dict | None = None  # the workload its manifest says it was prepared for
    rows: np.ndarray | None = None  # samples in each unit (parquet's row groups); None: one each
    footers: np.ndarray | None = None  # per file, the (offset, length) read before its units (parquet's footer)

    @property
    def samples(self) -> int:
        return len(self.length) if self.rows is None else int(self.rows.sum())

    @property
    def units(self) -> int:
        return len(self.length)

    def sample_bytes(self) -> np.ndarray:
        """Bytes read per sample, a value per unit (a row group's span over its rows)."""
        return self.length.astype(float) if self.rows is None else self.length / np.maximum(self.rows, 1)

    def sample_sizes(self, most: int = 1_000_000) -> np.ndarray:
        """Every sample's bytes (a row's share of its row group's span), or `most` of them drawn
        in proportion where there are more (a parquet dataset's billions of rows)."""
        if self.rows is None:
            return self.length.astype(float)
        if self.samples <= most:
            return np.repeat(self.sample_bytes(), self.rows)
        return np.random.default_rng(0).choice(self.sample_bytes(), size=most, p=self.rows / self.rows.sum())

    @property
    def total_bytes(self) -> int:
        return int(self.length.sum())

    def sample(self, i: int) -> tuple[str, int, int]:
        return self.paths[self.file_index[i]], int(self.offset[i]), int(self.length[i])

    def describe(self) -> dict:
        per = self.sample_bytes()
        return {"directory": self.directory, "files": len(self.paths), "samples": self.samples,
                "bytes": self.total_bytes, "mean_sample_bytes": float(self.total_bytes / self.samples) if self.samples
                else 0.0, "stdev_sample_bytes": float(per.std()) if self.samples else 0.0, "patterned": self.patterned,
                "remote": self.folder.remote, "note": self.note,
                **({"row_groups": self.units} if self.rows is not None else {})}


def _file_name(workload: Workload, i: int) -> str:
    suffix = ".parquet" if workload.file_format.row_groups else ".dat"  # parquet: files DLIO's reader would take
    return f"{workload.name}_{i:0{len(str(workload.files - 1))}d}{suffix}"


@dataclass(frozen=True)
class Plan:
    """What prepare_dataset will write: the workload's files, and how much of it is already there."""

    workload: Workload
    folder: Folder
    sizes: np.ndarray  # files x samples_per_file, bytes (parquet: files x 1, the rows' bytes)
    present: int  # bytes of files already complete (kept)

    @property
    def directory(self) -> str:
        return self.folder.name

    @property
    def total(self) -> int:
        return int(self.sizes.sum())

    def describe(self) -> str:
        w, sizes = self.workload, self.sizes
        left = f"; {format_size(self.present)} of it already there, {format_size(self.total - self.present)} to write" \
            if self.present else ""
        if w.file_format.row_groups:  # the rows' own bytes: pyarrow adds its pages and footer
            return (f"{self.directory}: {w.files} parquet files x {w.samples_per_file} rows of "
                    f"{format_size(sizes.mean() / w.samples_per_file)} in {len(w.columns)} columns, row groups of "
                    f"{w.row_group}, about {format_size(self.total)} in all{left}")
        return (f"{self.directory}: {w.files} files x {w.samples_per_file} samples of {format_size(sizes.mean())} "
                f"(sd {format_size(sizes.std())}), {format_size(self.total)} in all{left}")


def _read_manifest(folder: Folder) -> dict | None:
    """A folder's manifest as prepare_dataset wrote it, checked (UsageError naming what is wrong);
    None where it has none."""
    where = folder.path(MANIFEST)
    try:
        text = folder.read_text(MANIFEST)
        if text is None:
            return None
        record = json.loads(text)
    except (OSError, ValueError) as e:
        raise UsageError(f"{where}: not a gdsbench dataset manifest ({e}); prepare the dataset again") from None
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
        raise UsageError(f"{where}: not a gdsbench dataset manifest ({problem}); prepare the dataset again")
    return record


def _safe_name(name: str) -> bool:
    """A file name inside the dataset's directory: one path component, not hidden."""
    return bool(name) and name == os.path.basename(name) and not name.startswith(".")


def plan_dataset(workload: Workload, directory: str, asking: dict | None = None) -> Plan:
    """Check that `directory` (a local directory or an S3 prefix) may hold this workload's
    dataset, and what is there already (asking: how an S3 prefix's server is asked, folder_for)."""
    folder = folder_for(directory, asking)
    folder.check_may_hold()
    record = _read_manifest(folder)
    if record is not None:
        before, shape = record["workload"], shape_of(workload)
        if any(before.get(k) != getattr(workload, k) for k in ("name",) + shape):
            raise UsageError(f"{folder.name}: holds a dataset of another shape ({before.get('name')}: "
                             + ", ".join(f"{k} {before.get(k)}" for k in shape) + f", see {MANIFEST}); a dataset "
                             "cannot grow or change in place (its sample sizes are drawn for its whole shape): give "
                             "another directory, or remove this one to write it anew")
    if workload.file_format.row_groups:
        if folder.remote:
            raise UsageError(f"PATH {directory}: parquet datasets are prepared in a local directory (pyarrow writes "
                             "them); give one")
        sizes = np.full((workload.files, 1), workload.samples_per_file * parquet.row_bytes(workload.columns))
        present = sum(int(row[0]) for i, row in enumerate(sizes) if is_signed(folder.path(_file_name(workload, i))))
        return Plan(workload, folder, sizes, present)
    sizes = record_sizes(workload, workload.samples).reshape(workload.files, workload.samples_per_file)
    present = sum(int(row.sum()) for i, row in enumerate(sizes)
                  if folder.complete(folder.path(_file_name(workload, i)), int(row.sum())))
    return Plan(workload, folder, sizes, present)


def _write_file(plan: Plan, i: int) -> None:
    """File i of the plan: the pattern, or a parquet file of random rows (its own seed: a file rewritten
    is the same file)."""
    w, path = plan.workload, plan.folder.path(_file_name(plan.workload, i))
    size = int(plan.sizes[i].sum())
    if not w.file_format.row_groups:
        plan.folder.write_pattern(path, size, pattern.file_seed(w.seed, os.path.basename(path)),
                                  f"file {os.path.basename(path)}")
        return
    rng = np.random.default_rng([w.seed, i])
    write_with(path, size, lambda tmp: parquet.write(tmp, w.columns, w.samples_per_file, w.row_group, rng),
               f"file {os.path.basename(path)}")


def _write_manifest(plan: Plan, complete: bool, files_done: int) -> None:
    w = plan.workload
    record = {"gdsbench_dataset": 1, "complete": complete, "files_written": files_done, "workload": w.to_dict(),
              "bytes": plan.total, "files": [[_file_name(w, i), row.tolist()] for i, row in enumerate(plan.sizes)]}
    plan.folder.write_text(MANIFEST, json.dumps(record))


def prepare_dataset(plan: Plan, progress=None, started=None) -> Dataset:
    """Write a planned dataset: its manifest first (marked incomplete), then every file
    (those already complete are kept), then the manifest again, complete. A prepare
    that stops (no space, Ctrl-C) leaves a dataset that says it is incomplete, and the
    same command finishes it. Only files gdsbench made are ever rewritten (system/prepare.py,
    system/object_store.py). started(): once there is room and the directory is made."""
    folder = plan.folder
    free = folder.free_bytes()
    need = plan.total - plan.present
    if free is not None and need > free:
        raise UsageError(f"--workload {plan.workload.name}: the dataset needs {format_size(need)} more"
                         f"{' (of ' + format_size(plan.total) + ')' if plan.present else ''}, only {format_size(free)} "
                         f"free in {plan.directory}; use --files to make it smaller")
    folder.make()
    if started:
        started()
    _write_manifest(plan, complete=False, files_done=0)
    done = 0
    for i, row in enumerate(plan.sizes):
        try:
            _write_file(plan, i)
        except GdsbenchError as e:
            _write_manifest(plan, complete=False, files_done=i)
            raise type(e)(f"{plan.directory}: the dataset stopped after {i} of {plan.workload.files} files ({e}); "
                          "it is marked incomplete: fix that and run the same prepare again to finish it") from None
        done += int(row.sum())
        if progress:
            progress(done, plan.total)
    _write_manifest(plan, complete=True, files_done=plan.workload.files)
    return open_dataset(plan.directory, asking=plan.folder.asking, columns=plan.workload.read_columns)


def open_dataset(directory: str, fmt: str | None = None, asking: dict | None = None,
                 columns: tuple[str, ...] = ()) -> Dataset:
    """The samples of a prepared dataset (its manifest); of a folder of a format's files, as DLIO
    generates them (TFRecord's: every record a sample, as its reader finds them, train/formats.py);
    or of any other directory (every file one sample, as DLIO's npz). `directory` is a local
    directory or an S3 prefix. `fmt`, the workload's format, refuses a folder whose files do not
    fit it. `asking`: how an S3 prefix's server is asked (folder_for). `columns`: the columns a
    parquet dataset's reads take (all where empty)."""
    folder = folder_for(directory, asking)
    if not folder.exists():
        what, new = ("no files or objects under it", directory) if folder.remote else ("not a directory", "NEW_DIR")
        raise UsageError(f"PATH {directory}: {what}; give the dataset's directory (make one with "
                         f"`gdsbench prepare --workload unet3d {new}`)")
    record = _read_manifest(folder)
    if record is not None:
        files, workload = record["files"], record["workload"]
        if record.get("complete") is False:  # absent: a manifest from before prepare wrote it first, always complete
            raise UsageError(f"{directory}: an incomplete dataset (prepare stopped after {record.get('files_written', '?')} "
                             f"of {len(files)} files); finish it with the same `gdsbench prepare --workload "
                             f"{workload.get('name')} {directory}` command")
        paths = [folder.path(name) for name, _ in files]
        made_as = FORMATS.get(workload.get("format"))
        if made_as is not None and made_as.row_groups:  # real parquet files: read by their footers, as DLIO's
            missing = next((p for p in paths if not os.path.isfile(p)), None)
            if missing or folder.remote:
                raise UsageError(f"{missing or directory}: missing (or on a server); prepare the dataset again")
            found = _packed_dataset(folder, [(p, os.path.getsize(p)) for p in paths], made_as, columns)
            found.note, found.workload = f"{MANIFEST}: workload {workload.get('name')}; {found.note}", workload
            return found
        lengths = [np.asarray(sizes, dtype=np.int64) for _, sizes in files]
        file_index = np.concatenate([np.full(len(x), i, dtype=np.int64) for i, x in enumerate(lengths)])
        offset = np.concatenate([np.cumsum(x) - x for x in lengths])
        length = np.concatenate(lengths)
        there = dict(folder.files())
        for path, x in zip(paths, lengths):  # a file that is missing or short fails here, not mid-run
            if there.get(path, 0) < int(x.sum()):
                raise UsageError(f"{path}: missing or shorter than {MANIFEST} says; prepare the dataset again")
        return Dataset(folder.name, paths, np.array([there[p] for p in paths], dtype=np.int64), file_index, offset,
                       length, patterned=True, folder=folder, note=f"{MANIFEST}: workload {workload.get('name')}",
                       workload=workload)
    listed = [(p, n) for p, n in folder.files() if not p.endswith(BESIDE)]
    found = [(p, n) for p, n in listed if n > 0]
    if not found:
        what = f"only empty files ({len(listed)}) in it" if listed else "no files in it"
        raise UsageError(f"PATH {directory}: {what}; make a dataset with "
                         f"`gdsbench prepare --workload unet3d {directory}`")
    wanted = FORMATS[fmt] if fmt else None
    named = {f: [(p, n) for p, n in found if p.endswith(f.suffix)] for f in FORMATS.values() if f.suffix}
    if wanted is not None and wanted.suffix and not named[wanted]:
        raise UsageError(f"PATH {directory}: no {wanted.suffix} files in it, and the workload reads {wanted.title}: "
                         f"give the folder DLIO generated for it (its train/ files), or make one with `gdsbench prepare "
                         f"--workload WORKLOAD NEW_DIR`")
    held = next((f for f, files in named.items() if files), None)  # the format whose files are here
    if held is not None:
        if wanted not in (None, held):
            workloads = ", ".join(w.name for w in BUILT_IN.values() if w.file_format is held)
            raise UsageError(f"PATH {directory}: holds {held.suffix} files, and the workload reads {fmt}: use a "
                             f"{held.title} workload ({workloads}, or --format {held.name})")
        if folder.remote and held.local_only:
            raise UsageError(f"PATH {directory}: {held.title} files on a server are not read yet "
                             f"({held.local_only}); copy the folder to a local directory, or use an {PLAIN.name} workload")
        if held.reader is not None:
            return _packed_dataset(folder, named[held], held, columns)
        found = named[held]  # a file a sample: its own files, read whole
    paths = [p for p, _ in found]
    length = np.array([n for _, n in found], dtype=np.int64)
    patterned = folder.has_pattern(paths[0], 0)
    note = f"no manifest: every file is one sample, read whole (as DLIO reads {(held or PLAIN).title} files)"
    if patterned:
        note += ("; its files carry gdsbench's pattern but no manifest says what they are: if a `prepare --workload` "
                 "did not finish here, run it again")
    return Dataset(folder.name, paths, length, np.arange(len(paths)), np.zeros(len(paths), dtype=np.int64), length,
                   patterned=patterned, folder=folder, note=note)


def _packed_dataset(folder: LocalFolder, files_found: list[tuple[str, int]], fmt: Format,
                    columns: tuple[str, ...] = ()) -> Dataset:
    """Every unit of every file (path, size) of a format whose units its reader finds in them."""
    paths = [p for p, _ in files_found]
    packed = fmt.reader(paths, columns)
    units = packed.units
    return Dataset(folder.name, paths, np.array([n for _, n in files_found], dtype=np.int64),
                   np.concatenate([np.full(len(found), i, dtype=np.int64) for i, found in enumerate(units)]),
                   np.concatenate([np.array([o for o, _ in found], dtype=np.int64) for found in units]),
                   np.concatenate([np.array([n for _, n in found], dtype=np.int64) for found in units]),
                   patterned=False, folder=folder, note=packed.how,
                   rows=None if packed.rows is None else np.concatenate([np.array(r, dtype=np.int64)
                                                                         for r in packed.rows]),
                   footers=None if packed.footers is None else np.array(packed.footers, dtype=np.int64))


def disagreements(dataset: Dataset, workload: Workload) -> list[str]:
    """Where the dataset and the workload it is read as disagree, each said once: the dataset
    is what is read, but DLIO's MB/s counts the workload's record size per sample."""
    out = []
    made = dataset.workload
    if made is not None and made.get("name") != workload.name:
        out.append(f"{dataset.directory} was prepared for workload {made.get('name')}, and is read as {workload.name}")
    shape = [k for k in SHAPE if k != "seed" and made is not None and made.get(k) != getattr(workload, k)]
    if shape:  # the prepare flags that made it so, then what follows for the steps (said here, once)
        out.append(f"{dataset.directory} was prepared with " + ", ".join(
            f"{OPTIONS[k].flag} {_shown(k, made.get(k))} (the workload's: {_shown(k, getattr(workload, k))})"
            for k in shape) + (f": steps come from the dataset's {dataset.samples} samples"
                               if workload.samples != dataset.samples else ""))
    elif workload.samples != dataset.samples:
        out.append(f"the workload has {workload.samples} samples ({workload.files} files x {workload.samples_per_file}), "
                   f"the dataset {dataset.samples}: steps come from the dataset")
    mean = dataset.total_bytes / max(1, dataset.samples)
    if not 0.5 <= mean / workload.record_bytes <= 2:
        out.append(f"samples average {format_size(mean)}, the workload's record_bytes is "
                   f"{format_size(workload.record_bytes)}: train reads the dataset's samples, and MiB/s (as DLIO's MB/s) "
                   "counts the workload's record size per sample; 'read' is what was read")
    return out


def _shown(key: str, value) -> str:
    return format_size(value) if OPTIONS[key].kind == "size" and isinstance(value, int) else str(value)


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


def check_cache(dataset: Dataset, spec, allow_cached: bool) -> str | None:
    """UsageError where buffered reads of this dataset could come from the page
    cache (it is under 5x this host's memory), unless allowed; else a note or None. A remote
    dataset has no page cache here, and its server's cannot be seen: a note says so. Uncached
    reads (--uncached) keep no pages, so its size does not matter."""
    if dataset.folder.remote:
        return (f"{dataset.directory} is remote: there is no page cache here to drop, and the server's own cache "
                "cannot be seen (a sample read again, in a later epoch or emulation, may come from its memory)")
    if spec.direct:
        return None
    if spec.uncached:
        return ("--uncached: each read's pages are dropped once copied (RWF_DONTCACHE), so every epoch reads from "
                "storage; a page another process holds in the page cache is still served from it")
    ram = meminfo("MemTotal") or 0
    if dataset.total_bytes >= CACHE_FACTOR * ram:
        return None
    message = (f"the dataset ({format_size(dataset.total_bytes)}) is under {CACHE_FACTOR}x this host's memory "
               f"({format_size(ram)}): buffered reads of it can come from the page cache")
    if not allow_cached:
        raise UsageError(f"--buffered: {message}; read it with O_DIRECT (drop --buffered), make it larger "
                         "(--files), or pass --allow-cached (the cache is dropped before each run)")
    return message + " (--allow-cached; its pages are dropped before each run)"
