"""The formats a training dataset comes in: every format, declared once.

Everything else asks these declarations; no other module compares format
names. A format says which loader's rule train and predict emulate for it
(PyTorch's DataLoader dealing whole samples, or tf.data's streams reading
whole files), how its files are named and its samples lie in a folder DLIO
generated, and which files beside them are not samples. `gdsbench prepare
--workload` writes every format alike (gdsbench's pattern, samples back to
back, a manifest saying where each lies: train/dataset.py), so a format adds
nothing there, except parquet, whose files are real parquet files
(train/parquet.py). Adding a format is one entry here, plus the reader that
finds its samples where they are packed inside files (docs/architecture.md has
the checklist).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from gdsbench.job.errors import UsageError

KiB, MiB = 1 << 10, 1 << 20
TFRECORD_INDEX = ".idx"  # DLIO's per-file record index (DALI's tfrecord2idx), under DATA/index/train/



@dataclass
class Packed:
    """What a format's reader found in its files: per file, the (offset, length) of every read
    unit; and for row-group formats, each unit's rows and the file's footer read."""

    units: list[list[tuple[int, int]]]
    how: str  # how they were found, in words
    rows: list[list[int]] | None = None  # rows in each unit (None: each unit is one sample)
    footers: list[tuple[int, int]] | None = None  # per file, the (offset, length) read first


# A reader: what is packed in these files (the columns read, for formats that have them)
Reader = Callable[[list[str], tuple[str, ...]], Packed]


@dataclass(frozen=True)
class Format:
    name: str  # as a workload and DLIO's dataset.format spell it
    title: str  # in a sentence: "TFRecord"
    loader: str  # DLIO's reader.data_loader whose rule gdsbench emulates for it
    rule: str  # that loader, in words
    streams: bool  # tf.data's rule: R streams read each of the rank's files whole, a transfer-size chunk at a time,
    # records interleaved into batches; else PyTorch's: whole samples, each batch read by one of R read threads
    transfer_size: int  # the chunk its reader reads in, where a DLIO workload YAML does not say
    row_groups: bool = False  # v3.0 DLIO's parquet rule: R workers read row groups, batches cut from their rows
    suffix: str = ""  # how its files are named in a folder DLIO generated ("": any file, each one sample, read whole)
    beside: tuple[str, ...] = ()  # suffixes of files in such a folder that hold no samples (DLIO's index files)
    reader: Reader | None = None  # finds the samples packed in its files (None: each file is one sample, read whole)
    local_only: str = ""  # why its reader cannot read a folder on a server yet ("": it can)


def tfrecord_records(path: str) -> tuple[list[tuple[int, int]], bool]:
    """(offset, length) of each record of a TFRecord file, and whether DLIO's index gave them: its
    index file (DALI's tfrecord2idx format, one "offset length" line per record, which DLIO writes
    to DATA/index/train/NAME.idx) where there is one, else the file's own framing (an 8-byte
    little-endian length, its 4-byte CRC, the payload, the payload's 4-byte CRC)."""
    index = os.path.join(os.path.dirname(os.path.dirname(path)), "index", os.path.basename(os.path.dirname(path)),
                         os.path.basename(path) + TFRECORD_INDEX)
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


def tfrecord_samples(paths: list[str], columns: tuple[str, ...] = ()) -> Packed:
    """Every record of every TFRecord file a sample, from DLIO's index files or the records' own framing."""
    found = [tfrecord_records(path) for path in paths]
    indexed = sum(from_index for _, from_index in found)
    how = ("from DLIO's index files" if indexed == len(paths) else
           "from the records' own framing (no DLIO index found)" if not indexed else
           f"{indexed} files from DLIO's index files, {len(paths) - indexed} from the records' own framing")
    return Packed([records for records, _ in found], f"TFRecord files: every record one sample ({how})")


def parquet_row_groups(paths: list[str], columns: tuple[str, ...] = ()) -> Packed:
    """Every row group of every parquet file, each the span its selected columns cover (train/parquet.py)."""
    from gdsbench.train import parquet

    found = [parquet.layout(path, columns) for path in paths]
    chosen = ", ".join(columns) if columns else "every column"
    return Packed([f.spans for f in found], f"parquet files: row groups read by their footers ({chosen})",
                  rows=[f.rows for f in found], footers=[f.footer for f in found])


# Transfer sizes as DLIO 2.0's H100 configs read: whole-file reads in 1 MiB chunks for npz,
# TFRecordDataset's 256 KiB buffer for tfrecord. jpeg (MLPerf Storage v3.0's retinanet) is a file
# per sample, opened, read whole and closed, as DLIO's image reader does (one chunk: its files are
# about 315 KiB). parquet (v3.0's flux and dlrm) reads each row group's span in one read; gdsbench
# reads it in 1 MiB chunks.
FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("npz", "npz", loader="pytorch", rule="PyTorch", streams=False, transfer_size=MiB),
    Format("jpeg", "JPEG", loader="pytorch", rule="PyTorch", streams=False, transfer_size=MiB, suffix=".jpeg"),
    Format("tfrecord", "TFRecord", loader="tensorflow", rule="tf.data", streams=True, transfer_size=256 * KiB,
           suffix=".tfrecord", beside=(TFRECORD_INDEX,), reader=tfrecord_samples,
           local_only="their records are found in local index files"),
    Format("parquet", "Parquet", loader="pytorch", rule="v3.0 DLIO's row-group reader", streams=False,
           transfer_size=MiB, suffix=".parquet", reader=parquet_row_groups, row_groups=True,
           local_only="their row groups are found by reading the footers with pyarrow"),
)}

DLIO_DEFAULT = FORMATS["tfrecord"]  # a DLIO workload YAML without dataset.format
PLAIN = next(f for f in FORMATS.values() if not f.suffix)  # how a folder of files no format names is read
BESIDE = tuple(s for f in FORMATS.values() for s in f.beside)  # files no dataset folder counts as samples


def format_names(conjunction: str = "and") -> str:
    """Every format's name, for a sentence: "npz, jpeg, tfrecord and parquet"."""
    listed = list(FORMATS)
    return f"{', '.join(listed[:-1])} {conjunction} {listed[-1]}" if len(listed) > 1 else listed[0]
