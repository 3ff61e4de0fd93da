"""Parquet datasets as MLPerf Storage v3.0's DLIO fork makes and reads them
(mlcommons/DLIO_local_changes at cbe2001, the commit mlpstorage 3.0 pins).

Made (data_generator/parquet_generator.py): pyarrow's ParquetWriter with the
workload's typed columns (a column of `size` values is a fixed-size list of
them), pyarrow's default encodings, uncompressed, a row group every
`row_group` rows, the values random.

Read (reader/parquet_reader_file_iterable.py): every file's footer first, then
for each row group one read of the span its selected columns cover (from the
first selected column chunk's first page to the last one's end), never
decoded. That reader counts every column's compressed bytes as read, whatever
is selected; DLIO's MB/s counts the nominal record length per row.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from gdsbench.job.errors import UsageError

KiB = 1 << 10
FOOTER_READ = 64 * KiB  # pyarrow reads a file's last 64 KiB to find its footer (a larger footer: its whole length)
DLIO_ROW_GROUP = 1024  # DLIO's parquet.row_group_size where a YAML leaves it out
WINDOW = 64  # row-group reads each loader worker keeps ahead (DLIO's storage_options.prefetch_window default)

DTYPES = {name: np.dtype(name) for name in ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
                                            "float16", "float32", "float64")}
DTYPES["list"] = np.dtype("float32")  # DLIO's "list": a fixed-size list of float32


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # a key of DTYPES
    size: int = 1  # values per row (more than 1: a fixed-size list)

    @property
    def row_bytes(self) -> int:
        return DTYPES[self.dtype].itemsize * self.size


def columns_from_yaml(items, where: str) -> tuple[Column, ...]:
    """dataset.parquet.columns of a DLIO YAML: [{name, dtype, size}, ...]; UsageError naming the
    column where one cannot be made."""
    if not isinstance(items, list) or not items:
        raise UsageError(f"{where}: a list of columns ({{name: ..., dtype: float32, size: N}}, ...)")
    out = []
    for i, item in enumerate(items):
        spec = item if isinstance(item, dict) else {"name": item}
        name, dtype, size = str(spec.get("name", "data")), str(spec.get("dtype", "float32")), spec.get("size", 1)
        if dtype not in DTYPES:
            raise UsageError(f"{where}[{i}] ({name}): dtype {dtype!r}: gdsbench makes numeric columns only ("
                             f"{', '.join(DTYPES)}); choose one of them")
        if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= 1 << 30:
            raise UsageError(f"{where}[{i}] ({name}): size {size!r}: values per row, a whole number from 1")
        out.append(Column(name, dtype, size))
    if len({c.name for c in out}) != len(out):
        raise UsageError(f"{where}: a column name is given twice; name each column once")
    return tuple(out)


def row_bytes(columns: tuple[Column, ...]) -> int:
    return sum(c.row_bytes for c in columns)


# MLPerf Storage v3.0's flux (flux_b200.yaml: 5 float32 columns, 2,164,832 bytes a row)
FLUX = (Column("t5_encodings", "float32", 524328), Column("clip_encodings", "float32", 409),
        Column("mean", "float32", 8232), Column("logvar", "float32", 8232), Column("timestamp", "float32", 7))
# dlrm_b200.yaml (mlcommons/storage 0b42eb5): 200 one-value columns feature_000..feature_199, their
# types in order (h float16, f float32, d float64, b int8)
_DLRM_TYPES = ("hhddfhfbhb" "ffdfbhfffh" "ddddhffhhf" "dfdfhhdbbb" "hfhfdbdddf" "fbbfffbfhf" "dhdbfhbfhf" "hfhffdhbfd"
               "bbffhbhbfb" "ffhfddfhbh" "hdhfdhhfdf" "ddbhhbbdfb" "hhbbbhbbfb" "hfdhhdhfdd" "hfbbdfdfdd" "bbbddffbfh"
               "fhfhdhdhfb" "dhbdbbbbhh" "bdddhdbbhf" "dbdfdffddh")
DLRM = tuple(Column(f"feature_{i:03d}", {"h": "float16", "f": "float32", "d": "float64", "b": "int8"}[t])
             for i, t in enumerate(_DLRM_TYPES))


def _schema(columns: tuple[Column, ...]):
    import pyarrow as pa

    def arrow(c: Column):
        scalar = pa.from_numpy_dtype(DTYPES[c.dtype])
        return scalar if c.size == 1 else pa.list_(scalar, c.size)

    return pa.schema([pa.field(c.name, arrow(c)) for c in columns])


def write(path: str, columns: tuple[Column, ...], rows: int, row_group: int, rng: np.random.Generator) -> None:
    """A parquet file of `rows` random rows, a row group every `row_group` rows, uncompressed (as DLIO's
    generator writes one: a write_table call a row group, pyarrow's defaults otherwise)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pq.ParquetWriter(path, _schema(columns), compression="none") as writer:
        for start in range(0, rows, row_group):
            n = min(row_group, rows - start)
            arrays = []
            for c in columns:
                flat = pa.array(np.frombuffer(rng.bytes(n * c.row_bytes), dtype=DTYPES[c.dtype]))
                arrays.append(flat if c.size == 1 else pa.FixedSizeListArray.from_arrays(flat, c.size))
            writer.write_table(pa.Table.from_arrays(arrays, schema=_schema(columns)))


@dataclass(frozen=True)
class Layout:
    """Where one file's reads go: per row group the span its selected columns cover and its rows,
    and the footer read that finds them."""

    spans: list[tuple[int, int]]  # (offset, length)
    rows: list[int]
    footer: tuple[int, int]  # (offset, length): the end of the file pyarrow reads for the footer


def layout(path: str, selected: tuple[str, ...] = ()) -> Layout:
    """The reads of one parquet file, from its footer; `selected`: the columns read (all where empty).
    UsageError where it is not parquet or lacks a selected column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
    except (pa.ArrowInvalid, OSError) as e:
        raise UsageError(f"{path}: not a parquet file ({str(e).splitlines()[0][:120]}); give a folder of parquet files "
                         "(DLIO's, or `gdsbench prepare --workload flux DIR`)") from None
    names = [meta.schema.column(i).path.split(".")[0] for i in range(meta.num_columns)]
    missing = [c for c in selected if c not in names]
    if missing:
        shown = ", ".join(dict.fromkeys(names[:8])) + (", ..." if len(set(names)) > 8 else "")
        raise UsageError(f"{path}: no column {missing[0]} (it has {shown}); select columns it has "
                         "(storage.storage_options.columns)")
    chosen = [i for i, n in enumerate(names) if not selected or n in selected]
    spans, rows = [], []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        starts, ends = [], []
        for i in chosen:
            chunk = group.column(i)
            first = chunk.dictionary_page_offset if chunk.has_dictionary_page and chunk.dictionary_page_offset else \
                chunk.data_page_offset
            starts.append(first)
            ends.append(first + chunk.total_compressed_size)
        spans.append((min(starts), max(ends) - min(starts)))
        rows.append(group.num_rows)
    size = os.path.getsize(path)
    footer = min(size, max(FOOTER_READ, meta.serialized_size + 8))
    return Layout(spans, rows, (size - footer, footer))
