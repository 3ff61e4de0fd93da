"""What a newcomer reads first, as text: answers lead, on one line, and the reasons to doubt them follow."""

from __future__ import annotations

from types import SimpleNamespace

from gdsbench.reporting.train_report import prediction_text


def test_a_prediction_leads_with_its_answer_and_lists_its_doubts_under_it():
    workload = SimpleNamespace(name="unet3d", au_threshold=0.9, batch=7, compute_s=0.323)
    curve = SimpleNamespace(points=[SimpleNamespace(readers=1, rate=356 * 2**20, spread=0.02)])
    p = SimpleNamespace(workload=workload, max_accelerators=1, seconds=8.0, demand_bytes_per_s=3.18 * 2**30, steps=2,
                        hosts=1, curve=curve, au=[{"accelerators": 1, "au_percent": 100.0, "flags": ["few steps"]}],
                        warnings=["only 2 steps per epoch", "the probe read few samples per reader"])
    first, *rest = prediction_text(p).splitlines()
    assert first.startswith("prediction for unet3d: at most 1 accelerator(s) keep AU >= 90%")
    assert first.endswith("uncertain: 2 reason(s) below)")
    assert rest[-3:] == ["  out of its depth:", "    - only 2 steps per epoch", "    - the probe read few samples per reader"]
    sure = prediction_text(SimpleNamespace(**{**vars(p), "warnings": []}))
    assert "uncertain" not in sure and "out of its depth" not in sure


def test_a_sweep_says_first_what_each_point_measures_and_whose_defaults_those_are(gdsbench, tmp_path):
    """The default grid reads rand for 2 s after a 500 ms ramp; give a list and a point reads as
    `run` does (seq, no ramp): either way the first line says so, and that one sample has no spread."""
    res = gdsbench("sweep", "--engine", "null", "--bs", "4K,64K", "--runtime", "50ms", "--results", tmp_path, "--no-report")
    assert res.code == 0, res.err
    first = res.err.splitlines()[0]
    assert first == ("gdsbench: sweep of 2 point(s) (bs 2): seq reads, 50 ms each, no ramp (run's defaults; set by "
                     "--pattern, --ramp); each point measured once: one sample, no spread (--repeat 3 gives a spread)")
    res = gdsbench("sweep", "--engine", "null", "--qd", "1", "--bs", "4K", "--pattern", "rand", "--runtime", "50ms",
                   "--ramp", "10ms", "--repeat", "2", "--results", tmp_path, "--no-report")
    assert res.code == 0, res.err
    assert res.err.splitlines()[0].endswith("rand reads, 50 ms each, after a 10 ms ramp; each point measured 2 times")


def test_too_many_processes_for_a_file_say_each_ones_share_not_0_b(gdsbench, tmp_path):
    path = tmp_path / "small.dat"
    assert gdsbench("prepare", path, "--size", "1M").code == 0
    res = gdsbench("run", path, "--procs", "64", "--bs", "64K", "--runtime", "100ms")
    assert res.code == 2 and res.err.count("\n") == 1, res.err
    assert "each process's share of" in res.err and "(16 KiB) holds less than one --bs 64 KiB block" in res.err


def test_a_run_whose_every_point_line_is_damaged_says_so_not_finish_it(gdsbench, tmp_path):
    res = gdsbench("sweep", "--engine", "null", "--bs", "4K,8K", "--runtime", "20ms", "--results", tmp_path, "--no-report")
    assert res.code == 0, res.err
    (run,) = tmp_path.iterdir()
    (run / "points.jsonl").write_text("garbage\n{bad\n")
    for derived in ("points.parquet", "points.csv"):
        (run / derived).unlink(missing_ok=True)
    res = gdsbench("report", run)
    assert res.code == 2 and res.err.count("\n") == 1, res.err
    assert "every line of its points file is damaged (2; the first:" in res.err and "--resume" not in res.err


def test_prepare_of_several_files_refuses_a_strangers_before_writing_any(gdsbench, tmp_path):
    (tmp_path / "pp.2").write_text("someone else's\n")
    res = gdsbench("prepare", tmp_path / "pp", "--files", "4", "--size", "1M")
    assert res.code == 2 and "pp.2: refusing to overwrite a file gdsbench did not create" in res.err, res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pp.2"]  # none written before the refusal
    assert (tmp_path / "pp.2").read_text() == "someone else's\n"


def test_a_train_line_leads_with_what_was_read_where_dlios_figure_parts_from_it():
    from gdsbench.reporting.train_report import point_line

    row = {"accelerators": 1, "au_percent": 95.0, "passed": True, "samples_per_s": 10.0, "mib_per_s": 1400.0,
           "read_mib_per_s": 1.0, "step_time_p50_s": 0.1, "step_time_p99_s": 0.2, "wait_p50_s": 0.0, "wait_p99_s": 0.0,
           "steps_per_epoch": 4}
    line = point_line(row, None)
    assert "10.0 samples/s, read 1 MiB/s (DLIO's MB/s would say 1400: the workload's record size per sample, " \
           "1.4e+03x what was read)" in line
    assert "1400 MiB/s (read 1400)" in point_line({**row, "read_mib_per_s": 1400.0}, None)


def test_validate_on_a_full_directory_names_no_flag_it_does_not_take(gdsbench, tmp_path):
    """validate has no --size: its test file's size is its own, and the message says so."""
    import subprocess

    import pytest

    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(small)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        res = gdsbench("validate", small)
    finally:
        subprocess.run(["umount", str(small)])
    assert res.code == 2 and "cannot write a test file there (a test file of " in res.err, res.err
    assert "--size" not in res.err


def test_a_dataset_of_another_shape_says_it_cannot_grow_in_place(gdsbench, tmp_path):
    common = ("--workload", "unet3d", "--record-bytes", "64K", "--record-stdev", "0")
    assert gdsbench("prepare", tmp_path / "ds", *common, "--files", "4").code == 0
    res = gdsbench("prepare", tmp_path / "ds", *common, "--files", "8")
    assert res.code == 2 and "holds a dataset of another shape" in res.err, res.err
    assert "cannot grow or change in place" in res.err and res.err.count("\n") == 1


def test_sweep_resume_looks_at_a_remote_target_with_the_runs_own_timeout():
    """The look --resume takes at a run's URL honours the run's --timeout (not the 30 s default)."""
    import socket
    import time

    import pytest

    from gdsbench.job.errors import UsageError
    from gdsbench.job.spec import spec_from_values
    from gdsbench.sweep.session import _same_files
    from gdsbench.system.targets.remote_object import asking_of

    with socket.socket() as silent:  # accepts, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/data.dat"
        started = time.monotonic()
        with pytest.raises(UsageError, match="1 s") as refused:
            _same_files({"target_files": {url: {"size": 1}}}, asking_of(spec_from_values({"timeout": "1s"})))
        assert time.monotonic() - started < 25, "the default 30 s timeout was used"  # a bound, far from 1 s
        assert refused.value.args[0].startswith("--resume: ")
