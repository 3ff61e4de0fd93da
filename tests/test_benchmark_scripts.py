"""The logic inside the benchmark scripts that decides their verdicts (the
scripts themselves take minutes and need fio, a GPU or a throttle, so they are not run here)."""

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
    stats = load("stats")
    assert stats.median_interval(list(range(10))) == (1, 8)  # x(2), x(9): 97.9%
    assert stats.median_interval(list(range(20))) == (5, 14)  # x(6), x(15): 95.9%
    assert stats.median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few values: the whole range,
    assert stats.interval_coverage(3, 1) == 0.75  # which covers less, and the notes say how much
    assert round(stats.interval_coverage(10, 2), 3) == 0.979


def test_an_interval_is_labelled_min_max_or_with_its_confidence():
    stats = load("stats")
    assert stats.interval_label(10) == "97.9% CI"
    assert stats.interval_label(20) == "95.9% CI"
    assert stats.interval_label(5) == "min-max, 93.8% CI"  # no k > 1 covers 95%: the whole range
    assert stats.interval_label(2) == "min-max, 50.0% CI"


@pytest.mark.parametrize("median, interval, verdict", [
    (0.98, (0.90, 1.05), "PASS"),   # the median meets the target
    (0.95, (0.90, 0.99), "NOISE"),  # it misses, but the interval reaches the target
    (0.93, (0.90, 0.96), "FAIL"),   # the whole interval misses: a real gap
])
def test_verdict_tells_a_gap_from_noise(median, interval, verdict):
    assert load("stats").judge(median, interval, 0.97) == verdict


def test_p50_band_is_judged_on_both_sides():
    stats = load("stats")
    assert stats.judge(1.15, (1.11, 1.20), 0.90, 1.10) == "FAIL"
    assert stats.judge(1.05, (0.95, 1.20), 0.90, 1.10) == "PASS"


@pytest.mark.parametrize("ratios, verdict", [
    # the median (0.975) meets 0.95
    ([0.90, 0.92, 0.94, 0.96, 0.97, 0.98, 0.99, 1.00, 1.01, 1.02], "PASS"),
    # the median (0.895) misses and so does the whole interval (0.86-0.93): FAIL, though one repeat
    # (0.96) met the target, which the rule before this one called NOISE
    ([0.85, 0.86, 0.87, 0.88, 0.89, 0.90, 0.91, 0.92, 0.93, 0.96], "FAIL"),
    # the median (0.925) misses, the interval (0.89-0.96) reaches 0.95: this machine cannot tell
    ([0.88, 0.89, 0.90, 0.91, 0.92, 0.93, 0.94, 0.95, 0.96, 0.97], "NOISE"),
])
def test_paired_verdict_is_the_interval_rule(ratios, verdict):
    got = load("stats").paired_verdict(ratios, 0.95)
    assert got["verdict"] == verdict and got["n"] == 10 and got["interval_is"] == "97.9% CI"


def test_paired_verdict_judges_an_upper_target():
    stats = load("stats")
    assert stats.paired_verdict([1.2] * 10, 0.0, 1.0)["verdict"] == "FAIL"  # CPU per GB 1.2x: over 1.0x
    assert stats.paired_verdict([0.8, 1.1, 0.9, 1.3, 1.05, 1.2], 0.0, 1.0)["verdict"] == "NOISE"  # median 1.075
    assert stats.paired_verdict([0.8] * 6, 0.0, 1.0)["verdict"] == "PASS"


def test_gpu_modes_without_io_uring_keeps_the_reads_in_flight_with_threads_and_says_so():
    from types import SimpleNamespace

    gpu_modes = load("gpu_modes")
    args = SimpleNamespace(file="f", runtime=1.0, ramp=0.5, gpu_backend="cuda", threads=4, qd=8)
    jobs, note = gpu_modes.plan_jobs(args, "available")
    assert jobs["bounce"]["engine"] == "io_uring" and (jobs["bounce"]["threads"], jobs["bounce"]["qd"]) == (4, 8)
    jobs, note = gpu_modes.plan_jobs(args, "built without liburing")
    for mode in ("cpu", "bounce", "cached-bounce"):
        assert (jobs[mode]["engine"], jobs[mode]["threads"], jobs[mode]["qd"]) == ("psync", 32, 1)
    assert "io_uring UNAVAILABLE" in note and "built without liburing" in note
    assert jobs["gds"]["threads"] == 32 and "qd" not in jobs["gds"]


def test_bounce_target_is_judged_against_the_cpu_runs_either_side():
    gpu_modes = load("gpu_modes")
    # a disk drifting 3.0 -> 2.0 GB/s under bounce runs at 90% of it: drift cancels
    cpu, bounce = [3.0, 2.75, 2.5, 2.25, 2.0], [0.9 * 2.875, 0.9 * 2.625, 0.9 * 2.375, 0.9 * 2.125]
    assert round(gpu_modes.bounce_ratio(cpu, bounce, 50.0), 6) == 0.9
    assert [round(r, 6) for r in gpu_modes.bounce_ratios(cpu, bounce, 50.0)] == [0.9] * 4  # each run, as printed
    # where the host-to-device copy is the slower side, it is the ceiling
    assert round(gpu_modes.bounce_ratio([3.0, 3.0], [1.8], 2.0), 6) == 0.9


def test_pytest_threshold_expects_a_fire_past_x_over_100_plus_x():
    script = load("pytest_threshold")
    # mean:20%: fires once a fixed round takes 20% longer (bandwidth at 1/1.2 = 83.3% of the rate)
    assert script.verdict(0.25, True, 0.20) == "yes" and script.verdict(0.11, False, 0.20) == "yes"
    assert script.verdict(0.25, False, 0.20) == "**NO**" and script.verdict(0.11, True, 0.20) == "**NO**"
    assert script.verdict(0.215, False, 0.20) == script.verdict(0.185, True, 0.20) == "borderline"
    out = "Performance has regressed:\n\ttest_read[4K-16-rand] (0001_baseline) - Field 'mean' has failed ...\n"
    assert script.regressed_tests(out) == {"test_read[4K-16-rand]"} and script.regressed_tests("4 passed") == set()


def test_build_ab_runs_a_build_as_a_user_does():
    """build_ab.py turns a vs_fio row into the flags a user types and reads the build's --json."""
    build_ab = load("build_ab")
    null = next(r for r in build_ab.ROWS if r.name == "null 4K")
    got = build_ab.run_build(sys.executable, null, None, 0.2, 0.0, 1)
    assert got["iops"] > 0 and got["bandwidth"] == got["iops"] * 4096 and got["p50"] > 0


class FakeCounters:
    def measure(self, fn, row, *args):
        return dict(fn(row, *args), device_request_bytes=None)


def test_vs_fio_writes_a_fresh_file_before_every_write_run_of_either_tool(monkeypatch, tmp_path):
    from types import SimpleNamespace

    vs_fio = load("vs_fio")
    events = []

    def tool(name):
        def run(row, path, runtime, ramp, seed):
            events.append((name, path, row.fio.get("size") if name != "gdsbench" else None))
            return {"bandwidth": 1e9, "iops": 1e3, "p50": 1e5, "p99": 2e5, "mean": 1e5}
        return run

    monkeypatch.setattr(vs_fio, "fresh_file", lambda path, size: events.append(("fresh", path, size)))
    monkeypatch.setattr(vs_fio, "run_gdsbench", tool("gdsbench"))
    monkeypatch.setattr(vs_fio, "run_fio", tool("fio default buffers"))
    args = SimpleNamespace(rows="write", repeats=2, runtime=0.1, ramp=0.0, write_bytes=4096)
    path = str(tmp_path / "w.dat")
    table, raw = vs_fio.measure_rows(args, {"write": path}, FakeCounters(), tool("fio"))
    assert [r["name"] for r in raw["rows"]] == [r.name for r in vs_fio.ROWS if "write" in r.name]
    runs = [e for e in events if e[0] != "fresh"]
    assert len(runs) == len(raw["rows"]) * (2 * 2 + 1 + 1)  # fio, gds, fio, gds, fio; fio default buffers once
    for i, e in enumerate(events):  # every run of either tool comes right after its file was made anew
        if e[0] != "fresh":
            assert events[i - 1] == ("fresh", path, 4096) and e[1] == path
            assert e[2] in (None, 4096)  # fio is told the file's size
    # the buffered write row is shown, outside the headline: not judged, not bold, not in the exit status
    judged = {r["name"]: r["judged"] for r in raw["rows"]}
    assert [name for name, j in judged.items() if not j] == ["psync 1M write buffered end_fsync"]
    buffered = next(row for row in table if row[0] == "psync 1M write buffered end_fsync")
    assert not buffered[4].startswith("**") and buffered[11].startswith("not judged (information; by the rule: ")
    assert next(r for r in raw["rows"] if not r["judged"])["verdict"] == "not judged"
    assert all(row[4].startswith("**") for row in table if row[0] != "psync 1M write buffered end_fsync")


def test_vs_clients_judges_side_by_side_repeats_and_tells_noise_from_a_gap():
    verdict = load("vs_clients").verdict
    run = lambda mib_s, cpu_s: {"bytes": 100 * 2**20, "seconds": 100 / mib_s, "cpu_s": cpu_s}  # noqa: E731
    ours = [run(100, 1.0), run(90, 1.0), run(100, 1.0)]
    assert verdict(ours, "curl", [run(100, 1.0)] * 3).startswith("1.00 of curl (0.90-1.00): PASS; CPU/GB 1.00x")
    assert "0.90 of curl (0.90-1.00): NOISE" in verdict(ours, "curl", [run(100, 1.0), run(100, 1.0), run(111, 1.0)])
    assert "FAIL; CPU/GB" in verdict([run(50, 1.0)] * 3, "curl", [run(100, 1.0)] * 3)
    assert verdict([run(100, 2.0)] * 3, "curl", [run(100, 1.0)] * 3).endswith("CPU/GB 2.00x (2.00-2.00): FAIL")
    assert verdict([{"error": "x"}], "curl", [run(1, 1)]) == "-"
