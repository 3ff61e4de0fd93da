"""The native latency histogram: bounded error, exact merging, stable layout."""

import pickle

import numpy as np
import pytest

from gdsbench._native import LatencyHistogram as H

PERCENTILES = [1, 10, 25, 50, 75, 90, 99, 99.9, 99.99]


def exact_percentile(samples: np.ndarray, p: float) -> float:
    """The sample of rank ceil(p/100 * n), the definition the histogram follows
    (numpy's 'inverted_cdf', with the rank computed in exact decimal arithmetic:
    0.999 * 16000 must be 15984, not 15984.000000000002 rounded up)."""
    from decimal import Decimal
    from math import ceil

    rank = max(1, ceil(Decimal(str(p)) / 100 * len(samples)))
    return float(np.sort(samples)[rank - 1])


def spanning_samples(n: int, seed: int) -> np.ndarray:
    """Latencies from 1 ns to ~10 s, log-uniform, so every group is exercised."""
    rng = np.random.default_rng(seed)
    return np.exp(rng.uniform(np.log(1), np.log(1e10), n)).astype(np.uint64)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentiles_within_one_percent_of_exact(seed):
    samples = spanning_samples(200_000, seed)
    h = H()
    h.add(samples)
    for p in PERCENTILES:
        exact = exact_percentile(samples, p)
        assert abs(h.percentile(p) - exact) <= 0.01 * exact, p


@pytest.mark.parametrize("scale", [100, 10_000, 1_000_000, 100_000_000, 5_000_000_000])
def test_percentiles_at_each_scale(scale):
    rng = np.random.default_rng(scale)
    samples = (rng.lognormal(0, 0.5, 50_000) * scale).astype(np.uint64)
    h = H()
    h.add(samples)
    for p in PERCENTILES:
        exact = exact_percentile(samples, p)
        assert abs(h.percentile(p) - exact) <= 0.01 * exact


def test_small_values_are_exact():
    samples = np.arange(0, 128, dtype=np.uint64).repeat(3)
    h = H()
    h.add(samples)
    for p in PERCENTILES:
        assert h.percentile(p) == exact_percentile(samples, p)


def test_min_max_mean_variance_exact():
    samples = spanning_samples(10_000, 9)
    h = H()
    h.add(samples)
    assert h.count == samples.size
    assert h.min == samples.min() and h.max == samples.max()
    assert h.mean == pytest.approx(samples.astype(float).mean(), rel=1e-9)
    assert h.variance == pytest.approx(samples.astype(float).var(ddof=1), rel=1e-9)
    assert h.percentile(100) == samples.max()
    assert h.percentile(0) == samples.min()


def test_reported_values_never_exceed_max():
    h = H()
    h.add(np.array([1_000_001], dtype=np.uint64))  # lands mid-bucket
    assert h.percentile(99.99) == 1_000_001


def test_merge_is_exact():
    a_samples, b_samples = spanning_samples(30_000, 4), spanning_samples(50_000, 5)
    a, b, pooled = H(), H(), H()
    a.add(a_samples)
    b.add(b_samples)
    pooled.add(np.concatenate([a_samples, b_samples]))
    a.merge(b)
    assert np.array_equal(a.counts, pooled.counts)
    assert (a.count, a.min, a.max) == (pooled.count, pooled.min, pooled.max)
    assert a.mean == pytest.approx(pooled.mean, rel=1e-12)
    assert a.variance == pytest.approx(pooled.variance, rel=1e-9)
    for p in PERCENTILES:
        assert a.percentile(p) == pooled.percentile(p)


def test_bucket_layout():
    assert H.BUCKETS == 2240
    for i in range(H.BUCKETS):
        low, width = H.bucket_low(i), H.bucket_width(i)
        assert H.index_of(low) == i and H.index_of(low + width - 1) == i
        assert width == 1 or width / low <= 1 / 64  # relative width bound -> midpoint error <= 1/128
        if i + 1 < H.BUCKETS:
            assert H.bucket_low(i + 1) == low + width  # contiguous, no gaps


def test_pickle_round_trip():
    h = H()
    h.add(spanning_samples(1000, 6))
    back = pickle.loads(pickle.dumps(h))
    assert np.array_equal(back.counts, h.counts)
    assert (back.count, back.min, back.max, back.mean, back.m2) == (h.count, h.min, h.max, h.mean, h.m2)
