import os

import pytest

from gdsbench import UsageError, prepare
from gdsbench.system.prepare import created_by_gdsbench


def test_prepare_writes_the_pattern(tmp_path, gdsbench):
    path = tmp_path / "p.dat"
    res = gdsbench("prepare", path, "--size", "1M")
    assert res.code == 0 and "wrote" in res.out
    assert os.path.getsize(path) == 1 << 20 and created_by_gdsbench(str(path))
    res = gdsbench("run", path, "--bs", "4K", "--verify", "--io-size", "1M", "--engine", "psync")
    assert res.code == 0 and "0 mismatched" in res.out


def test_prepare_reuses_an_identical_file_and_rewrites_when_forced(tmp_path):
    path = str(tmp_path / "p.dat")
    assert not prepare(path, 1 << 20).reused
    assert prepare(path, 1 << 20).reused
    assert not prepare(path, 1 << 20, force=True).reused
    assert not prepare(path, 2 << 20).reused  # a different size is rewritten
    assert os.path.getsize(path) == 2 << 20


def test_prepare_refuses_a_file_it_did_not_create(tmp_path, gdsbench):
    path = tmp_path / "precious.txt"
    path.write_bytes(b"my data" * 1000)
    res = gdsbench("prepare", path, "--size", "1M")
    assert res.code == 2 and "refusing to overwrite" in res.err
    assert path.read_bytes() == b"my data" * 1000


@pytest.mark.parametrize("target", ["/dev/null", "/dev/zero"])
def test_prepare_refuses_anything_not_a_regular_file(target, gdsbench):
    res = gdsbench("prepare", target, "--size", "1M")
    assert res.code == 2 and "only writes regular files it created" in res.err


def test_prepare_refuses_a_symlink(tmp_path):
    real = tmp_path / "real.dat"
    prepare(str(real), 1 << 20)
    link = tmp_path / "link.dat"
    link.symlink_to(real)
    with pytest.raises(UsageError, match="only writes regular files"):
        prepare(str(link), 1 << 20)


def test_prepare_size_must_be_whole_blocks(tmp_path, gdsbench):
    res = gdsbench("prepare", tmp_path / "x", "--size", "1000")
    assert res.code == 2 and "--size" in res.err and "4 KiB" in res.err


def test_interrupted_prepare_leaves_nothing(tmp_path):
    path = str(tmp_path / "p.dat")

    def stop(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        prepare(path, 32 << 20, progress=stop)
    assert os.listdir(tmp_path) == []


def test_progress_is_reported(tmp_path):
    seen = []
    prepare(str(tmp_path / "p.dat"), 24 << 20, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (24 << 20, 24 << 20) and len(seen) == 3
