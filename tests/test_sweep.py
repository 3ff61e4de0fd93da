"""Sweeps: grid expansion, results that survive interruption, resume, load()."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from gdsbench import load
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import spec_from_columns
from gdsbench.results.analysis import merged_histogram, summarize
from gdsbench.results.store import POINTS_JSONL, RunStore
from gdsbench.sweep.grid import SweepSpec, expand, load_sweep_file
from gdsbench.sweep.session import resume, run, start

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_grid_expands_last_dimension_fastest_and_skips_nonsense():
    grid = expand(SweepSpec(grid={"engine": ["psync", "io_uring"], "qd": [1, 8]}, fixed={"path": "x"}))
    assert [(p.spec.engine, p.spec.qd) for p in grid.points] == [("psync", 1), ("io_uring", 1), ("io_uring", 8)]
    assert [p.index for p in grid.points] == [0, 1, 2]
    assert len(grid.skipped) == 1 and grid.skipped[0]["values"] == {"engine": "psync", "qd": 8}
    assert "psync" in grid.skipped[0]["reason"]


def test_grid_values_parse_with_units():
    grid = expand(SweepSpec(grid={"bs": ["4K", "1M"], "runtime": ["500ms", 2]}))
    assert [(p.spec.bs, p.spec.runtime_ns) for p in grid.points] == [
        (4096, 500_000_000), (4096, 2_000_000_000), (1 << 20, 500_000_000), (1 << 20, 2_000_000_000)]


@pytest.mark.parametrize("grid, message", [
    ({"bs": ["0"]}, "--bs 0"),
    ({"bs": ["4X"]}, "unknown unit"),
    ({"iodepth": [1, 2]}, "unknown option 'iodepth'"),
    ({"qd": []}, "empty list"),
    ({"qd": [4, 4]}, "listed twice"),
    ({"offset": ["0", "4K"]}, "cannot be a sweep dimension"),
])
def test_bad_grids_are_errors(grid, message):
    with pytest.raises(UsageError, match=message):
        expand(SweepSpec(grid=grid))


def test_a_grid_of_only_nonsense_is_an_error():
    with pytest.raises(UsageError, match="no runnable point"):
        expand(SweepSpec(grid={"qd": [2, 4]}, fixed={"engine": "psync"}))


def write(tmp_path, text):
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return str(path)


def test_sweep_file(tmp_path):
    spec = load_sweep_file(write(tmp_path, 'name = "nvme"\nrepeat = 3\nruntime = "5s"\nbs = ["4K", "1M"]\nqd = [1, 16]\n'))
    assert spec.name == "nvme" and spec.repeat == 3
    assert spec.grid == {"bs": ["4K", "1M"], "qd": [1, 16]} and spec.fixed == {"runtime": "5s"}


@pytest.mark.parametrize("text, line, message", [
    ('bs = ["4K"]\niodepth = [1, 2]\n', 2, "unknown option 'iodepth'"),
    ('qd = [1]\n\nbs = ["4K", "8Q"]\n', 3, "unknown unit"),
    ('bs = ["4K"]\nqd = []\n', 2, "empty list"),
    ('runtime = "soon"\n', 1, ": runtime 'soon'"),  # the file's key, not the flag
    ('repeat = 0\nbs = ["4K"]\n', 1, "repeat must be"),
])
def test_bad_sweep_files_name_the_line(tmp_path, text, line, message):
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as e:
        load_sweep_file(path)
    assert f"{path} line {line}:" in str(e.value) and message in str(e.value)


def test_invalid_toml_names_the_line(tmp_path):
    with pytest.raises(UsageError, match=r"not valid TOML.*line 2"):
        load_sweep_file(write(tmp_path, 'bs = ["4K"]\nqd = = 3\nruntime = "1s"\n'))


def null_sweep(tmp_path, **fixed) -> SweepSpec:
    return SweepSpec(grid={"bs": ["4K", "64K"], "qd": [1, 2]},
                     fixed={"engine": "null", "runtime": "20ms", **fixed}, repeat=2, name="nulltest")


def test_sweep_saves_every_point_and_loads_tidy(tmp_path):
    store, grid, plans = start(null_sweep(tmp_path), str(tmp_path / "results"))
    outcome = run(store, grid, plans, show_progress=False)
    assert (outcome.points_done, outcome.points_total, outcome.interrupted) == (8, 8, False)
    assert sorted(os.listdir(store.path)) == ["lock", "points.csv", "points.jsonl", "points.parquet", "run.json"]
    df = load(store.path)
    assert len(df) == 8 and sorted(df["repeat"].unique()) == [0, 1]
    for column in ("bs_bytes", "qd", "runtime_ns", "bandwidth_bytes_per_s", "lat_p99_ns", "cpu_user_s", "hist_index"):
        assert column in df.columns
    assert df.attrs["run"]["status"] == "complete" and df.attrs["run"]["sweep"]["repeat"] == 2
    # the spec round-trips through the table
    row = df.iloc[0].to_dict()
    assert spec_from_columns(row) == plans[row["point"]].spec
    # histograms are kept: merging a point's repeats is exact
    point0 = df[df["point"] == 0]
    assert merged_histogram(point0).count == point0["ops"].sum()
    # parquet and csv hold the same rows
    import pandas as pd
    assert len(pd.read_parquet(os.path.join(store.path, "points.parquet"))) == 8
    csv = pd.read_csv(os.path.join(store.path, "points.csv"))
    assert len(csv) == 8 and "hist_index" not in csv.columns
    summary = summarize(df)
    assert len(summary) == 4 and set(summary["repeats"]) == {2}


def test_repeats_more_than_5_percent_apart_are_flagged():
    import pandas as pd
    rows = []
    for point, (a, b) in enumerate([(100.0, 110.0), (100.0, 102.0)]):
        for rep, bw in enumerate((a, b)):
            rows.append({"point": point, "repeat": rep, "bs_bytes": 4096, "qd": point + 1, "bandwidth_bytes_per_s": bw,
                         "iops": bw / 4096, "lat_p50_ns": 1.0, "warnings": ""})
    s = summarize(pd.DataFrame(rows))
    assert list(s["flagged"]) == [True, False]
    assert s["spread"].iloc[0] == pytest.approx(10 / 105)
    assert s["bandwidth_bytes_per_s"].iloc[0] == 105.0  # the median


def sweep_cli(tmp_path, *extra):
    return [sys.executable, "-m", "gdsbench", "sweep", "--engine", "null", "--bs", "4K,8K,16K,32K,64K",
            "--qd", "1,2", "--runtime", "250ms", "--results", str(tmp_path / "results"), "--no-report", *extra]


def wait_for_points(results, n, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for run_dir in os.listdir(results) if os.path.isdir(results) else []:
            path = os.path.join(results, run_dir, POINTS_JSONL)
            if os.path.exists(path) and sum(1 for _ in open(path)) >= n:
                return run_dir
        time.sleep(0.05)
    raise AssertionError("the sweep saved no points")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_resume_after_interruption_loses_nothing_and_repeats_nothing(tmp_path, sig):
    results = str(tmp_path / "results")
    proc = subprocess.Popen(sweep_cli(tmp_path), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_id = wait_for_points(results, 3)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    run_dir = os.path.join(results, run_id)
    saved = RunStore(run_dir).records()
    assert 3 <= len(saved) < 10
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "--resume" in err
        assert RunStore(run_dir).info()["status"] == "interrupted"
    else:
        with open(os.path.join(run_dir, POINTS_JSONL), "a") as f:
            f.write('{"point": 9, "torn')  # a kill in the middle of a write
    done = subprocess.run([sys.executable, "-m", "gdsbench", "sweep", "--resume", run_id, "--results", results,
                           "--no-report"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = RunStore(run_dir).records()
    keys = [(r["point_key"], r["repeat"]) for r in rows]
    assert len(rows) == 10 and len(set(keys)) == 10
    assert [r["point_key"] for r in rows[:len(saved)]] == [r["point_key"] for r in saved]  # kept as they were
    assert RunStore(run_dir).info()["status"] == "complete"
    assert len(load(run_dir)) == 10


def test_resume_in_process(tmp_path):
    store, grid, plans = start(null_sweep(tmp_path), str(tmp_path / "results"))
    first = grid.points[0]
    from gdsbench.execution import runner
    from gdsbench.results.store import record
    r = runner.execute(plans[0], record_environment=False)
    store.append(record(r, first.index, first.key, 0))
    store2, grid2, plans2 = resume(store.path)
    outcome = run(store2, grid2, plans2, show_progress=False)
    assert outcome.points_done == 8
    assert len({(x["point_key"], x["repeat"]) for x in store.records()}) == 8


def test_sweep_command_line(gdsbench, tmp_path, pattern_file):
    res = gdsbench("sweep", pattern_file, "--bs", "4K,64K", "--qd", "1,2", "--engine", "psync,io_uring",
                   "--runtime", "50ms", "--results", tmp_path / "r", "--name", "cli")
    assert res.code == 0, res.err
    assert "skipped" in res.err and "psync" in res.err  # psync QD2 skipped with a note
    assert "6 of 6 measurements saved" in res.out and "report:" in res.out
    run_dir = os.path.join(tmp_path / "r", os.listdir(tmp_path / "r")[0])
    assert run_dir.endswith("-cli")
    info = json.load(open(os.path.join(run_dir, "run.json")))
    assert len(info["provenance"]["gdsbench"]["commit"]) == 40  # tests run from a checkout
    assert info["environment"]["targets"][pattern_file]["fs_type"]


def test_sweep_file_and_cli_combine(gdsbench, tmp_path):
    path = write(tmp_path, 'engine = "null"\nruntime = "20ms"\nbs = ["4K", "8K"]\nqd = [1, 2]\n')
    res = gdsbench("sweep", "--file", path, "--qd", "4,8", "--results", tmp_path / "r", "--no-report")
    assert res.code == 0, res.err
    run_dir = os.path.join(tmp_path / "r", os.listdir(tmp_path / "r")[0])
    df = load(run_dir)
    assert sorted(df["qd"].unique()) == [4, 8] and sorted(df["bs_bytes"].unique()) == [4096, 8192]


def test_bad_sweep_on_the_command_line(gdsbench, tmp_path):
    res = gdsbench("sweep", "--engine", "null", "--bs", "4K,0", "--results", tmp_path)
    assert res.code == 2 and res.err.count("\n") == 1 and "--bs 0" in res.err
    res = gdsbench("sweep", "--resume", "nope", "--results", tmp_path)
    assert res.code == 2 and "not found" in res.err
    res = gdsbench("sweep", "x.dat", "--runtime", "1s", "--resume", "nope", "--results", tmp_path)
    assert res.code == 2 and "not found" in res.err  # the missing run first, not the flags
    store, _, _ = start(null_sweep(tmp_path), str(tmp_path / "results"))
    res = gdsbench("sweep", "x.dat", "--runtime", "1s", "--resume", store.path)
    assert res.code == 2 and "so PATH, --runtime cannot change it" in res.err, res.err


def test_a_complete_looking_last_line_without_newline_is_not_trusted(tmp_path):
    store, grid, plans = start(null_sweep(tmp_path), str(tmp_path / "results"))
    run(store, grid, plans, show_progress=False)
    path = os.path.join(store.path, POINTS_JSONL)
    lines = open(path).read().splitlines(keepends=True)
    with open(path, "w") as f:  # the last write was cut just before its newline
        f.write("".join(lines[:-1]) + lines[-1].rstrip("\n"))
    assert len(RunStore(store.path).records()) == 7
    store2, grid2, plans2 = resume(store.path)
    run(store2, grid2, plans2, show_progress=False)
    assert len(RunStore(store.path).records()) == 8  # measured again, not lost


def test_a_sweep_that_fails_says_so(tmp_path):
    spec = SweepSpec(grid={"bs": ["4K", "8K"]}, fixed={"engine": "null", "runtime": "20ms"}, name="fails")
    store, grid, plans = start(spec, str(tmp_path))
    from gdsbench.execution import runner

    calls = []
    real = runner.execute

    def execute(plan, **kw):
        calls.append(plan)
        if len(calls) == 2:
            raise UsageError("the storage went away")
        return real(plan, **kw)

    runner.execute = execute
    try:
        with pytest.raises(UsageError):
            run(store, grid, plans, show_progress=False)
    finally:
        runner.execute = real
    assert store.info()["status"] == "failed" and len(store.records()) == 1


def test_bad_run_names_and_results_are_one_line_errors(gdsbench, tmp_path):
    res = gdsbench("sweep", "--engine", "null", "--name", "a/b", "--results", tmp_path, "--no-report")
    assert res.code == 2 and "--name" in res.err
    (tmp_path / "afile").write_text("x")
    res = gdsbench("sweep", "--engine", "null", "--results", tmp_path / "afile", "--no-report")
    assert res.code == 2 and "--results" in res.err and res.err.count("\n") == 1
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe bs = 1")
    res = gdsbench("sweep", "--file", bad)
    assert res.code == 2 and "not a text file" in res.err


def test_a_simulated_sweep_says_so_first_and_prints_its_best_points(gdsbench, pattern_file, tmp_path):
    res = gdsbench("sweep", pattern_file, "--mode", "bounce", "--gpu-backend", "sim", "--bs", "64K,1M",
                   "--runtime", "100ms", "--results", tmp_path)
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    summary = lines[lines.index(next(line for line in lines if "measurements saved" in line)) + 1:]
    assert summary[0].startswith("SIMULATED: ") and summary[1].startswith("best bandwidth: ")
    assert summary[2].startswith("best IOPS: ") and summary[3].startswith("report: ")
