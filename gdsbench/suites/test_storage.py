"""The shipped storage suite (see gdsbench/suites/__init__.py and docs/pytest.md)."""

import pytest

from gdsbench.job.modes import MODES
from gdsbench.job.spec import ENGINE_INFO

pytestmark = pytest.mark.gdsbench(runtime="5s", ramp="500ms")


@pytest.mark.parametrize("qd", [1, 32])
def test_random_4k(storage_bench, qd):
    storage_bench(bs="4K", qd=qd, pattern="rand")


@pytest.mark.parametrize("bs", ["128K", "1M"])
def test_sequential(storage_bench, bs):
    storage_bench(bs=bs, qd=16, pattern="seq")


@pytest.mark.parametrize("mode", list(MODES))
def test_mode_1m(storage_bench, mode):
    synchronous = ENGINE_INFO[MODES[mode].engines[0]]["max_depth"] == 1
    depth = {"threads": 8} if synchronous else {"qd": 8}  # gds's first engine (cuFileRead): depth from threads
    storage_bench(bs="1M", pattern="seq", mode=mode, **depth)


def test_processes(storage_bench):
    storage_bench(bs="1M", qd=8, pattern="seq", procs=2)
