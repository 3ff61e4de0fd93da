import dataclasses
import json
import os
import signal
import subprocess
import sys

from conftest import wait_for_workers

from gdsbench import _native
from gdsbench.job.spec import OPTIONS, JobSpec


def test_spec_maps_one_to_one_onto_the_native_job():
    native_fields = {name for name in dir(_native.Job()) if not name.startswith("_")} - {"SPEC_FIELDS"}
    spec_native = {opt.name for opt in OPTIONS if opt.native}
    assert spec_native | {"direction", "engine_options"} == native_fields  # no option sets the direction yet
    assert set(_native.Job.SPEC_FIELDS) == spec_native - {"mode"}
    assert [opt.name for opt in OPTIONS] == [f.name for f in dataclasses.fields(JobSpec)]


def _flags(command: str) -> set[str]:
    from gdsbench.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return set(sub.choices[command]._option_string_actions)


def test_every_option_is_a_flag_of_run_and_sweep():
    for command in ("run", "sweep"):
        flags = _flags(command)
        missing = [o.flag for o in OPTIONS if o.name != "path" and o.flag not in flags]
        assert not missing, (command, missing)


def test_every_workload_field_is_a_flag_of_train_predict_and_prepare():
    """The workload's own table (gdsbench/train/workloads.py) is the one that makes these flags."""
    from gdsbench.train.workloads import ON_COMMAND_LINE
    from gdsbench.train.workloads import OPTIONS as WORKLOAD_OPTIONS

    assert "seed" not in ON_COMMAND_LINE and len(ON_COMMAND_LINE) == len(WORKLOAD_OPTIONS) - 1
    for command in ("train", "predict", "prepare"):
        flags = _flags(command)
        assert {WORKLOAD_OPTIONS[f].flag for f in ON_COMMAND_LINE} <= flags, command


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
    monkeypatch.setattr("gdsbench.execution.scratch.SCRATCH_SIZE", 8 << 20)
    res = gdsbench("run", "--runtime", "100ms")
    assert res.code == 0, res.err
    assert os.path.exists("results/scratch/gdsbench-scratch.dat")
    assert "results/scratch/gdsbench-scratch.dat" in res.out


def test_ctrl_c_on_the_command_line(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "gdsbench", "run", "--engine", "null", "--runtime", "60s", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_workers(proc.pid)  # the run is under way, however slow the interpreter's start-up
    proc.send_signal(signal.SIGINT)
    # a hang guard only: ended by the Ctrl-C is judged below, from what the run says of itself
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    d = json.loads(out)
    assert d["interrupted"] is True and d["elapsed_ns"] < d["spec"]["runtime_ns"]  # not at its 60 s runtime


def test_docs_options_is_generated_from_the_option_table():
    from gdsbench.commands.options_doc import options_markdown

    path = os.path.join(os.path.dirname(__file__), "..", "docs", "options.md")
    assert open(path).read() == options_markdown(), "docs/options.md is out of date: run scripts/options_doc"
    for opt in OPTIONS:
        if opt.name != "path":
            assert f"`{opt.flag}`" in options_markdown() and (not opt.negative or f"`{opt.negative}`" in options_markdown())


def test_submit_batch_is_checked(gdsbench, pattern_file):
    res = gdsbench("run", pattern_file, "--engine", "io_uring", "--qd", "4", "--submit-batch", "8")
    assert res.code == 2 and "--submit-batch 8" in res.err


def test_the_readme_commands_work_as_written_on_a_first_run():
    """The README's pytest example saves its baseline before comparing with it, installs from the
    checkout (gdsbench is on no package index), and the pytest extra holds what a suite needs;
    docs/scaling.md has the flags a first mpirun as root on a small machine needs."""
    import tomllib

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    readme = open(os.path.join(root, "README.md")).read()
    assert readme.index("--benchmark-save=baseline") < readme.index("--benchmark-compare-fail")
    assert "pip install gdsbench" not in readme and "pip install '.[" in readme
    extras = tomllib.load(open(os.path.join(root, "pyproject.toml"), "rb"))["project"]["optional-dependencies"]
    assert any(d.startswith("pytest>") for d in extras["pytest"]) and any("pytest-benchmark" in d for d in extras["pytest"])
    scaling = open(os.path.join(root, "docs", "scaling.md")).read()
    assert "--allow-run-as-root" in scaling and "--oversubscribe" in scaling


def test_a_run_of_several_processes_names_its_whole_region(gdsbench, pattern_file):
    res = gdsbench("run", pattern_file, "--procs", "2", "--engine", "psync", "--runtime", "100ms")
    assert res.code == 0, res.err
    assert "16 MiB region, 2 parts of 8 MiB" in res.out


def test_the_first_sweep_says_it_writes_a_scratch_file_and_each_line_says_what_ran(gdsbench, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("gdsbench.execution.scratch.SCRATCH_SIZE", 8 << 20)
    res = gdsbench("sweep", "--bs", "4K", "--qd", "1,2", "--pattern", "rand", "--runtime", "100ms", "--no-report")
    assert res.code == 0, res.err
    assert "writing a 8 MiB scratch file to read" in res.err  # said on a log, not only by a progress bar
    assert "io_uring 4 KiB rand QD2 O_DIRECT" in res.err or "psync 4 KiB rand QD1" in res.err


def test_an_engines_own_options_come_from_its_declaration_alone():
    """An engine declares its options in its own file (native/engines/*.cpp, or job/modes.py for
    kvikio); the option table gathers them: each is a JobSpec field, a flag, a sweep key, a results
    column and a line of docs/options.md, is refused with any other engine, and reaches the engine."""
    import pytest

    from gdsbench.commands.options_doc import options_markdown
    from gdsbench.execution.native import to_native
    from gdsbench.job.errors import IncompatibleOptions, UsageError
    from gdsbench.job.spec import BY_KEY, ENGINE_INFO

    declared = {o["name"]: e["name"] for e in ENGINE_INFO.values() for o in e.get("options", ())}
    assert {"submit_batch": "io_uring", "gds_register": "cufile"}.items() <= declared.items()
    table = {o.name: o for o in OPTIONS}
    docs = options_markdown()
    for name, engine in declared.items():
        opt = table[name]
        assert opt.engine == engine and not opt.native and BY_KEY[opt.key] is opt and f"`{opt.flag}`" in docs
        other = next(e for e in ENGINE_INFO if e != engine and e != "kvikio" and e != "cufile")
        value = True if opt.kind == "bool" else opt.choices[-1] if opt.kind == "choice" else max(2, opt.low or 0)
        with pytest.raises(IncompatibleOptions, match=f"{opt.flag} is an option of the {engine} engine"):
            JobSpec(engine=other, **{name: value}).validate()
    job = to_native(JobSpec(path="x", engine="io_uring", qd=4, submit_batch=4, runtime_ns=1))
    assert job.engine_options["submit_batch"] == 4 and job.engine_options["fixedbufs"] == 0  # each of its options
    job.engine_options = {"submit_batch": 8}  # past --qd: the engine's own bounds, checked natively too
    with pytest.raises(UsageError, match="submit_batch is out of its bounds"):
        _native.run(job)
