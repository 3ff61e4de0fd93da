"""The order workers visit blocks in (the worker loop's own OffsetSequence)."""

import numpy as np
import pytest

from gdsbench._native import OffsetSequence


def offset_sequence(first_byte, nblocks, bs, random, seed, count):
    return OffsetSequence(first_byte, nblocks, bs, random, seed).take(count)


@pytest.mark.parametrize("nblocks", [1, 2, 3, 7, 64, 1000, 4097])
def test_random_pass_visits_every_block_once(nblocks):
    offs = offset_sequence(first_byte=8192, nblocks=nblocks, bs=512, random=True, seed=11, count=2 * nblocks)
    for one_pass in (offs[:nblocks], offs[nblocks:]):
        blocks = (one_pass - 8192) // 512
        assert sorted(blocks.tolist()) == list(range(nblocks))


def test_random_order_is_seeded_and_changes_each_pass():
    n = 5000
    a = offset_sequence(0, n, 4096, True, 1, 2 * n)
    b = offset_sequence(0, n, 4096, True, 1, 2 * n)
    c = offset_sequence(0, n, 4096, True, 2, n)
    assert np.array_equal(a, b)  # reproducible
    assert not np.array_equal(a[:n], c)  # seed matters
    assert not np.array_equal(a[:n], a[n:])  # new order each pass
    # not secretly sequential: few neighbours in a row
    steps = np.diff(a[:n].astype(np.int64))
    assert np.mean(steps == 4096) < 0.01


def test_workers_get_different_orders_from_one_seed():
    a = OffsetSequence(0, 1000, 4096, True, 7, worker=0).take(1000)
    b = OffsetSequence(0, 1000, 4096, True, 7, worker=1).take(1000)
    assert not np.array_equal(a, b)


def test_sequential_wraps():
    offs = offset_sequence(4096, 3, 4096, False, 1, 7)
    assert offs.tolist() == [4096, 8192, 12288, 4096, 8192, 12288, 4096]
