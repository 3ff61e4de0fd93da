"""Parquet datasets (MLPerf Storage v3.0's flux and dlrm): made with pyarrow as v3.0's DLIO
generator makes them, and read as its row-group reader reads them: every footer, then each row
group's span of the selected columns, batches cut from the rows that have landed."""

from __future__ import annotations

import json
import os
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_bad_input import assert_one_line_error

from gdsbench.job.errors import UsageError
from gdsbench.train import parquet, pipeline, workloads
from gdsbench.train.dataset import open_dataset

V3 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mlcommons-storage-v3.0")
SMALL_FLUX = ("--files", "4", "--samples-per-file", "12")  # 12 rows of 2.1 MB a file


def test_the_built_in_rows_are_the_yamls_record_length():
    """flux's five float32 columns and dlrm's 200 typed ones add up to the record length their
    v3.0 YAMLs give (2,164,832 and 761 bytes)."""
    assert parquet.row_bytes(parquet.FLUX) == workloads.BUILT_IN["flux"].record_bytes == 2_164_832
    assert parquet.row_bytes(parquet.DLRM) == workloads.BUILT_IN["dlrm"].record_bytes == 761
    assert len(parquet.DLRM) == 200 and workloads.BUILT_IN["dlrm"].row_group == 6144


def test_prepare_writes_parquet_files_as_dlios_generator_does_and_keeps_them(gdsbench, tmp_path):
    data = tmp_path / "flux"
    res = gdsbench("prepare", "--workload", "flux", *SMALL_FLUX, "--row-group", "5", data)
    assert res.code == 0, res.err
    names = sorted(p.name for p in data.iterdir())
    assert names == ["flux_0.parquet", "flux_1.parquet", "flux_2.parquet", "flux_3.parquet", "gdsbench-dataset.json"]
    f = pq.ParquetFile(data / "flux_0.parquet")
    assert f.schema_arrow.names == [c.name for c in parquet.FLUX]
    assert f.schema_arrow.field("t5_encodings").type == pa.list_(pa.float32(), 524328)
    assert f.schema_arrow.field("timestamp").type == pa.list_(pa.float32(), 7)
    meta = f.metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [5, 5, 2]  # a row group a 5 rows
    assert {meta.row_group(0).column(i).compression for i in range(meta.num_columns)} == {"UNCOMPRESSED"}
    assert json.loads((data / "gdsbench-dataset.json").read_text())["complete"] is True
    again = gdsbench("prepare", "--workload", "flux", *SMALL_FLUX, "--row-group", "5", data)
    assert again.code == 0 and "0 B to write" in again.out + again.err
    d = open_dataset(str(data))
    assert (d.samples, d.units, d.rows.tolist()[:3]) == (48, 12, [5, 5, 2])


def test_prepare_never_writes_over_a_parquet_file_it_did_not_make(gdsbench, tmp_path):
    data = tmp_path / "flux"
    data.mkdir()
    theirs = data / "flux_0.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3]}), theirs)
    before = theirs.read_bytes()
    res = gdsbench("prepare", "--workload", "flux", *SMALL_FLUX, data)
    assert_one_line_error(res, "flux_0.parquet", "did not create")
    assert theirs.read_bytes() == before


def test_a_row_groups_read_is_the_span_of_its_selected_columns(tmp_path):
    """All columns: from the first column chunk's start to the last one's end; a selection: only
    its columns' chunks. The footer read is the file's last 64 KiB, as pyarrow's."""
    path = str(tmp_path / "d.parquet")
    columns = (parquet.Column("a", "float32", 1000), parquet.Column("b", "int8"), parquet.Column("c", "float64", 10))
    parquet.write(path, columns, 30, 10, np.random.default_rng(1))
    meta = pq.ParquetFile(path).metadata
    whole, some = parquet.layout(path), parquet.layout(path, ("b", "c"))
    assert whole.rows == some.rows == [10, 10, 10]
    for g, ((offset, length), (o2, n2)) in enumerate(zip(whole.spans, some.spans)):
        chunks = [meta.row_group(g).column(i) for i in range(3)]
        start = lambda c: c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset  # noqa: E731
        assert offset == start(chunks[0]) and offset + length == start(chunks[2]) + chunks[2].total_compressed_size
        assert o2 == start(chunks[1]) and o2 + n2 == offset + length and n2 < length
    size = os.path.getsize(path)
    assert whole.footer == (max(0, size - parquet.FOOTER_READ), min(size, parquet.FOOTER_READ))
    with pytest.raises(UsageError, match="no column z"):
        parquet.layout(path, ("z",))


class Recorder:
    """A reader that reads nothing and says what it was asked (the loader's logic, without storage)."""

    def __init__(self, log: list, lock: threading.Lock, held: tuple[int, threading.Event] | None = None):
        self.log, self.lock, self.held = log, lock, held  # held: (offset, event): a read there waits for it

    def read(self, path, offset, length):
        if self.held and offset == self.held[0]:
            self.held[1].wait(10)
        with self.lock:
            self.log.append((threading.current_thread().name, os.path.basename(path), offset, length))
        return length, 1, 0


def _dataset(tmp_path, files: int, rows: int, row_group: int):
    columns = (parquet.Column("v", "float32", 256),)
    for i in range(files):
        parquet.write(str(tmp_path / f"f{i}.parquet"), columns, rows, row_group, np.random.default_rng(i))
    return open_dataset(str(tmp_path), "parquet")


def test_the_row_group_loader_deals_files_reads_footers_first_and_cuts_batches_from_rows(tmp_path):
    """3 files, 2 workers: worker 0 takes files 0 and 2, worker 1 file 1; each reads its footers
    before any row group, then every row group's span once, several at once; batches of 8 rows
    come from the workers in turn, and a worker's last partial batch is dropped (worker 0: 40
    rows, 5 batches; worker 1: 20 rows, 2)."""
    d = _dataset(tmp_path, 3, 20, 6)  # row groups of 6, 6, 6 and 2 rows
    per = pipeline.RowGroupLoader.readers_per_worker(d, 2, 64)
    assert per == 8  # worker 0's 8 row groups at once (fewer than the window)
    log, lock = [], threading.Lock()
    readers = [Recorder(log, lock) for _ in range(2 * per)]
    loader = pipeline.RowGroupLoader(readers, 2, d, batch=8, window=64, stop=threading.Event())
    try:
        assert loader.order == [0, 1, 0, 1, 0, 0, 0] and loader.batch_count == 7
        taken = [loader.take(b) for b in range(loader.batch_count)]
    finally:
        loader.close()
    assert all(n > 0 for n in taken) and loader.samples == 56
    names = {t.name: w for w in range(2) for t in loader.threads[w * per:(w + 1) * per]}
    for w, files in ((0, ["f0.parquet", "f2.parquet"]), (1, ["f1.parquet"])):
        mine = [entry[1:] for entry in log if names[entry[0]] == w]
        footers = [(os.path.basename(d.paths[i]), *map(int, d.footers[i])) for i in range(3)
                   if os.path.basename(d.paths[i]) in files]
        assert mine[:len(files)] == footers  # every footer first
        spans = [(os.path.basename(p), o, n) for p, o, n in (d.sample(int(i)) for i in loader.units[w])]
        assert sorted(mine[len(files):]) == sorted(spans)  # then each row group's span, once
    assert loader.bytes == sum(entry[3] for entry in log)


def test_the_row_group_loader_reads_no_further_ahead_than_its_window(tmp_path):
    """With the accelerator taking nothing, a worker reads the row groups its first two batches
    need (PyTorch's prefetch) and the window past them, then waits."""
    d = _dataset(tmp_path, 1, 40, 2)  # 20 row groups of 2 rows
    log, lock = [], threading.Lock()
    per = pipeline.RowGroupLoader.readers_per_worker(d, 1, 3)
    loader = pipeline.RowGroupLoader([Recorder(log, lock) for _ in range(per)], 1, d, batch=2, window=3,
                                     stop=threading.Event())
    try:
        deadline = threading.Event()
        deadline.wait(0.5)
        # 2 batches of 2 rows asked for: row group 1 is needed, and 3 more past it may be read
        assert len(log) == 1 + (1 + 3 + 1)
        loader.take(0)
        deadline.wait(0.3)
        assert len(log) == 1 + (2 + 3 + 1)
    finally:
        loader.close()


def test_a_batch_waits_for_its_rows_in_order_while_later_row_groups_land(tmp_path):
    """Row groups land in any order (several in flight), but a batch is cut from rows landed in
    order, as DLIO's worker waits on each read's future in turn."""
    d = _dataset(tmp_path, 1, 8, 2)  # 4 row groups of 2 rows
    first = d.sample(int(np.argmin(d.offset)))[1]
    release, log, lock = threading.Event(), [], threading.Lock()
    loader = pipeline.RowGroupLoader([Recorder(log, lock, (first, release)) for _ in range(4)], 1, d, batch=2,
                                     window=64, stop=threading.Event())
    try:
        got = []
        taker = threading.Thread(target=lambda: got.append(loader.take(0)))
        taker.start()
        taker.join(0.5)
        assert taker.is_alive() and len(log) == 1 + 3  # the footer and the three later row groups, not the first
        release.set()
        taker.join(5)
        assert got and [loader.take(b) for b in range(1, 4)]
    finally:
        release.set()
        loader.close()


def test_train_reads_a_dlio_style_parquet_folder_and_refuses_what_it_cannot_read(gdsbench, tmp_path):
    """A folder of parquet files with no manifest (as DLIO generates it) is read by its footers; a
    .parquet file that is not parquet, and a selected column the files lack, are one line each."""
    data = tmp_path / "train"
    data.mkdir()
    for i in range(2):
        parquet.write(str(data / f"img_{i}_of_2.parquet"), parquet.FLUX, 8, 1024, np.random.default_rng(i))
    args = ("train", data, "--workload", "flux", "--files", "2", "--samples-per-file", "8", "--batch", "2",
            "--read-threads", "2", "--compute-time", "1ms", "--results", tmp_path / "runs", "--json")
    res = gdsbench(*args)
    assert res.code == 0, res.err
    row = json.loads(res.out)[0]
    assert row["steps_per_epoch"] == 8 and row["samples_read"] == 16
    assert row["bytes_read"] >= sum(os.path.getsize(p) for p in data.iterdir()) - 2 * 8192  # spans and footers
    yaml = tmp_path / "flux_some.yaml"
    yaml.write_text(open(os.path.join(V3, "flux_b200.yaml")).read() + "storage:\n  storage_options:\n"
                    "    columns: [mean, vae_latents]\n")
    res = gdsbench("train", data, "--workload", yaml, "--files", "2", "--samples-per-file", "8")
    error = res.err.strip().splitlines()[-1]  # after the YAML's notes
    assert res.code == 2 and error.startswith("gdsbench: error: ") and "Traceback" not in res.err
    assert "no column vae_latents" in error and "storage_options.columns" in error
    (data / "img_9_of_2.parquet").write_bytes(b"not parquet at all" * 100)
    assert_one_line_error(gdsbench(*args), "img_9_of_2.parquet: not a parquet file")


def test_bad_parquet_settings_are_one_line_naming_them(gdsbench, tmp_path):
    text = open(os.path.join(V3, "flux_b200.yaml")).read()
    bad = tmp_path / "bad_type.yaml"
    bad.write_text(text.replace("dtype: float32\n        size: 409", "dtype: complex64\n        size: 409"))
    assert_one_line_error(gdsbench("prepare", "--workload", bad, tmp_path / "d"),
                          "dataset.parquet.columns[1] (clip_encodings): dtype 'complex64'")
    window = tmp_path / "window.yaml"
    window.write_text(text + "storage:\n  storage_options:\n    prefetch_window: 8\n")
    assert_one_line_error(gdsbench("train", tmp_path, "--workload", window), "storage.storage_options.prefetch_window")
    toml = tmp_path / "mine.toml"
    toml.write_text('base = "flux"\ncolumns = ["a"]\n')
    assert_one_line_error(gdsbench("prepare", "--workload", toml, tmp_path / "d"), "columns", "dataset.parquet.columns")
    assert_one_line_error(gdsbench("prepare", "--workload", "flux", "--row-group", "0", tmp_path / "d"),
                          "--row-group 0")


@pytest.mark.parametrize("mode", ["bounce", "gds"])
def test_parquet_row_groups_land_in_gpu_memory_on_the_cpu_stand_in(gdsbench, tmp_path, mode):
    """The row-group loader's native readers in each GPU mode, on the SIMULATED device (not a GPU): every
    sample read, and the row says what stood in."""
    data = tmp_path / "flux"
    assert gdsbench("prepare", data, "--workload", "flux", "--files", "2", "--samples-per-file", "8").code == 0
    res = gdsbench("train", data, "--workload", "flux", "--files", "2", "--samples-per-file", "8", "--batch", "2",
                   "--read-threads", "2", "--compute-time", "1ms", "--mode", mode, "--gpu-backend", "sim",
                   "--results", tmp_path / "runs", "--json")
    assert res.code == 0, res.err
    row = json.loads(res.out)[0]
    assert "SIMULATED" in row["data_path"] and row["samples_read"] == 16
