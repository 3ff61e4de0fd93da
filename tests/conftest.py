from __future__ import annotations

import os

import pytest

from gdsbench import cli, prepare

MiB = 1024 * 1024
BLKIO = "/sys/fs/cgroup/blkio"


@pytest.fixture(scope="session")
def pattern_file(tmp_path_factory) -> str:
    """A 16 MiB file written by `gdsbench prepare`, shared read-only by tests."""
    path = str(tmp_path_factory.mktemp("data") / "pattern.dat")
    prepare(path, 16 * MiB, seed=7)
    return path


@pytest.fixture
def own_pattern_file(tmp_path) -> str:
    """A 4 MiB pattern file a test may corrupt."""
    path = str(tmp_path / "own.dat")
    prepare(path, 4 * MiB, seed=3)
    return path


class CliResult:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err


@pytest.fixture
def gdsbench(capsys):
    """Run `gdsbench ARGS...` in-process; returns exit code and captured output."""

    def invoke(*args: str) -> CliResult:
        code = cli.main([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke


def is_root() -> bool:
    return os.geteuid() == 0


@pytest.fixture
def disk_file(tmp_path):
    """A pattern file on a block device (O_DIRECT reads reach the disk), with its device's major:minor."""
    path = tmp_path / "tier.dat"
    prepare(str(path), 64 * MiB)
    st = os.stat(path)
    return str(path), f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


@pytest.fixture
def throttle(disk_file):
    """A blkio cgroup that reads the disk at 20 MB/s: a real slower tier, not a faked number.
    Its wrap(cmd) runs a command, and what it starts, inside the cgroup."""
    from benchmarks.common import Throttle

    if not os.path.isdir(BLKIO) or not os.access(BLKIO, os.W_OK):
        pytest.skip(f"no writable blkio cgroup (v1) at {BLKIO}: cannot make a slower tier here")
    try:
        tier = Throttle(disk_file[0], 20 * MiB, "test")
    except OSError as e:
        pytest.skip(f"the blkio throttle refused {disk_file[1]}: {e.strerror}")
    yield tier
    tier.close()
