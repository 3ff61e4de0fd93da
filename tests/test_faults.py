"""Faults a hostile user can cause: processes killed at any moment, results
folders damaged or shared, files that vanish or are not what they seem, and
inputs at every extreme. Nothing may hang, nothing measured may be lost,
nothing gdsbench did not create may be overwritten, and every error is one
line. docs/faults.md lists each case with the test below that proves it."""

import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import (
    MPI_ENV,
    alive,
    children_of,
    cmdline,
    device_read_bytes,
    is_root,
    mpirun,
    mpirun_command,
    needs_mpi,
    runs_native_workers,
    wait_for_workers,
    wait_until,
    workers_of,
)

from gdsbench import JobSpec, UsageError, load, prepare, run
from gdsbench.job.spec import OPTIONS
from gdsbench.results.store import POINTS_CSV, POINTS_JSONL, POINTS_PARQUET, RUN_FILE, RunStore

MiB = 1 << 20
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_launched: list[subprocess.Popen] = []


def gdsbench_cli(*args, **kw) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-m", "gdsbench", *map(str, args)], cwd=kw.pop("cwd", ROOT),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    _launched.append(p)
    return p


def _descendants(pid: int) -> list[int]:
    kids = children_of(pid)
    return kids + [d for k in kids for d in _descendants(k)]


@pytest.fixture(autouse=True)
def _nothing_left_running():
    """A test that fails part-way must not leave its gdsbench (or its workers) running on the machine."""
    yield
    while _launched:
        p = _launched.pop()
        if p.poll() is None:
            for pid in _descendants(p.pid) + [p.pid]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.communicate()


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gdsbench: error: ") and "Traceback" not in err, err
    return lines[0]


# ---- hangs and orphans ----

@pytest.mark.parametrize("moment", ["set-up", "start", "measuring", "handing-over"])
def test_a_worker_killed_at_any_moment_ends_the_run_within_seconds(tmp_path, moment):
    """Whatever it was doing, each moment waited for, not guessed by a delay: just spawned (its
    Python starting, its set-up), its native run started, its reads reaching the disk, or its
    run over and its record being handed over."""
    base = str(tmp_path / "pp.dat")
    for i in range(4):
        prepare(f"{base}.{i}", 8 * MiB)
    # 60 s: the run can end only by the kill; handing over needs a run that ends by itself
    runtime = "1s" if moment == "handing-over" else "60s"
    proc = gdsbench_cli("run", base, "--layout", "per-proc", "--procs", "4", "--bs", "64K", "--runtime", runtime)
    workers = workers_of(proc.pid, 4)
    everyone = children_of(proc.pid)  # the workers and multiprocessing's resource tracker
    victim = random.Random(moment).choice(workers)
    if moment != "set-up":
        wait_for_workers(victim)
    if moment == "measuring":
        started = device_read_bytes(victim)
        wait_until(lambda: device_read_bytes(victim) > started, "the victim's O_DIRECT reads reaching the disk")
    if moment == "handing-over":
        wait_until(lambda: not runs_native_workers(victim), "the victim's run over")
    try:
        os.kill(victim, signal.SIGKILL)
    except ProcessLookupError:  # handed over and gone: the run ends whole
        pass
    # a hang guard, under the 60 s runtime: ended by the kill, and in the time a loaded machine needs
    _, err = proc.communicate(timeout=45)
    if moment != "handing-over" or proc.returncode != 0:  # the record may be over before the kill lands
        line = one_line_error(err)
        assert proc.returncode == 3 and f"(pid {victim})" in line and "killed by signal SIGKILL" in line
    wait_until(lambda: not any(alive(c) for c in everyone), "every process of the run ended (none left behind)")


def test_the_parent_killed_leaves_no_process_behind(tmp_path):
    proc = gdsbench_cli("run", "--engine", "null", "--procs", "3", "--runtime", "60s")
    workers = workers_of(proc.pid, 3)
    everyone = children_of(proc.pid)  # the workers and multiprocessing's resource tracker
    for worker in workers:
        wait_for_workers(worker)  # every one measuring
    proc.kill()
    proc.wait(timeout=10)
    assert set(workers) <= set(everyone)
    wait_until(lambda: not any(alive(c) for c in everyone), "every worker and the resource tracker ended (no orphan)",
               timeout=30)


def rank_processes(launcher: int, n: int, timeout: float = 20) -> dict[int, int]:
    """{rank: pid} of the gdsbench ranks an mpirun started, from their environment."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ranks, todo = {}, [launcher]
        while todo:
            pid = todo.pop()
            todo += children_of(pid)
            if "-m gdsbench" in cmdline(pid) and "prterun" not in cmdline(pid) and "mpirun" not in cmdline(pid):
                try:
                    env = dict(v.split("=", 1) for v in open(f"/proc/{pid}/environ").read().split("\0") if "=" in v)
                except OSError:
                    continue
                if "OMPI_COMM_WORLD_RANK" in env:
                    ranks[int(env["OMPI_COMM_WORLD_RANK"])] = pid
        if len(ranks) >= n:
            return ranks
        time.sleep(0.05)
    raise AssertionError(f"{n} MPI ranks did not start")


def catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM (SigCgt in /proc/PID/status)."""
    try:
        caught = next(line for line in open(f"/proc/{pid}/status") if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(int(caught.split()[1], 16) >> (signal.SIGTERM - 1) & 1)


@needs_mpi
def test_a_rank_killed_under_mpirun_gets_a_line_from_gdsbench_and_leaves_nothing():
    launcher = subprocess.Popen(mpirun_command(2, "run", "--engine", "null", "--runtime", "60s"), cwd=ROOT,
                                env=MPI_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ranks = rank_processes(launcher.pid, 2)
    wait_until(lambda: catches_sigterm(ranks[0]), "rank 0 has found MPI and said how to end")
    for rank in ranks.values():
        wait_for_workers(rank)  # then into the run: both ranks inside the native run (or at its start gate, MPI's barrier)
    os.kill(ranks[1], signal.SIGKILL)
    # a hang guard, under the 60 s runtime: ended by the kill, and in the time a loaded machine needs
    _, err = launcher.communicate(timeout=45)
    assert launcher.returncode != 0
    ours = [line for line in err.splitlines() if "gdsbench: " in line]  # the launcher's text may share the line
    assert len(ours) == 1 and "rank 0 on " in ours[0] and "ended by SIGTERM" in ours[0], err
    assert "Traceback" not in err and not alive(ranks[0])


@needs_mpi
def test_a_missing_per_rank_file_is_reported_by_the_rank_that_reads_it(tmp_path):
    base = str(tmp_path / "pr.dat")
    prepare(f"{base}.0", 4 * MiB)  # rank 1's file, pr.dat.1, is missing
    proc = mpirun(2, "run", base, "--layout", "per-proc", "--runtime", "1s", timeout=60)
    # the launcher forwards the ranks' lines in no set order: rank 0's "ended by SIGTERM" may come first
    # (and interleaved with the launcher's own: a line of ours need not start the line)
    missing = [line for line in proc.stderr.splitlines() if "gdsbench: error: " in line and "does not exist" in line]
    assert proc.returncode != 0 and len(missing) == 1, proc.stderr
    assert "rank 1 on " in missing[0] and f"{base}.1" in missing[0]


# ---- results lost, hidden or wrong ----

def null_sweep_args(results, *extra):
    return ["sweep", "--engine", "null", "--bs", "4K,8K,16K", "--runtime", "50ms", "--results", results,
            "--no-report", *extra]


def finished_run(tmp_path) -> str:
    results = str(tmp_path / "results")
    proc = gdsbench_cli(*null_sweep_args(results))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return os.path.join(results, os.listdir(results)[0])


def test_a_failed_sweep_and_an_interrupted_report_say_how_to_go_on(tmp_path, gdsbench, monkeypatch):
    from gdsbench.execution import runner
    from gdsbench.job.errors import IoFailure
    from gdsbench.reporting import report

    execute, calls = runner.execute, []

    def fails_on_the_second_point(plan, **kw):
        calls.append(plan)
        if len(calls) == 2:
            raise IoFailure("read failed at offset 0 (stand-in for a disk error)")
        return execute(plan, **kw)

    monkeypatch.setattr(runner, "execute", fails_on_the_second_point)
    results = str(tmp_path / "r")
    failed = gdsbench(*null_sweep_args(results))
    run_id = os.listdir(results)[0]
    assert failed.code == 3 and len(load(os.path.join(results, run_id))) == 1
    assert f"points measured before it are saved, finish with: gdsbench sweep --resume {run_id}" in failed.err

    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(report, "build", lambda path: (_ for _ in ()).throw(KeyboardInterrupt))
    done = gdsbench("sweep", "--resume", run_id, "--results", results)
    assert done.code == 130 and f"Write it with: gdsbench report {run_id}" in done.err, done.err


def test_a_second_writer_of_the_same_run_is_refused_naming_the_first(tmp_path):
    run_dir = finished_run(tmp_path)
    holder = RunStore(run_dir)
    holder.lock()  # another gdsbench writing this run
    try:
        proc = gdsbench_cli("sweep", "--resume", os.path.basename(run_dir), "--results", os.path.dirname(run_dir))
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2 and f"pid {os.getpid()}" in one_line_error(err)
    finally:
        holder.unlock()
    assert len(load(run_dir)) == 3  # nothing duplicated


def test_a_corrupt_line_is_skipped_by_name_and_the_lines_after_it_count(tmp_path):
    run_dir = finished_run(tmp_path)
    path = os.path.join(run_dir, POINTS_JSONL)
    lines = open(path).read().splitlines(keepends=True)
    lines.insert(1, "{ this is not json\n")
    open(path, "w").write("".join(lines))
    df = load(run_dir)
    assert len(df) == 3 and "line 2" in df.attrs["problems"][0]
    proc = gdsbench_cli("sweep", "--resume", os.path.basename(run_dir), "--results", os.path.dirname(run_dir))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "line 2" in err and "3 of 3 measurements" in out  # nothing measured again
    proc = gdsbench_cli("report", run_dir)
    out, _ = proc.communicate(timeout=60)
    assert "WARNING" in out and "line 2" in out


def test_resume_from_another_directory_reads_the_same_file_and_refuses_a_different_one(tmp_path, pattern_file):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(pattern_file, work / "data.dat")
    results = str(tmp_path / "results")
    proc = gdsbench_cli("sweep", "data.dat", "--bs", "64K,128K", "--runtime", "50ms", "--results", results,
                        "--no-report", cwd=str(work))
    assert proc.wait(timeout=60) == 0
    run_dir = os.path.join(results, os.listdir(results)[0])
    info = json.load(open(os.path.join(run_dir, RUN_FILE)))
    assert info["sweep"]["fixed"]["path"] == str(work / "data.dat")
    RunStore(run_dir).update_info(status="interrupted")
    os.unlink(work / "data.dat")  # another file under the same name
    prepare(str(work / "data.dat"), 16 * MiB)
    proc = gdsbench_cli("sweep", "--resume", os.path.basename(run_dir), "--results", results)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "not the file this run measured" in one_line_error(err) and "mtime_ns" in err


def test_resume_refuses_flags_it_would_ignore(tmp_path):
    run_dir = finished_run(tmp_path)
    proc = gdsbench_cli("sweep", "--resume", os.path.basename(run_dir), "--results", os.path.dirname(run_dir),
                        "--bs", "8K", "--runtime", "100ms")
    _, err = proc.communicate(timeout=60)
    line = one_line_error(err)
    assert proc.returncode == 2 and "--bs" in line and "--runtime" in line and "--resume" in line


def test_a_measurement_survives_its_target_vanishing_after_the_start(tmp_path):
    path = str(tmp_path / "going.dat")
    prepare(path, 16 * MiB)
    timer = threading.Timer(0.2, os.unlink, (path,))
    timer.start()
    r = run(JobSpec(path=path, engine="psync", bs=64 * 1024, runtime_ns=600_000_000, direct=False))
    timer.join()
    assert r.ops > 0 and not os.path.exists(path)
    assert r.cached_fraction_after is not None  # measured on the descriptor held, not the vanished name


def test_tables_behind_the_record_are_rebuilt_and_leftovers_removed(tmp_path):
    run_dir = finished_run(tmp_path)
    store = RunStore(run_dir)
    rows = store.records()
    import pyarrow as pa

    store.write_tables(pa.Table.from_pylist(rows[:2]))  # as a kill between the append and the rewrite leaves them
    leftover = os.path.join(run_dir, f"{POINTS_PARQUET}.tmp-999999999")
    open(leftover, "w").write("x")
    store.update_info(status="running")  # and a writer killed before it could say how it ended
    RunStore.open(run_dir)
    import pyarrow.parquet as pq

    assert pq.read_table(os.path.join(run_dir, POINTS_PARQUET)).num_rows == 3
    assert len(open(os.path.join(run_dir, POINTS_CSV)).read().strip().splitlines()) == 4
    assert not os.path.exists(leftover)
    assert RunStore(run_dir).info()["status"] == "interrupted"


# ---- safety ----

def test_prepare_never_overwrites_a_foreign_file_that_starts_with_gdsbench_blocks(tmp_path):
    ours = str(tmp_path / "ours.dat")
    prepare(ours, 1 * MiB)
    foreign = tmp_path / "foreign.dat"
    foreign.write_bytes(open(ours, "rb").read(4096) + b"user data" * (8 * MiB // 9))
    before = foreign.read_bytes()
    with pytest.raises(UsageError, match="did not create"):
        prepare(str(foreign), 2 * MiB)
    assert foreign.read_bytes() == before
    assert prepare(ours, 2 * MiB).size == 2 * MiB  # its own file it may still replace
    from gdsbench.system.prepare import MARK

    os.removexattr(ours, MARK)  # an unsigned pattern file (an older gdsbench): the whole file is the proof
    assert prepare(ours, 1 * MiB, force=True).size == 1 * MiB


def test_prepare_removes_what_a_killed_prepare_left(tmp_path):
    path = str(tmp_path / "data.dat")
    dead = subprocess.Popen(["true"])
    dead.wait()
    leftover = f"{path}.gdsbench-partial-{dead.pid}"
    open(leftover, "wb").write(b"\0" * 4096)
    prepare(path, 1 * MiB)
    assert not os.path.exists(leftover)


# ---- one line, not a traceback ----

@pytest.mark.parametrize("opt", [o for o in OPTIONS if o.kind in ("size", "duration", "int")], ids=lambda o: o.flag)
@pytest.mark.parametrize("value", ["-1", "0", str(2**64 - 1), str(2**64), "99999999P", "99999999999h", "abc", "1.5",
                                   True, 1.5])
def test_every_number_at_its_extremes_is_taken_or_refused_in_one_line(opt, value):
    try:
        parsed = opt.parse(value)
    except UsageError as e:
        assert opt.flag in str(e) and "\n" not in str(e)
        return
    assert isinstance(parsed, int) and not isinstance(parsed, bool)
    assert (opt.low is None or parsed >= opt.low) and (opt.high is None or parsed <= opt.high)


@pytest.mark.parametrize("args", [("--seed", "-5"), ("--seed", "99999999999999999999999"), ("--runtime", "99999999999h"),
                                  ("--io-size", "99999999P"), ("--runtime", "3000000h"), ("--direct", "--buffered"),
                                  ("--runtime", "500ns")])
def test_numbers_the_native_core_cannot_hold_and_contradictions_are_one_line(gdsbench, pattern_file, args):
    res = gdsbench("run", pattern_file, "--engine", "psync", "--bs", "64K", *args)
    assert res.code == 2, res.err
    assert res.err.count("\n") == 1 and "Traceback" not in res.err


def test_compare_of_a_run_with_itself_or_its_copy(tmp_path, gdsbench):
    run_dir = finished_run(tmp_path)
    copy = str(tmp_path / "copy")
    shutil.copytree(run_dir, copy)
    same_name = str(tmp_path / "elsewhere" / os.path.basename(run_dir))  # a copy under the same name
    shutil.copytree(run_dir, same_name)
    name = os.path.basename(run_dir)
    for other in (run_dir, copy, same_name):
        # a valid comparison (docs/faults.md: "compared, with distinct labels"): two runs that are
        # equal, every ratio 1.00x, the page written; not a usage error
        res = gdsbench("compare", run_dir, other, "--out", tmp_path / "cmp")
        assert res.code == 0 and "Traceback" not in res.err, res.err
        labels = ("copy", name) if other == copy else (f"{name}#1", f"{name}#2")
        assert all(f"bandwidth {label} " in res.out for label in labels), res.out
        ratios = [w for line in res.out.splitlines() if line.startswith("bs=") for w in line.split() if w.endswith("x")]
        assert ratios and set(ratios) == {"1.00x"} and os.path.isfile(tmp_path / "cmp" / "compare.html")


def test_a_corrupt_run_description_is_one_line(tmp_path, gdsbench):
    run_dir = finished_run(tmp_path)
    open(os.path.join(run_dir, RUN_FILE), "w").write("{ not json")
    res = gdsbench("report", run_dir)
    assert res.code == 2 and res.err.count("\n") == 1 and RUN_FILE in res.err


def test_pages_that_cannot_be_written_are_one_line(tmp_path, gdsbench):
    run_dir = finished_run(tmp_path)
    (tmp_path / "a-file").write_text("x")
    for out in (tmp_path / "a-file", "/proc/x"):
        res = gdsbench("report", run_dir, "--out", out)
        assert res.code == 2 and res.err.count("\n") == 1 and "--out" in res.err, res.err


def test_a_target_name_that_is_not_utf8_is_refused_by_prepare(tmp_path, gdsbench):
    name = os.fsdecode(os.path.join(os.fsencode(str(tmp_path)), b"bad\xff.dat"))
    res = gdsbench("prepare", name, "--size", "1M")
    assert res.code == 2 and "UTF-8" in res.err and res.err.count("\n") == 1


@pytest.mark.skipif(not is_root(), reason="mounting a read-only filesystem needs root")
def test_prepare_on_a_read_only_filesystem_is_one_line(tmp_path, gdsbench):
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "none", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount tmpfs here")
    try:
        res = gdsbench("prepare", mnt / "x.dat", "--size", "1M")
        assert res.code == 2 and "read-only" in res.err and res.err.count("\n") == 1
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_a_full_results_filesystem_keeps_the_points_saved_and_says_so(tmp_path, monkeypatch):
    from gdsbench.results import store as store_module

    real_replace = os.replace
    calls = {"n": 0}

    def replace(src, dst):
        calls["n"] += 1
        if calls["n"] > 4:  # run.json and two points' tables are written, then the disk is full
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(store_module.os, "replace", replace)
    from gdsbench import cli

    code = cli.main(null_sweep_args(str(tmp_path / "results")))
    monkeypatch.undo()
    assert code == 2
    run_dir = os.path.join(tmp_path, "results", os.listdir(tmp_path / "results")[0])
    assert len(load(run_dir)) >= 1  # what was saved before is all there
    assert not [f for f in os.listdir(run_dir) if ".tmp-" in f]


def test_a_sweep_file_with_wrong_types_names_the_line(tmp_path):
    from gdsbench.sweep.grid import load_sweep_file

    for text, line in (("qd = [1.5]\n", 1), ("name = 'x'\nbs = [true]\n", 2), ("runtime = '1s'\n[grid]\nbs = ['4K']\n", 2)):
        path = tmp_path / "s.toml"
        path.write_text(text)
        with pytest.raises(UsageError, match=f"line {line}"):
            load_sweep_file(str(path))


# ---- messages that say what is true ----

def test_verify_with_processes_reports_a_corrupt_first_block_as_a_mismatch(tmp_path):
    from gdsbench import VerifyFailure

    path = str(tmp_path / "v.dat")
    prepare(path, 8 * MiB)
    with open(path, "r+b") as f:  # the first block of the second process's part
        f.seek(4 * MiB)
        f.write(b"\xff" * 16)
    with pytest.raises(VerifyFailure) as failed:
        run(JobSpec(path=path, procs=2, bs=MiB, verify=True, io_size=8 * MiB))
    assert failed.value.result.verify_mismatches == 1


def test_a_flipped_byte_is_one_bad_block_however_often_it_is_read(tmp_path):
    from gdsbench import VerifyFailure

    path = str(tmp_path / "v.dat")
    prepare(path, 1 * MiB)
    with open(path, "r+b") as f:
        f.seek(5 * 4096 + 9)
        f.write(b"\x00")
    with pytest.raises(VerifyFailure) as failed:
        run(JobSpec(path=path, engine="psync", bs=64 * 1024, verify=True, runtime_ns=300_000_000, direct=False))
    r = failed.value.result
    assert r.passes > 3 and r.verify_mismatches == 1


def test_hints_that_could_not_work_are_not_given(tmp_path, gdsbench):
    small = tmp_path / "small.dat"
    small.write_bytes(b"u" * 4096)
    res = gdsbench("run", small, "--bs", "1M", "--buffered")
    assert res.code == 2 and f"prepare {small}" not in res.err and "NEW.dat" in res.err
    empty = tmp_path / "empty.dat"
    empty.write_bytes(b"")
    res = gdsbench("run", empty, "--bs", "4K", "--buffered")
    assert res.code == 2 and "is empty" in res.err and "--offset" not in res.err


def test_help_tells_the_default_of_direct_truly(gdsbench):
    parser_help = subprocess.run([sys.executable, "-m", "gdsbench", "run", "--help"], capture_output=True, text=True).stdout
    assert "(default: by mode)" in " ".join(parser_help.split())


def test_info_with_an_empty_path_is_refused(gdsbench):
    res = gdsbench("info", "--path", "")
    assert res.code == 2 and "--path" in res.err


def test_docs_faults_names_real_tests():
    """docs/faults.md: every row names a test that exists, and every test here has a row."""
    import re

    text = open(os.path.join(ROOT, "docs", "faults.md")).read()
    named = set(re.findall(r"`(test_\w+)`", text))
    defined = set()
    for path in glob.glob(os.path.join(ROOT, "tests", "test_*.py")):  # a row may name a test in any test file
        defined |= set(re.findall(r"^def (test_\w+)", open(path).read(), re.M))
    assert named <= defined, f"docs/faults.md names tests that do not exist: {sorted(named - defined)}"
    here = set(re.findall(r"^def (test_\w+)", open(__file__).read(), re.M)) - {"test_docs_faults_names_real_tests"}
    assert here <= named, f"tests with no row in docs/faults.md: {sorted(here - named)}"


# ---- train, predict, prepare --workload and validate: nothing crashes, hangs or is left behind ----

TRAIN = ["--workload", "unet3d", "--record-bytes", "64K", "--record-stdev", "16K", "--batch", "2", "--read-threads",
         "2", "--compute-time", "5ms"]


def stepping(parent: int, accelerators: list[int]) -> bool:
    """Whether a train's accelerators step: each has mapped the step barrier, and the parent has
    removed its file from /dev/shm, which it does once every accelerator is ready."""
    from gdsbench.train.accelerators import BARRIER_PREFIX

    name = f"{BARRIER_PREFIX}{parent}-"

    def mapped(pid: int) -> bool:
        try:
            return f"/dev/shm/{name}" in open(f"/proc/{pid}/maps").read()
        except OSError:
            return False

    return all(mapped(pid) for pid in accelerators) and not [f for f in os.listdir("/dev/shm") if f.startswith(name)]


def stopped(pid: int) -> bool:
    """Whether process pid is stopped (by SIGSTOP): its state in /proc/PID/stat."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except OSError:
        return False


@pytest.fixture(scope="module")
def train_set(tmp_path_factory):
    """40 samples of about 64 KiB, written by `gdsbench prepare --workload`."""
    from gdsbench import cli

    path = str(tmp_path_factory.mktemp("faults") / "ds")
    assert cli.main(["prepare", path, "--files", "40", *TRAIN]) == 0
    return path


def test_more_than_one_epoch_under_io_uring_gives_each_read_thread_its_own_ring(gdsbench, tmp_path):
    """Each epoch starts new read threads; a reader's io_uring ring (set up SINGLE_ISSUER) belongs
    to the thread that made it, so a reader used by another thread makes a new one."""
    rn = tmp_path / "rn"
    shape = ["--workload", "resnet50", "--files", "4", "--samples-per-file", "200"]
    assert gdsbench("prepare", rn, *shape).code == 0
    r = gdsbench("train", rn, *shape, "--batch", "20", "--compute-time", "5ms", "--epochs", "3", "--engine", "io_uring",
                 "--results", tmp_path / "results")
    assert r.code == 0, r.err


def test_ctrl_c_ends_a_train_whose_accelerator_is_stopped(tmp_path, train_set):
    """An accelerator stopped (SIGSTOP), as a read on a dead mount would hold it: the others wait at
    the barrier for it forever. Ctrl-C must still end the run in seconds, exit 130, nothing left."""
    p = gdsbench_cli("train", train_set, *TRAIN, "--accelerators", "2", "--epochs", "10000", "--results", tmp_path)
    kids = workers_of(p.pid, 2)
    wait_until(lambda: stepping(p.pid, kids), "the accelerators stepping")
    os.kill(kids[0], signal.SIGSTOP)
    wait_until(lambda: stopped(kids[0]), "accelerator 0 stopped")
    p.send_signal(signal.SIGINT)
    # a hang guard: a run that waited for the stopped accelerator would never end (10000 epochs);
    # 60 s is far past the seconds it takes, and past what a loaded machine needs
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert not any(alive(k) for k in kids) and "Traceback" not in err
    assert not [f for f in os.listdir("/dev/shm") if f.startswith(f"gdsbench-barrier-{p.pid}-")]


def test_a_stalled_step_is_reported_naming_the_accelerator():
    """The stall watch, on a stand-in clock: steps of 0.1 s, then accelerator 1 does not arrive."""
    from gdsbench.train.accelerators import StallWatch

    now, said = [0.0], []
    watch = StallWatch(3, lambda rank: 1000 + rank, say=said.append, clock=lambda: now[0])
    for step in range(5):
        for rank in range(3):
            watch.arrived(rank, 0, step)
        now[0] += 0.1
    watch.arrived(0, 0, 5)
    watch.arrived(2, 0, 5)
    now[0] += 4.9
    watch.check()
    assert not said  # under STALL_MIN_S: steps can be slow now and then
    now[0] += 1.0
    watch.check()
    watch.check()
    assert len(said) == 1 and "accelerator 1 (pid 1001)" in said[0] and "epoch 1 step 6" in said[0]
    assert "took 0.1 s" in said[0] and "Ctrl-C ends the run" in said[0]


def test_killed_train_leaves_no_barrier_file_and_its_run_says_interrupted(tmp_path, train_set, gdsbench):
    p = gdsbench_cli("train", train_set, *TRAIN, "--accelerators", "2", "--epochs", "10000", "--results", tmp_path)
    kids = workers_of(p.pid, 2)
    wait_until(lambda: stepping(p.pid, kids), "the accelerators stepping (the barrier file removed once both mapped it)")
    p.kill()
    p.communicate(timeout=30)
    assert not [f for f in os.listdir("/dev/shm") if f.startswith(f"gdsbench-barrier-{p.pid}-")]
    [run] = [d for d in tmp_path.iterdir() if d.is_dir()]
    r = gdsbench("report", run)
    assert "was interrupted" in r.err and json.load(open(run / RUN_FILE))["status"] == "interrupted"


def test_sigterm_ends_train_as_ctrl_c_does(tmp_path, train_set):
    p = gdsbench_cli("train", train_set, *TRAIN, "--accelerators", "2", "--epochs", "10000", "--results", tmp_path)
    kids = workers_of(p.pid, 2)
    wait_until(lambda: stepping(p.pid, kids), "the accelerators stepping")
    p.terminate()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "Traceback" not in err, err
    [run] = [d for d in tmp_path.iterdir() if d.is_dir()]
    assert json.load(open(run / RUN_FILE))["status"] == "interrupted"


def test_a_run_folder_is_never_left_without_its_description(tmp_path, monkeypatch):
    """A run is made in a hidden folder and renamed into place with its run.json; a kill in
    between leaves only the hidden folder, which the next run removes."""
    abandoned = tmp_path / ".creating-run-999999999"
    abandoned.mkdir(parents=True)
    store = RunStore.create(str(tmp_path), "x", {})
    assert os.path.isfile(os.path.join(store.path, RUN_FILE)) and not abandoned.exists()
    assert [p.name for p in tmp_path.iterdir()] == [store.run_id]


def test_an_incomplete_dataset_is_named_and_the_same_prepare_finishes_it(gdsbench, tmp_path, monkeypatch):
    """A prepare that stops part-way (here: the third file's write fails, as on a full disk) leaves a
    dataset that says so: train refuses it in one line, and the same prepare keeps the files done."""
    from gdsbench.system import folders

    real, calls = folders.prepare, []

    def full_disk(path, size, **kw):
        calls.append(path)
        if len(calls) == 3:
            raise UsageError(f"PATH {path}: cannot create the file: no space (or no free inodes) left there")
        return real(path, size, **kw)

    folder = tmp_path / "ds"
    monkeypatch.setattr(folders, "prepare", full_disk)
    r = gdsbench("prepare", folder, "--files", "5", *TRAIN)
    assert r.code == 2 and "stopped after 2 of 5 files" in r.err and "run the same prepare again" in r.err
    r = gdsbench("train", folder, *TRAIN, "--files", "5", "--results", tmp_path / "res")
    assert r.code == 2 and "an incomplete dataset" in r.err and "after 2 of 5 files" in r.err
    monkeypatch.setattr(folders, "prepare", real)
    r = gdsbench("prepare", folder, "--files", "5", *TRAIN)
    assert r.code == 0 and "already there" in r.out, r.err
    assert gdsbench("train", folder, *TRAIN, "--files", "5", "--results", tmp_path / "res").code == 0


def test_a_dataset_read_as_another_workload_says_so(gdsbench, train_set, tmp_path):
    r = gdsbench("train", train_set, "--workload", "resnet50", "--batch", "2", "--read-threads", "2", "--compute-time",
                 "5ms", "--results", tmp_path)
    assert r.code == 0, r.err
    assert "was prepared for workload unet3d, and is read as resnet50" in r.err
    r = gdsbench("train", train_set, *TRAIN, "--files", "1000", "--record-bytes", "8M", "--results", tmp_path)
    assert r.code == 0 and "record_bytes is 8 MiB" in r.err and "counts the workload's record size" in r.err


def test_prepare_workload_says_what_it_will_write_and_scales_the_spread_with_the_size(gdsbench, tmp_path):
    folder = tmp_path / "u"
    r = gdsbench("prepare", "--workload", "unet3d", folder, "--files", "60", "--record-bytes", "4M", "--dry-run")
    assert r.code == 0 and "would write" in r.out and not folder.exists()
    total = float(r.out.split("in all")[0].split(")")[-1].strip(", ").split()[0])
    assert "MiB in all" in r.out and 120 < total < 400, r.out  # about 60 x 4 MiB, not 3.4 GiB from unet3d's 65 MiB spread
