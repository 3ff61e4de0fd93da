"""gdsbench in pytest-benchmark: a storage read as a benchmark test.

Installed with gdsbench (the `pytest11` entry point), so a test writes

    def test_nvme_1m(storage_bench):
        r = storage_bench(bs="1M", qd=16, pattern="seq")
        assert r.bandwidth > 2e9

and pytest-benchmark reports it, saves it (--benchmark-json, --benchmark-autosave) and compares it
(--benchmark-compare, --benchmark-compare-fail) as it does any other benchmark.

How the figures become pytest-benchmark's statistics. A sample is a round of real work: one
native run of a fixed number of reads (the same in every round), timed natively from the first
read issued to the last completed. pytest-benchmark divides a round's time by its iterations,
as it does for any benchmark; here the iterations of a round are its reads. So:
  - min, mean, median, stddev and iqr are seconds per read, each averaged over one round;
  - `ops` (iterations per second) is reads per second: IOPS, on every row;
  - a slower storage is a longer round, which `--benchmark-compare-fail=mean:X%` catches
    once bandwidth drops by X/(100+X) (20% fires at a 16.7% drop).
A round holds as many reads as fill about 1/10 of --gdsbench-runtime, found by a warm-up run
(the ramp) and rounded down to a power of two, and at least 4 times the reads in flight; an
`io_size` given to storage_bench fixes it instead (per process, as in `gdsbench run`).
Rounds run until --gdsbench-runtime is measured, and never fewer than pytest-benchmark's
--benchmark-min-rounds (5). `extra_info` holds GiB/s, IOPS and the latency percentiles of
each round and of the whole, the round's size, CPU per GB, page cache state, data path and
the job. pytest-benchmark has no public way to feed samples; this uses its fixture's
`_make_stats`, `_min_rounds` and `Metadata.update`, pinned to 5.x, and a test fails loudly if
they change.

Under pytest-xdist storage tests would run at once and measure each other: the fixture
refuses to run in an xdist worker (pytest-benchmark itself turns off there).
"""

from __future__ import annotations

import pytest

from gdsbench.job.errors import GdsbenchError, UsageError
from gdsbench.job.result import PERCENTILES, Result, back_to_back, percentile_key
from gdsbench.job.spec import BY_KEY, DEFAULT_RUNTIME_NS, ENGINE_INFO, JobSpec, spec_from_values

PREFIX = "--gdsbench-"
# Job options whose defaults a session sets from the command line, under the prefix.
SESSION_OPTIONS = ("path", "runtime", "ramp", "mode", "gpu")
GIB = 1 << 30
ROUNDS_WANTED = 10  # a round is sized to fill this share of --gdsbench-runtime
PIPES_PER_ROUND = 4  # at least this many times the reads in flight, so filling and draining the queue is a small part
WARMUP_NS = 200_000_000  # the warm-up when the job has no --ramp: long enough to size a round
MAX_ROUNDS = 10_000


def pytest_addoption(parser):
    group = parser.getgroup("gdsbench", "gdsbench storage benchmarks (the storage_bench fixture)")
    for key in SESSION_OPTIONS:  # declared from the option table: the same help as `gdsbench run`
        opt = BY_KEY[key]
        group.addoption(f"{PREFIX}{key.replace('_', '-')}", dest=f"gdsbench_{key}", default=None,
                        metavar=key.upper(), help=f"default for every storage_bench call: {opt.help}")
    group.addoption(f"{PREFIX}repeat", dest="gdsbench_repeat", type=int, default=1, metavar="N",
                    help="measure each storage_bench call N times over, each a warm-up and its rounds; every round "
                         "is a sample (default 1)")
    group.addoption(f"{PREFIX}unavailable", dest="gdsbench_unavailable", choices=("skip", "fail"), default="skip",
                    help="a GPU mode (or engine) this machine cannot run: skip with the reason (default), or fail")


def pytest_configure(config):
    config.addinivalue_line("markers", "gdsbench(**job_options): defaults for storage_bench in this test or module")
    # a bad session option is one usage error, before any test runs, not a failure in every test
    try:
        spec_from_values({k: v for k in SESSION_OPTIONS if (v := config.getoption(f"gdsbench_{k}")) is not None})
    except UsageError as e:
        raise pytest.UsageError(f"{PREFIX}{str(e).lstrip('-')}") from None
    if config.getoption("gdsbench_repeat") < 1:
        raise pytest.UsageError(f"{PREFIX}repeat {config.getoption('gdsbench_repeat')}: must be at least 1")


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


def _floor_power_of_two(n: float) -> int:
    return 1 << (int(n).bit_length() - 1) if n >= 1 else 1


def round_reads(spec: JobSpec, warmup: Result | None, probe: Result | None, budget_ns: int) -> int:
    """Reads per process in one round: what fills budget/ROUNDS_WANTED at the rate the warm-up
    (or, where it completed too few reads, a natively timed probe) measured, rounded down to a
    power of two so that small changes in speed keep the same round; at least PIPES_PER_ROUND
    times the reads in flight. `io_size` in the job fixes it instead."""
    per_process_depth = spec.qd * spec.threads
    if spec.io_size:
        return spec.io_size // spec.bs
    measured = probe if probe is not None else warmup
    rate = measured.iops / spec.procs if measured is not None and measured.ops else 0.0
    wanted = rate * budget_ns / 1e9 / ROUNDS_WANTED
    return max(PIPES_PER_ROUND * per_process_depth, _floor_power_of_two(wanted))


def measure_rounds(spec: JobSpec, run, budget_ns: int, min_rounds: int) -> tuple[list[Result], int]:
    """Warm up, size a round, and run rounds until budget_ns is measured (at least min_rounds):
    the rounds' results and the reads per process in each. Ctrl-C: KeyboardInterrupt, so pytest
    stops and no partial measurement is saved as if it were whole."""
    def checked(result: Result) -> Result:
        if result.interrupted:
            raise KeyboardInterrupt
        return result

    warmup = probe = None
    if spec.ramp_ns or not spec.io_size:
        warmup = checked(run(spec.replace(runtime_ns=spec.ramp_ns or WARMUP_NS, ramp_ns=0, io_size=0)))
        if not spec.io_size and warmup.ops < spec.qd * spec.threads * spec.procs:  # too few reads to give a rate
            probe = checked(run(spec.replace(runtime_ns=0, ramp_ns=0, io_size=spec.qd * spec.threads * spec.bs)))
    reads = round_reads(spec, warmup, probe, budget_ns)
    one_round = spec.replace(runtime_ns=0, ramp_ns=0, io_size=reads * spec.bs)
    rounds: list[Result] = []
    measured = 0
    while len(rounds) < min_rounds or (measured < budget_ns and len(rounds) < MAX_ROUNDS):
        rounds.append(checked(run(one_round)))
        measured += rounds[-1].elapsed_ns
    return rounds, reads


def _figures(r: Result) -> dict:
    """GiB/s, IOPS and the latency percentiles of one run (a round, or all of them)."""
    lat = r.latency
    return {"seconds": r.seconds, "bytes": r.bytes, "reads": r.ops, "gib_per_s": r.bandwidth / GIB,
            "bandwidth_bytes_per_s": r.bandwidth, "iops": r.iops, "lat_min_ns": lat.min, "lat_mean_ns": lat.mean,
            **{f"lat_{percentile_key(p)}_ns": r.percentile(p) for p in PERCENTILES}, "lat_max_ns": lat.max}


def _extra_info(whole: Result, rounds: list[Result], reads_per_round: int, repeats: int) -> dict:
    return {
        "sample": "one round: a native run of a fixed number of reads, first issue to last completion",
        "time_unit": "seconds per read (a round's time / its reads, pytest-benchmark's iterations)",
        "ops_unit": "reads per second (IOPS)",
        "round_reads": reads_per_round,
        "round_bytes": reads_per_round * whole.spec.bs,
        "repeats": repeats,
        **_figures(whole),
        "cpu_s_per_gb": whole.cpu_s_per_gb,
        "cached_fraction": whole.cached_fraction,
        "data_path": whole.data_path,
        "warnings": whole.warnings,
        "rounds": [_figures(r) for r in rounds],
        "job": {k: (list(v) if isinstance(v, tuple) else v) for k, v in whole.to_dict()["spec"].items()},
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
    `gdsbench run`, e.g. bs="1M", qd=16, pattern="seq") in rounds and hand them to pytest-benchmark.
    The Result is every round's as one: bytes and time summed, latency histograms merged."""
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
            spec: JobSpec = spec_from_values(values).validate()
            if not spec.path and ENGINE_INFO[resolve_engine(spec)]["reads_file"]:  # no target given: the scratch file
                from gdsbench.system.scratch import SCRATCH_PATH, ensure_scratch

                ensure_scratch()
                spec = spec.replace(path=SCRATCH_PATH)
            if spec.on_gpu:  # what this machine cannot run: skipped with the reason, never faked
                try:
                    gpu.require(spec)
                    resolve_engine(spec)
                except UsageError as e:
                    if unavailable == "skip":
                        pytest.skip(f"cannot run here: {e}")
                    raise
            benchmark = _benchmark(request)  # only now: a test skipped above never touched it
            if benchmark.disabled:  # --benchmark-disable: run it once, as a plain test
                result = run(spec, record_environment=False)
                if result.interrupted:
                    raise KeyboardInterrupt
                return result
            budget = spec.runtime_ns or DEFAULT_RUNTIME_NS
            rounds: list[Result] = []
            for _ in range(repeats):
                more, reads = measure_rounds(spec, lambda s: run(s, record_environment=False), budget,
                                             benchmark._min_rounds)
                if spec.io_size == 0:  # later repeats keep the first one's round
                    spec = spec.replace(io_size=reads * spec.bs)
                rounds += more
        except GdsbenchError as e:
            pytest.fail(f"gdsbench: {e}", pytrace=False)
        whole = back_to_back(rounds)
        iterations = reads * spec.procs  # the reads of one round, every process's
        benchmark.extra_info.update(_extra_info(whole, rounds, iterations, repeats))
        benchmark._mode = "gdsbench storage_bench"  # the fixture is used: pytest-benchmark must not use it again
        stats = benchmark._make_stats(iterations)
        for r in rounds:  # a round's time, as if it had done exactly `iterations` reads (it does)
            stats.update(r.seconds * iterations / r.ops)
        return whole

    return measure
