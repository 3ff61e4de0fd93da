"""Writes in `gdsbench run`: --rw as fio spells it, the pattern every written
block carries, --verify read back from the storage, fsync as fio names it,
and every refusal of the rule that matters most: gdsbench writes only into a
file it made, by its own path, that no other gdsbench run holds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import wait_for_workers
from test_bad_input import assert_one_line_error

from gdsbench.job.errors import UsageError
from gdsbench.system.pagecache import HeldFileRegion
from gdsbench.system.prepare import created_by_gdsbench
from gdsbench.system.targets.local_file import LocalFile

MiB = 1 << 20


def run_json(gdsbench, *args) -> dict:
    res = gdsbench("run", *args, "--json")
    assert res.code == 0, res.err
    return json.loads(res.out)


def test_a_write_lands_the_pattern_and_verify_reads_it_back_from_the_storage(gdsbench, own_pattern_file):
    d = run_json(gdsbench, own_pattern_file, "--rw", "write", "--bs", "256K", "--qd", "4", "--io-size", "8M",
                 "--fsync-end", "--verify")
    assert d["spec"]["rw"] == "write" and d["bytes"] == 8 * MiB and d["ops"] == 32
    assert d["verified_blocks"] == 1024 and d["verify_mismatches"] == 0  # the whole 4 MiB region, read back
    assert d["fsyncs"] == 1 and d["fsync_p50_ns"] > 0 and d["warnings"] == []
    assert d["data_path"] == "io_uring O_DIRECT writes from host memory"
    assert created_by_gdsbench(own_pattern_file)  # its mark is true again: it may be written again
    assert run_json(gdsbench, own_pattern_file, "--verify", "--bs", "1M")["verify_mismatches"] == 0


def test_randwrite_is_random_and_fsync_every_is_counted(gdsbench, own_pattern_file):
    d = run_json(gdsbench, own_pattern_file, "--rw", "randwrite", "--engine", "psync", "--bs", "4K", "--io-size", "2M",
                 "--fsync-every", "64")
    assert d["spec"]["pattern"] == "rand" and d["ops"] == 512 and d["fsyncs"] == 8
    assert "fsync every 8" in gdsbench("run", own_pattern_file, "--rw", "randwrite", "--bs", "4K", "--io-size", "64K",
                                        "--fsync-every", "8").out


def test_buffered_writes_without_fsync_say_they_measured_memory(gdsbench, own_pattern_file):
    d = run_json(gdsbench, own_pattern_file, "--rw", "write", "--buffered", "--io-size", "4M")
    assert any("this measures memory" in w and "--fsync-end" in w for w in d["warnings"])
    d = run_json(gdsbench, own_pattern_file, "--rw", "write", "--buffered", "--io-size", "4M", "--fsync-end")
    assert d["warnings"] == [] and d["fsyncs"] == 1


def test_bounce_writes_come_from_gpu_memory_on_the_cpu_stand_in(gdsbench, own_pattern_file):
    """The staged pipeline the other way: device memory copied to pinned memory, stamped, written.
    On the SIMULATED device only: on a GPU this path is untested."""
    d = run_json(gdsbench, own_pattern_file, "--rw", "write", "--mode", "bounce", "--gpu-backend", "sim", "--bs", "512K",
                 "--qd", "2", "--io-size", "8M", "--verify")
    assert d["bytes"] == 8 * MiB and d["verify_mismatches"] == 0 and d["verified_blocks"] == 1024
    assert "writes from GPU memory, copied first by cudaMemcpyAsync" in d["data_path"] and "SIMULATED" in d["data_path"]


def test_gds_writes_stamp_their_blocks_in_device_memory_on_the_cpu_stand_in(gdsbench, own_pattern_file):
    """--mode gds writes from device memory itself: each write's 4 KiB blocks are stamped in a host
    shadow and their changed words copied into device memory (Device::put_rows), then written. On
    the SIMULATED device, with pwrite standing in for cuFileWrite: random offsets read back clean
    only if every block's stamp reached the memory the write came from. Untested on a GPU."""
    d = run_json(gdsbench, own_pattern_file, "--rw", "randwrite", "--mode", "gds", "--gpu-backend", "sim", "--bs",
                 "64K", "--threads", "2", "--io-size", "4M", "--fsync-end", "--verify")
    assert d["bytes"] == 4 * MiB and d["verify_mismatches"] == 0 and d["verified_blocks"] == 1024 and d["fsyncs"] == 2
    assert d["data_path"].startswith("psync writes from simulated device memory, standing in for cufile [SIMULATED")


def test_writes_go_only_into_a_file_gdsbench_made_by_its_own_path(gdsbench, own_pattern_file, tmp_path):
    theirs = tmp_path / "theirs.dat"
    theirs.write_bytes(b"x" * MiB)
    assert_one_line_error(gdsbench("run", theirs, "--rw", "write", "--io-size", "64K", "--bs", "64K"),
                          "gdsbench did not create this file")
    assert theirs.read_bytes() == b"x" * MiB
    link = tmp_path / "link.dat"
    link.symlink_to(own_pattern_file)
    assert_one_line_error(gdsbench("run", link, "--rw", "write", "--io-size", "64K", "--bs", "64K"), "a symbolic link")
    block = LocalFile(path="/dev/sdz", kind="block", size=MiB, device=None, mount=None)
    with pytest.raises(UsageError, match="a block device: gdsbench never writes to one"):
        block.check_may_write()
    # (a URL: tests/test_remote.py, against its servers: S3 objects gdsbench made are written whole, HTTP refused)


def test_a_region_another_run_holds_is_refused_in_one_line(gdsbench, own_pattern_file):
    reading = HeldFileRegion(own_pattern_file, 0, 4 * MiB, lock="read")  # as a run reading it holds it
    try:
        assert_one_line_error(gdsbench("run", own_pattern_file, "--rw", "write", "--io-size", "1M"),
                              "another gdsbench run is reading or writing this region")
        assert run_json(gdsbench, own_pattern_file, "--io-size", "1M")["bytes"] == MiB  # readers share it
    finally:
        reading.close()
    writing = HeldFileRegion(own_pattern_file, 0, MiB, lock="write")
    try:
        assert_one_line_error(gdsbench("run", own_pattern_file, "--io-size", "1M"), "another gdsbench run is writing")
        d = run_json(gdsbench, own_pattern_file, "--rw", "write", "--offset", "1M", "--io-size", "1M")
        assert d["bytes"] == MiB  # another region of the same file is free
    finally:
        writing.close()


def test_what_cannot_write_says_so(gdsbench, own_pattern_file):
    assert_one_line_error(gdsbench("run", own_pattern_file, "--fsync-every", "4", "--io-size", "1M"),
                          "--fsync-every: only with --rw write")
    assert_one_line_error(gdsbench("run", own_pattern_file, "--rw", "write", "--bs", "6K", "--io-size", "60K"),
                          "--bs 6 KiB: writes carry 4 KiB pattern blocks", "multiples of 4K")
    assert_one_line_error(gdsbench("run", own_pattern_file, "--rw", "write", "--mode", "kvikio", "--io-size", "1M"))
    assert_one_line_error(gdsbench("run", own_pattern_file, "--rw", "write", "--warm", "--buffered"), "drop --warm")


def test_a_write_killed_mid_run_leaves_a_file_that_is_still_gdsbench_s(own_pattern_file):
    """kill -9 leaves the file's signature stale (its mtime moved): every block still carries the
    pattern, so the file is still gdsbench's, and a read --verify finds nothing wrong."""
    proc = subprocess.Popen([sys.executable, "-m", "gdsbench", "run", own_pattern_file, "--rw", "randwrite", "--bs", "4K",
                             "--runtime", "60s"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_workers(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert created_by_gdsbench(own_pattern_file)
    res = subprocess.run([sys.executable, "-m", "gdsbench", "run", own_pattern_file, "--verify", "--json"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and json.loads(res.stdout)["verify_mismatches"] == 0, res.stderr


def test_buffered_writes_that_rewrite_the_region_say_the_cache_took_the_rewrites(gdsbench, own_pattern_file):
    d = run_json(gdsbench, own_pattern_file, "--rw", "write", "--buffered", "--io-size", "16M", "--fsync-end")
    assert any("flushes only the last copy of each page" in w for w in d["warnings"])


def test_a_sweep_over_rw_and_compare_set_writes_beside_reads(gdsbench, tmp_path):
    from gdsbench.system.prepare import prepare

    for tier in ("a", "b"):
        prepare(str(tmp_path / f"{tier}.dat"), 8 * MiB)
        res = gdsbench("sweep", tmp_path / f"{tier}.dat", "--rw", "read,write", "--bs", "1M", "--io-size", "8M",
                       "--results", tmp_path / "runs", "--name", tier)
        assert res.code == 0, res.err
    a, b = sorted((tmp_path / "runs").iterdir())
    res = gdsbench("compare", a, b, "--out", tmp_path / "page")
    assert res.code == 0, res.err
    assert "rw=read" in res.out and "rw=write" in res.out
    res = gdsbench("sweep", tmp_path / "a.dat", "--rw", "read,write", "--bs", "1M", "--io-size", "8M", "--fsync-end",
                   "true", "--results", tmp_path / "fsynced", "--name", "f")
    assert res.code == 0, res.err
    (run,) = (tmp_path / "fsynced").iterdir()
    (skipped,) = json.loads((run / "run.json").read_text())["skipped"]  # a read cannot fsync: said, not run
    assert skipped["values"] == {"rw": "read"} and "--fsync-end: only with --rw write" in skipped["reason"]


def test_writes_that_cannot_mean_anything_are_refused(gdsbench, own_pattern_file):
    assert_one_line_error(gdsbench("run", own_pattern_file, "--rw", "write", "--procs", "2", "--layout", "shared-all",
                                   "--io-size", "1M"), "every process would write the same blocks")
    assert_one_line_error(gdsbench("run", "--engine", "null", "--rw", "write", "--fsync-end", "--io-size", "1M"),
                          "it writes nothing to sync")


def test_kvikio_writes_restamp_their_blocks_against_a_test_double(own_pattern_file, monkeypatch):
    """--mode kvikio --rw write: CuFile.pwrite from (here) TEST DOUBLES of kvikio and cupy (numpy in
    host memory, tests/test_gpu.py): the loop, the blocks restamped for where they land, the fsync
    and the label. kvikio's own writes into GPU memory are untested on GPU."""
    from test_gpu import _FakeCuFile, fake_kvikio_modules

    from gdsbench.execution import kvikio_mode
    from gdsbench.execution.runner import plan
    from gdsbench.job.result import Result
    from gdsbench.job.spec import JobSpec
    from gdsbench.system.pattern import check_written

    fake_kvikio_modules(monkeypatch)
    spec = plan(JobSpec(path=own_pattern_file, bs=MiB, io_size=8 * MiB, rw="randwrite", fsync_end=True,
                        fsync_every=2)).spec.replace(mode="kvikio", engine="kvikio", qd=4)
    raw, path = kvikio_mode.run(spec)
    r = Result.from_run(spec, raw, data_path=path)
    assert r.ops == 8 and r.bytes == 8 * MiB and r.fsync.count == 4 + 1  # every 2 writes, then at the end
    assert _FakeCuFile.opened[-1] == "r+" and "writes and a bounce buffer" in path
    assert check_written(own_pattern_file, 0, 4 * MiB)[1] == 0  # every block a pattern block where it landed
