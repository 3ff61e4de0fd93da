from __future__ import annotations

import os

import pytest

from gdsbench import cli, prepare

MiB = 1024 * 1024


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
