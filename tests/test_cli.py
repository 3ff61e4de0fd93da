import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

from gdsbench import _native
from gdsbench.job.spec import OPTIONS, JobSpec


def test_spec_maps_one_to_one_onto_the_native_job():
    native_fields = {name for name in dir(_native.Job()) if not name.startswith("_")}
    spec_native = {opt.name for opt in OPTIONS if opt.native}
    assert spec_native == native_fields
    assert [opt.name for opt in OPTIONS] == [f.name for f in dataclasses.fields(JobSpec)]


def test_every_option_is_a_flag(gdsbench):
    import pytest

    with pytest.raises(SystemExit):
        gdsbench("run", "--help")


def test_run_prints_a_table(gdsbench, pattern_file):
    res = gdsbench("run", pattern_file, "--engine", "io_uring", "--qd", "4", "--bs", "64K", "--runtime", "200ms")
    assert res.code == 0, res.err
    for word in ("bandwidth", "IOPS", "p99.99", "CPU-s per GB", "cached at start"):
        assert word in res.out


def test_run_json(gdsbench, pattern_file):
    res = gdsbench("run", pattern_file, "--engine", "psync", "--bs", "1M", "--io-size", "4M", "--json")
    assert res.code == 0
    d = json.loads(res.out)
    # stopped by --io-size alone: no time limit, which a resolved spec writes as runtime 0 (as the native core)
    assert d["bytes"] == 4 << 20 and d["spec"]["bs"] == 1 << 20 and d["spec"]["runtime_ns"] == 0


def test_default_target_is_a_scratch_file(gdsbench, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("gdsbench.system.scratch.SCRATCH_SIZE", 8 << 20)
    res = gdsbench("run", "--runtime", "100ms")
    assert res.code == 0, res.err
    assert os.path.exists("results/scratch/gdsbench-scratch.dat")
    assert "results/scratch/gdsbench-scratch.dat" in res.out


def test_ctrl_c_on_the_command_line(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "gdsbench", "run", "--engine", "null", "--runtime", "60s", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)  # interpreter start-up (about 0.4 s here) and the run under way
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    out, err = proc.communicate(timeout=10)
    assert time.monotonic() - sent < 1.0
    assert proc.returncode == 130, err
    assert json.loads(out)["interrupted"] is True


def test_docs_options_is_generated_from_the_option_table():
    from gdsbench.commands.options import options_markdown

    path = os.path.join(os.path.dirname(__file__), "..", "docs", "options.md")
    assert open(path).read() == options_markdown(), "docs/options.md is out of date: run scripts/options_doc"
    for opt in OPTIONS:
        if opt.name != "path":
            assert f"`{opt.flag}`" in options_markdown() and (not opt.negative or f"`{opt.negative}`" in options_markdown())


def test_submit_batch_is_checked(gdsbench, pattern_file):
    res = gdsbench("run", pattern_file, "--engine", "io_uring", "--qd", "4", "--submit-batch", "8")
    assert res.code == 2 and "--submit-batch 8" in res.err
