"""gdsbench in pytest-benchmark: a storage read as a benchmark test.

Installed with gdsbench (the `pytest11` entry point), so a test writes

    def test_nvme_1m(storage_bench):
        r = storage_bench(bs="1M", qd=16, pattern="seq")
        assert r.bandwidth > 2e9

and pytest-benchmark reports it, saves it (--benchmark-json, --benchmark-autosave) and compares it
(--benchmark-compare, --benchmark-compare-fail) as it does any other benchmark.

How the figures become pytest-benchmark's statistics. A sample is a round of real work: a fixed
number of reads (the same in every round) completed, timed natively. The rounds run back to
back in one native run (--round-reads), which never pauses between them: no round drains or
refills the queue, or gives the storage an idle moment to recover in. pytest-benchmark divides
a round's time by its iterations, as it does for any benchmark; here the iterations of a round
are its reads. So:
  - min, mean, median, stddev and iqr are seconds per read, each averaged over one round;
  - `ops` (iterations per second) is reads per second: IOPS, on every row;
  - a slower storage is a longer round, which `--benchmark-compare-fail=mean:X%` catches
    once bandwidth drops by X/(100+X) (20% fires at a 16.7% drop).
A round holds as many reads as fill 1/10 of --gdsbench-runtime and 200 ms at least, at the
rate a warm-up run (the ramp) measured, and at least 4 times the reads in flight; an
`io_size` given to storage_bench fixes it instead (per process, as in `gdsbench run`).
There are as many rounds as fill --gdsbench-runtime at that rate, and never fewer than
pytest-benchmark's --benchmark-min-rounds (5). `extra_info` holds GiB/s, IOPS and
the latency percentiles of each round and of the whole, the round's size, CPU per GB, page
cache state, data path and the job. pytest-benchmark has no public way to feed samples; this
uses its fixture's `_make_stats`, `_min_rounds` and `Metadata.update`, pinned to 5.x, and a
test fails loudly if they change.

Under pytest-xdist storage tests would run at once and measure each other: the fixture
refuses to run in an xdist worker (pytest-benchmark itself turns off there).
"""

from __future__ import annotations

import math
import signal
import threading

import pytest

from gdsbench.job.errors import GdsbenchError, UsageError
from gdsbench.job.result import PERCENTILES, Result, percentile_key
from gdsbench.job.spec import BY_KEY, DEFAULT_RUNTIME_NS, JobSpec, spec_from_values

PREFIX = "--gdsbench-"
# Job options whose defaults a session sets from the command line, under the prefix.
SESSION_OPTIONS = ("path", "runtime", "ramp", "mode", "gpu")
GIB = 1 << 30
ROUNDS_WANTED = 10  # a round is sized to fill this share of --gdsbench-runtime...
MIN_ROUND_NS = 200_000_000  # ...and at least this long: storage that bursts (a token bucket, a cache) in short
# slices, such as the kernel's blkio throttle with its 100 ms slices, gives rounds shorter than that in turns
PIPES_PER_ROUND = 4  # at least this many times the reads in flight, so filling and draining the queue is a small part
WARMUP_NS = 200_000_000  # the warm-up when the job has no --ramp: long enough to size a round
FILL_NS = 10_000_000  # the measuring run's own ramp: its queues are full when the first round starts
MAX_ROUNDS = 1_000
UNENDING_ROUND = 2**62  # --round-reads for a warm-up: every read counted, no round ever complete


REGRESSED = pytest.StashKey[bool]()  # the comparison failed --benchmark-compare-fail: the session fails


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


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_terminal_summary(terminalreporter):
    """pytest-benchmark ends a session whose comparison fails --benchmark-compare-fail by raising
    from its summary, after listing the regressed tests: a traceback, and pytest's own summary
    line lost. Here it is a failed build instead: the list, one line, the summary, exit 1. With
    --gdsbench-repeat, it also says how far the session's own repeats moved (repeat_spread_line)."""
    outcome = yield
    try:
        from pytest_benchmark.session import PerformanceRegression
    except ImportError:
        return
    spread = repeat_spread_line(terminalreporter.config._benchmarksession.benchmarks)
    if spread:
        terminalreporter.write_line(spread)
    if isinstance(outcome.excinfo and outcome.excinfo[1], PerformanceRegression):
        outcome.force_result(None)
        terminalreporter.config.stash[REGRESSED] = True
        terminalreporter.write_line("gdsbench: the build fails: performance regressed beyond --benchmark-compare-fail "
                                    "(the tests are listed above)", red=True, bold=True)


def repeat_spread_line(benchmarks) -> str | None:
    """One line saying how far the session's own repeats moved (--gdsbench-repeat 2 or more): the
    smallest --benchmark-compare-fail=mean threshold this machine might honour, or None."""
    spreads = [(b.extra_info["repeat_spread"], b.name) for b in benchmarks
               if b.extra_info.get("repeat_spread") is not None]
    if not spreads:
        return None
    spread, name = max(spreads)
    return (f"gdsbench: this session's repeats moved up to {spread:.0%} ({name}): a --benchmark-compare-fail "
            f"threshold below that fires with nothing changed; set it above the spread of your own no-change "
            "sessions, which may be larger (docs/pytest.md)")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session):
    yield
    if session.config.stash.get(REGRESSED, False) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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


def round_reads(spec: JobSpec, warmup: Result | None, probe: Result | None, budget_ns: int) -> int:
    """Reads per process in one round: what fills budget/ROUNDS_WANTED, and MIN_ROUND_NS at
    least, at the rate the warm-up (or, where it completed too few reads, a natively timed
    probe) measured; at least PIPES_PER_ROUND times the reads in flight. `io_size` fixes it
    instead. (Each sample is per read and the rounds run back to back, so a round sized a
    little differently in another session still compares.)"""
    per_process_depth = spec.qd * spec.threads
    if spec.io_size:
        return spec.io_size // spec.bs
    measured = probe if probe is not None else warmup
    rate = measured.iops / spec.procs if measured is not None and measured.ops else 0.0
    wanted = rate * max(budget_ns / ROUNDS_WANTED, MIN_ROUND_NS) / 1e9
    return max(PIPES_PER_ROUND * per_process_depth, math.ceil(wanted))


def measure_rounds(spec: JobSpec, run, budget_ns: int, min_rounds: int) -> tuple[Result, int]:
    """Warm up, size a round, then one native run of that many rounds back to back (--round-reads):
    the run, and the reads per process in a round. As many rounds as fill budget_ns at the
    warm-up's rate, and at least min_rounds; the run never pauses between rounds, so no round
    drains or refills the queue or gives the storage an idle moment. Ctrl-C: KeyboardInterrupt,
    so pytest stops and no partial measurement is saved as if it were whole."""
    def checked(result: Result) -> Result:
        if result.interrupted:
            raise KeyboardInterrupt
        return result

    # the warm-up counts its reads as the rounds will (one round that never ends), so that its
    # rate is the rate the rounds run at, and they fill the runtime they are sized for
    counting = spec.replace(ramp_ns=0, round_reads=UNENDING_ROUND)
    warmup = probe = None
    if spec.ramp_ns or not spec.io_size:
        warmup = checked(run(counting.replace(runtime_ns=spec.ramp_ns or WARMUP_NS, io_size=0)))
        if not spec.io_size and warmup.ops < spec.qd * spec.threads * spec.procs:  # too few reads to give a rate
            probe = checked(run(counting.replace(runtime_ns=0, io_size=spec.qd * spec.threads * spec.bs)))
    reads = round_reads(spec, warmup, probe, budget_ns)
    measured = probe if probe is not None else warmup
    rate = measured.iops / spec.procs if measured is not None and measured.ops else 0.0
    rounds = max(min_rounds, math.ceil(budget_ns / 1e9 * rate / reads) if rate else min_rounds)
    rounds = min(rounds, max(min_rounds, MAX_ROUNDS))
    result = checked(run(spec.replace(runtime_ns=0, ramp_ns=FILL_NS, io_size=rounds * reads * spec.bs,
                                      round_reads=reads)))
    return result, reads


def _figures(r: Result, seconds: float, reads: int, latency) -> dict:
    """GiB/s, IOPS and the latency percentiles of a span of reads (a round, or all of them)."""
    nbytes = reads * r.spec.bs
    figures = {"seconds": seconds, "bytes": nbytes, "reads": reads, "gib_per_s": nbytes / seconds / GIB if seconds else 0.0,
               "bandwidth_bytes_per_s": nbytes / seconds if seconds else 0.0, "iops": reads / seconds if seconds else 0.0}
    if latency is not None:
        figures.update({"lat_min_ns": latency.min, "lat_mean_ns": latency.mean,
                        **{f"lat_{percentile_key(p)}_ns": latency.percentile(p) for p in PERCENTILES},
                        "lat_max_ns": latency.max})
    return figures


def _extra_info(runs: list[Result], reads_per_round: int, repeats: int) -> dict:
    whole = runs[0]
    rounds = [(r, t, r.round_latency[k] if r.round_latency else None) for r in runs for k, t in enumerate(r.round_ns)]
    total_s = sum(t for _, t, _ in rounds) / 1e9
    return {
        "sample": "one round: a fixed number of reads, timed natively, the rounds back to back in one run",
        "time_unit": "seconds per read (a round's time / its reads, pytest-benchmark's iterations)",
        "ops_unit": "reads per second (IOPS)",
        "round_reads": reads_per_round,
        "round_bytes": reads_per_round * whole.spec.bs,
        "repeats": repeats,
        # how far this session's repeats of the test moved (max/min - 1 of their seconds per read):
        # a --benchmark-compare-fail threshold under it fires with nothing changed
        "repeat_spread": (max(per_read) / min(per_read) - 1) if len(per_read := [
            sum(r.round_ns) / len(r.round_ns) for r in runs if r.round_ns]) > 1 and min(per_read) > 0 else None,
        **_figures(whole, total_s, reads_per_round * len(rounds), _merged([r.latency for r in runs])),
        "cpu_s_per_gb": whole.cpu_s_per_gb,
        "cached_fraction": max((r.cached_fraction for r in runs if r.cached_fraction is not None), default=None),
        "data_path": whole.data_path,
        "warnings": list(dict.fromkeys(w for r in runs for w in r.warnings)),
        "rounds": [_figures(r, t / 1e9, reads_per_round, h) for r, t, h in rounds],
        "round_latency_kept": all(r.round_latency for r in runs),
        "job": {k: (list(v) if isinstance(v, tuple) else v) for k, v in whole.to_dict()["spec"].items()},
    }


def _merged(histograms: list):
    from gdsbench import _native

    out = _native.LatencyHistogram()
    for h in histograms:
        out.merge(h)
    return out


def _ctrl_c_interrupts(config) -> None:
    """A suite started as a script's background job (`pytest ... &`) inherits SIGINT ignored, and a
    Ctrl-C (a SIGINT to its process group) would pass over every measurement: the suite would pass.
    From the first measurement on, SIGINT interrupts this session as pytest's own Ctrl-C does (as
    `gdsbench` itself does); as it was, after the session."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        config.add_cleanup(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))


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
    The Result is the run that measured the rounds (the median one of --gdsbench-repeat); its
    round_ns and round_latency hold each round."""
    from gdsbench.execution.runner import run, runnable_here, with_target  # here: a pytest session that never asks pays nothing

    if hasattr(request.config, "workerinput"):
        pytest.fail("storage benchmarks under pytest-xdist would run at once and measure each other: "
                    "run them without -n", pytrace=False)
    _ctrl_c_interrupts(request.config)
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
            try:
                spec = runnable_here(spec)
            except UsageError as e:  # a GPU mode this machine cannot run: skipped with the reason, never faked
                if spec.on_gpu and unavailable == "skip":
                    pytest.skip(f"cannot run here: {e}")
                raise
            spec = with_target(spec)  # no target given: the scratch file
            benchmark = _benchmark(request)  # only now: a test skipped above never touched it
            if benchmark.disabled:  # --benchmark-disable: run it once, as a plain test
                result = run(spec, record_environment=False)
                if result.interrupted:
                    raise KeyboardInterrupt
                return result
            budget = spec.runtime_ns or DEFAULT_RUNTIME_NS
            runs: list[Result] = []
            for _ in range(repeats):
                result, reads = measure_rounds(spec, lambda s: run(s, record_environment=False), budget,
                                               benchmark._min_rounds)
                if spec.io_size == 0:  # later repeats keep the first one's round
                    spec = spec.replace(io_size=reads * spec.bs)
                runs.append(result)
        except GdsbenchError as e:
            pytest.fail(f"gdsbench: {e}", pytrace=False)
        iterations = reads * spec.procs  # the reads of one round, every process's
        benchmark.extra_info.update(_extra_info(runs, iterations, repeats))
        benchmark._mode = "gdsbench storage_bench"  # the fixture is used: pytest-benchmark must not use it again
        stats = benchmark._make_stats(iterations)
        for r in runs:
            for ns in r.round_ns:  # pytest-benchmark divides by the iterations: seconds per read
                stats.update(ns / 1e9)
        return runs[len(runs) // 2]

    return measure
