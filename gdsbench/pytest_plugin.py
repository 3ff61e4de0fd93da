"""gdsbench in pytest-benchmark: a storage read as a benchmark test.

Installed with gdsbench (the `pytest11` entry point), so a test writes

    def test_nvme_1m(storage_bench):
        r = storage_bench(bs="1M", qd=16, pattern="seq")
        assert r.bandwidth > 2e9

and pytest-benchmark reports it, saves it (--benchmark-json, --benchmark-autosave) and compares it
(--benchmark-compare, --benchmark-compare-fail) as it does any other benchmark.

How the figures become pytest-benchmark's samples. They are measured natively, not by
timing a Python call: each measurement's throughput timeline (one value per --interval,
100 ms by default) gives one sample per full interval, over every repeat. A sample is the
time that interval took per GiB read, or per read when the block size is under 64 KiB, so
that:
  - `ops` (1/mean) reads as GiB/s, or as IOPS;
  - a slower storage is a larger sample, which `--benchmark-compare-fail=mean:10%` catches
    (pytest-benchmark flags only increases);
  - stddev and iqr say how steady the reads were within and between runs.
The per-read latency percentiles, bandwidth, IOPS, CPU per GB, page cache state, data
path and the job itself go in `extra_info`. pytest-benchmark has no public way to feed
samples; this uses its fixture's `_make_stats` and `Metadata.update`, pinned to 5.x, and a
test fails loudly if they change.

Under pytest-xdist storage tests would run at once and measure each other: the fixture
refuses to run in an xdist worker (pytest-benchmark itself turns off there).
"""

from __future__ import annotations

import pytest

from gdsbench.job.errors import GdsbenchError, UsageError
from gdsbench.job.spec import BY_KEY, ENGINE_INFO, JobSpec, spec_from_values

PREFIX = "--gdsbench-"
# Job options whose defaults a session sets from the command line, under the prefix.
SESSION_OPTIONS = ("path", "runtime", "ramp", "mode", "gpu")
IOPS_BELOW = 64 * 1024  # block sizes under this are IOPS tests: samples per read, not per GiB
GIB = 1 << 30


def pytest_addoption(parser):
    group = parser.getgroup("gdsbench", "gdsbench storage benchmarks (the storage_bench fixture)")
    for key in SESSION_OPTIONS:  # declared from the option table: the same help as `gdsbench run`
        opt = BY_KEY[key]
        group.addoption(f"{PREFIX}{key.replace('_', '-')}", dest=f"gdsbench_{key}", default=None,
                        metavar=key.upper(), help=f"default for every storage_bench call: {opt.help}")
    group.addoption(f"{PREFIX}repeat", dest="gdsbench_repeat", type=int, default=1, metavar="N",
                    help="measure each storage_bench call N times; every repeat's intervals are samples (default 1)")
    group.addoption(f"{PREFIX}unavailable", dest="gdsbench_unavailable", choices=("skip", "fail"), default="skip",
                    help="a GPU mode (or engine) this machine cannot run: skip with the reason (default), or fail")


def pytest_configure(config):
    config.addinivalue_line("markers", "gdsbench(**job_options): defaults for storage_bench in this test or module")


def _defaults(request) -> dict:
    """The job options in force before the call's own: the markers' (module, then test: the
    closest wins), then the command line's, which a session uses to shorten or retarget a suite."""
    values = {}
    for marker in reversed(list(request.node.iter_markers("gdsbench"))):
        values.update(marker.kwargs)
    for key in SESSION_OPTIONS:
        value = request.config.getoption(f"gdsbench_{key}")
        if value is not None:
            values[key] = value
    return values


def _samples(result) -> tuple[list[float], str]:
    """Seconds per GiB (or per read) of each full timeline interval, and the unit."""
    spec = result.spec
    per_read = spec.bs < IOPS_BELOW
    interval_s = spec.interval_ns / 1e9
    intervals = list(result.timeline_bytes)
    if intervals and result.elapsed_ns - (len(intervals) - 1) * spec.interval_ns < spec.interval_ns:
        intervals = intervals[:-1]  # the last one ends with the run, part-way through
    samples = []
    for nbytes in intervals:
        nbytes = max(nbytes, spec.bs)  # an interval that completed nothing still counts, as one block's worth
        samples.append(interval_s * spec.bs / nbytes if per_read else interval_s * GIB / nbytes)
    if not samples and result.bytes:  # a run shorter than an interval: one sample for the whole of it
        samples = [result.seconds * (spec.bs if per_read else GIB) / result.bytes]
    return samples, "seconds per read" if per_read else "seconds per GiB"


def _extra_info(result, unit: str, repeats: int) -> dict:
    s = result.summary()
    return {
        "sample_unit": unit,
        "ops_unit": "IOPS" if unit == "seconds per read" else "GiB/s",
        "repeats": repeats,
        "bandwidth_bytes_per_s": s["bandwidth_bytes_per_s"],
        "iops": s["iops"],
        **{k: s[k] for k in s if k.startswith("lat_")},
        "cpu_s_per_gb": s["cpu_s_per_gb"],
        "cached_fraction": s["cached_fraction"],
        "data_path": s["data_path"],
        "warnings": result.warnings,
        "job": {k: (list(v) if isinstance(v, tuple) else v) for k, v in result.to_dict()["spec"].items()},
    }


def _benchmark(request):
    try:
        return request.getfixturevalue("benchmark")
    except pytest.FixtureLookupError:
        pytest.fail("storage_bench reports through pytest-benchmark: pip install 'pytest-benchmark>=5,<6'",
                    pytrace=False)


@pytest.fixture
def storage_bench(request):
    """storage_bench(path=None, **job_options) -> gdsbench.Result: measure one job (the options of
    `gdsbench run`, e.g. bs="1M", qd=16, pattern="seq") and hand it to pytest-benchmark."""
    from gdsbench.execution.runner import resolve_engine, run  # here: a pytest session that never asks pays nothing
    from gdsbench.system import gpu

    if hasattr(request.config, "workerinput"):
        pytest.fail("storage benchmarks under pytest-xdist would run at once and measure each other: "
                    "run them without -n", pytrace=False)
    repeats = request.config.getoption("gdsbench_repeat")
    unavailable = request.config.getoption("gdsbench_unavailable")
    used = []

    def measure(path: str | None = None, **job_options):
        if used:
            pytest.fail("storage_bench measures once per test: parametrize the test for more points", pytrace=False)
        used.append(True)
        values = {**_defaults(request), **job_options}
        if path is not None:
            values["path"] = path
        try:
            spec: JobSpec = spec_from_values(values)
            if not spec.path and ENGINE_INFO[resolve_engine(spec)]["reads_file"]:  # no target given: the scratch file
                from gdsbench.system.scratch import SCRATCH_PATH, ensure_scratch

                ensure_scratch()
                spec = spec.replace(path=SCRATCH_PATH)
            if spec.on_gpu:  # what this machine cannot run: skipped with the reason, never faked
                try:
                    gpu.require(spec.replace(engine=resolve_engine(spec)))
                except UsageError as e:
                    if unavailable == "skip":
                        pytest.skip(f"cannot run here: {e}")
                    raise
            benchmark = _benchmark(request)  # only now: a test skipped above never touched it
            results = [run(spec) for _ in range(1 if benchmark.disabled else max(1, repeats))]
        except GdsbenchError as e:
            pytest.fail(f"gdsbench: {e}", pytrace=False)
        middle = sorted(results, key=lambda r: r.bandwidth)[len(results) // 2]  # the median run
        if benchmark.disabled:  # --benchmark-disable: run it, as a plain test
            return middle
        samples, unit = [], ""
        for r in results:
            more, unit = _samples(r)
            samples += more
        benchmark.extra_info.update(_extra_info(middle, unit, len(results)))
        benchmark._mode = "gdsbench storage_bench"  # the fixture is used: pytest-benchmark must not use it again
        stats = benchmark._make_stats(1)
        for sample in samples:
            stats.update(sample)
        return middle

    return measure
