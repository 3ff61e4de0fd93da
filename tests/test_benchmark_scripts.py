"""The logic inside the benchmark scripts that decides their verdicts (the
scripts themselves take minutes and need fio or a GPU, so they are not run here)."""

import importlib.util
import os
import sys

import pytest


def load(name):
    path = os.path.join(os.path.dirname(__file__), "..", "benchmarks", f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_median_interval_uses_the_order_statistics_that_cover_95_percent():
    vs_fio = load("vs_fio")
    assert vs_fio.median_interval(list(range(10))) == (1, 8)  # x(2), x(9): 97.9%
    assert vs_fio.median_interval(list(range(20))) == (5, 14)  # x(6), x(15): 95.9%
    assert vs_fio.median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few values: the whole range,
    assert vs_fio.interval_coverage(3, 1) == 0.75  # which covers less, and the notes say how much
    assert round(vs_fio.interval_coverage(10, 2), 3) == 0.979


@pytest.mark.parametrize("median, interval, verdict", [
    (0.98, (0.90, 1.05), "PASS"),   # the median meets the target
    (0.95, (0.90, 0.99), "NOISE"),  # it misses, but the interval reaches the target
    (0.93, (0.90, 0.96), "FAIL"),   # the whole interval misses: a real gap
])
def test_verdict_tells_a_gap_from_noise(median, interval, verdict):
    assert load("vs_fio").judge(median, interval, 0.97) == verdict


def test_p50_band_is_judged_on_both_sides():
    vs_fio = load("vs_fio")
    assert vs_fio.judge(1.15, (1.11, 1.20), 0.90, 1.10) == "FAIL"
    assert vs_fio.judge(1.05, (0.95, 1.20), 0.90, 1.10) == "PASS"


def test_kvikio_benchmark_figure_is_read_from_its_output_line():
    gpu_modes = load("gpu_modes")
    # the shape kvikio.benchmarks.single_node_io prints (api and name padded, dask's format_bytes)
    out = ("nthreads          | 8\n"
           "cufile read       |   12.50 GiB/s ±  1.20 % (12.40 GiB/s, 12.60 GiB/s)\n"
           "cufile write      |  900.00 MiB/s\n")
    assert gpu_modes.kvikio_read_rate(out) == 12.5 * (1 << 30)
    assert gpu_modes.kvikio_read_rate("cufile write      |  900.00 MiB/s\n") is None
