"""Issue 35's process-lifecycle cases, tried as a hostile user would: a full disk under --metrics
and --junit, MPI ranks given different jobs (mpirun's `A : B` form), Ctrl-C of the shipped
pytest suite started as a script's background job, SIGHUP (a closed SSH session) and SIGQUIT,
read-only filesystems and immutable files, a server fault during validate, and resume hints
that work as printed. Nothing measured is lost, every error is one line, and the exit status
says what happened. docs/faults.md lists each case with the test below that proves it."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shlex
import signal
import subprocess
import sys

import pytest
from conftest import MPI_ENV, MPIRUN, ROOT, is_root, needs_mpi, wait_for_workers, wait_until, workers_of
from test_validate import write_profile

from gdsbench import prepare
from gdsbench.results.store import RUN_FILE, RunStore

MiB = 1 << 20


# ---- helpers: gdsbench as a process, a tmpfs of the test's own ----

def _hangup_as_a_terminal_leaves_it() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def gdsbench_process(*args, cwd=ROOT, **kw) -> subprocess.Popen:
    """gdsbench started as from a terminal: SIGHUP at its default, even where this suite itself runs
    under nohup (which every child inherits, and gdsbench rightly honours); preexec_fn to differ."""
    kw.setdefault("preexec_fn", _hangup_as_a_terminal_leaves_it)
    return subprocess.Popen([sys.executable, "-m", "gdsbench", *map(str, args)], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def gdsbench_run(*args, cwd=ROOT, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gdsbench", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def one_error_line(stderr: str, *fragments: str) -> str:
    """The one `gdsbench: error:` line of stderr, holding each fragment; no traceback. Under mpirun the
    line may follow other text on its line (mpirun forwards every rank's stderr and its own abort
    notice into one stream, and a busy machine interleaves them): it is read from where it starts."""
    mark = "gdsbench: error: "
    errors = [line[line.index(mark):] for line in stderr.splitlines() if mark in line]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])
    return errors[0]


@contextlib.contextmanager
def tmpfs(where, size: str = "4m"):
    """A tmpfs of the test's own at `where`, unmounted afterwards (root only)."""
    if not is_root():
        pytest.skip("mounting a tmpfs needs root")
    os.makedirs(where, exist_ok=True)
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True,
                          text=True)
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield str(where)
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def remount_read_only(where: str) -> None:
    subprocess.run(["mount", "-o", "remount,ro", where], check=True)


def fill(folder: str) -> None:
    """Write into folder until its filesystem is full (ENOSPC)."""
    fd = os.open(os.path.join(folder, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
    finally:
        os.close(fd)


def last_line(text: str) -> str:
    return text.rstrip().splitlines()[-1]


# ---- a full disk under --metrics and --junit: the measurement first, then one line ----

def test_run_metrics_on_a_full_filesystem_shows_the_result_then_one_line(tmp_path):
    with tmpfs(tmp_path / "full", "256k") as full:
        fill(full)
        prom = os.path.join(full, "run.prom")
        p = gdsbench_run("run", "--engine", "null", "--runtime", "200ms", "--json", "--metrics", prom)
        assert sorted(os.listdir(full)) == ["filler"]  # no temporary left beside it
    one_error_line(p.stderr, f"--metrics {prom}", "No space left on device")
    assert p.returncode == 2  # a report that was not written is never a pass
    assert json.loads(p.stdout)["ops"] > 0  # the measurement is shown all the same


def test_validate_metrics_on_a_full_filesystem_prints_the_record_and_its_exit_agrees(tmp_path, pattern_file):
    with tmpfs(tmp_path / "full", "256k") as full:
        fill(full)
        prom = os.path.join(full, "validate.prom")
        p = gdsbench_run("validate", pattern_file, "--profile", write_profile(tmp_path), "--json", "--metrics", prom)
    one_error_line(p.stderr, f"--metrics {prom}", "No space left on device")
    record = json.loads(p.stdout)
    assert p.returncode == 3 and record["exit_code"] == 3, p.stderr  # 3 as a --json that could not be written
    assert record["summary"]["PASS"] > 0 and any("--metrics" in n for n in record["notes"])


def test_validate_junit_on_a_full_disk_summary_and_exit_status_agree(tmp_path, pattern_file):
    with tmpfs(tmp_path / "full", "256k") as full:
        fill(full)
        junit = os.path.join(full, "validate.xml")
        p = gdsbench_run("validate", pattern_file, "--profile", write_profile(tmp_path), "--junit", junit)
    one_error_line(p.stderr, f"--junit {junit}", "No space left on device")
    assert p.returncode == 3 and last_line(p.stdout).endswith(": exit 3"), (p.returncode, p.stdout)
    assert "PASS" in p.stdout  # the checks are printed


# ---- MPI: every rank runs its part of one job ----

@needs_mpi
def test_mpi_ranks_given_different_jobs_stop_in_one_line_naming_the_rank(pattern_file):
    """mpirun's MPMD form gives each rank its own arguments; gdsbench would merge figures of
    different block sizes under rank 0's job. The ranks compare their jobs first."""
    def mpmd(*apps: list[str]) -> subprocess.CompletedProcess:
        cmd = [MPIRUN, "--oversubscribe"]
        for i, app in enumerate(apps):
            cmd += ([":"] if i else []) + ["-n", "1", sys.executable, "-m", "gdsbench", *app]
        return subprocess.run(cmd, cwd=ROOT, env=MPI_ENV, capture_output=True, text=True, timeout=120)

    job = ["run", pattern_file, "--io-size", "2M", "--json"]
    p = mpmd([*job, "--bs", "4K"], [*job, "--bs", "1M"])
    assert p.returncode != 0 and p.stdout == "", p.stdout
    line = one_error_line(p.stderr, "rank 1", "--bs 1 MiB", "4 KiB")
    assert "rank 0" in line
    p = mpmd([*job, "--bs", "4K"], [*job, "--bs", "4K", "--runtime", "2s"])  # a flag one rank alone was given
    one_error_line(p.stderr, "rank 1", "--runtime 2 s")
    p = mpmd([*job, "--bs", "1M"], [*job, "--bs", "1024K"])  # the same job, spelled otherwise
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["processes"] == 2


# ---- Ctrl-C of the shipped pytest suite, started as a script's background job ----

def test_ctrl_c_to_the_shipped_suite_in_its_own_group_ends_it_interrupted(tmp_path, pattern_file):
    """`pytest ... &` in a script starts pytest with SIGINT ignored, in the script's process group;
    a SIGINT to that group while a test measures ends the suite as interrupted (pytest's 2)."""
    def as_a_background_job():
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    p = subprocess.Popen([sys.executable, "-m", "pytest", "--pyargs", "gdsbench.suites", "-p", "no:cacheprovider",
                          "-q", "-k", "random_4k", "--gdsbench-path", pattern_file, "--gdsbench-runtime", "8s"],
                         cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True, preexec_fn=as_a_background_job)
    try:
        wait_for_workers(p.pid)  # a test measures
        os.killpg(p.pid, signal.SIGINT)
        out, _ = p.communicate(timeout=120)  # a hang guard, not a measure
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 2 and "KeyboardInterrupt" in out, out
    assert "2 passed" not in out


# ---- SIGHUP (a closed SSH session) and SIGQUIT end a command as SIGTERM does ----

def _started(command: str, tmp_path, pattern_file) -> tuple[subprocess.Popen, str | None]:
    """A long run of `command`, once it measures (or writes); and where its run folders go."""
    results = str(tmp_path / "results")
    if command == "run":
        p = gdsbench_process("run", pattern_file, "--runtime", "120s", "--json")
        wait_for_workers(p.pid)
        return p, None
    if command == "run --procs 2":  # in a session of its own: the hangup goes to every process of it
        p = gdsbench_process("run", pattern_file, "--procs", "2", "--runtime", "120s", "--json",
                             start_new_session=True)
        for child in workers_of(p.pid, 2):
            wait_for_workers(child)
        return p, None
    if command == "sweep":
        p = gdsbench_process("sweep", pattern_file, "--bs", "4K,8K", "--runtime", "120s", "--results", results,
                             "--no-report")
        wait_for_workers(p.pid)
        return p, results
    if command == "train":
        from test_faults import TRAIN, stepping

        data = str(tmp_path / "ds")
        assert gdsbench_run("prepare", data, "--files", "8", *TRAIN).returncode == 0
        p = gdsbench_process("train", data, *TRAIN, "--accelerators", "2", "--epochs", "100000", "--results", results)
        kids = workers_of(p.pid, 2)
        wait_until(lambda: stepping(p.pid, kids), "the accelerators stepping")
        return p, results
    from test_checkpoint import SMALL

    ck = tmp_path / "ck"
    p = gdsbench_process("checkpoint", ck, *SMALL, "--checkpoints", "100", "--results", results)
    wait_until(lambda: (ck / "global_epoch1_step2").exists() or p.poll() is not None, "checkpoint 2 begun")
    return p, results


def signalled(p: subprocess.Popen, sig: int, group: bool = False, ready=None) -> tuple[str, str]:
    """Once ready() returns (the command measures), send sig to it (to its whole process group with
    group), then its output; a command still there after a generous hang guard is killed, never
    left behind."""
    try:
        if ready is not None:
            ready()
        os.killpg(p.pid, sig) if group else p.send_signal(sig)
        return p.communicate(timeout=120)  # a hang guard, not a measure
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("command", ["run", "run --procs 2", "sweep", "train", "checkpoint"])
def test_sighup_ends_a_command_as_sigterm_does(tmp_path, pattern_file, command):
    p, results = _started(command, tmp_path, pattern_file)
    # as a closed SSH session does, to the whole group where the workers are in it too
    out, err = signalled(p, signal.SIGHUP, group=command == "run --procs 2")
    assert p.returncode == 130 and "Traceback" not in err, (p.returncode, err)
    if command.startswith("run"):
        assert json.loads(out)["interrupted"] is True  # the measurement is kept
    else:
        [run] = os.listdir(results)
        assert json.load(open(os.path.join(results, run, RUN_FILE)))["status"] == "interrupted"


def test_sigquit_ends_a_run_as_sigterm_does_even_where_it_was_ignored(pattern_file):
    """Ctrl-\\ from the terminal quits, as Ctrl-C stops: also a run started as a script's
    background job (SIGQUIT ignored), keeping what was measured."""
    p = gdsbench_process("run", pattern_file, "--runtime", "120s", "--json",
                         preexec_fn=lambda: signal.signal(signal.SIGQUIT, signal.SIG_IGN))
    out, err = signalled(p, signal.SIGQUIT, ready=lambda: wait_for_workers(p.pid))
    assert p.returncode == 130 and json.loads(out)["interrupted"] is True, err


def test_sighup_under_nohup_is_still_ignored(pattern_file):
    """nohup's promise holds: a run started with SIGHUP ignored goes on to its end."""
    p = gdsbench_process("run", pattern_file, "--runtime", "1s", "--json",
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    out, err = signalled(p, signal.SIGHUP, ready=lambda: wait_for_workers(p.pid))
    assert p.returncode == 0 and json.loads(out)["interrupted"] is False, err


# ---- files that cannot be written: read-only filesystems, immutable and append-only files ----

def test_a_write_run_on_a_read_only_filesystem_is_one_line(tmp_path):
    with tmpfs(tmp_path / "ro") as mnt:
        data = os.path.join(mnt, "data.dat")
        prepare(data, MiB)
        remount_read_only(mnt)
        p = gdsbench_run("run", data, "--rw", "write", "--buffered", "--fsync-end", "--bs", "64K", "--io-size", "64K")
    one_error_line(p.stderr, f"PATH {data}", "read-only")
    assert p.returncode == 2 and p.stdout == ""


def test_a_run_with_no_path_in_a_read_only_working_directory_is_one_line(tmp_path):
    with tmpfs(tmp_path / "ro") as mnt:
        remount_read_only(mnt)
        p = gdsbench_run("run", "--runtime", "100ms", cwd=mnt)
    one_error_line(p.stderr, "results", "read-only", "give a PATH")
    assert p.returncode == 2


@contextlib.contextmanager
def attribute(path: str, flag: str):
    """chattr +flag on path for the block (root, on a filesystem that keeps the flag), then -flag."""
    if not is_root():
        pytest.skip("chattr +i and +a need root")
    made = subprocess.run(["chattr", f"+{flag}", path], capture_output=True, text=True)
    if made.returncode:
        pytest.skip(f"this filesystem keeps no {flag} attribute: {made.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", f"-{flag}", path], check=False)


@pytest.mark.parametrize("flag, word", [("i", "immutable"), ("a", "append-only")])
def test_writing_into_an_immutable_or_append_only_file_is_one_line(tmp_path, flag, word):
    data = str(tmp_path / "data.dat")
    prepare(data, MiB)
    with attribute(data, flag):
        p = gdsbench_run("run", data, "--rw", "write", "--bs", "64K", "--io-size", "64K")
        forced = gdsbench_run("prepare", data, "--size", "1M", "--force")
        before = os.stat(data)
    one_error_line(p.stderr, f"PATH {data}", word, f"chattr -{flag}")
    assert p.returncode == 2
    one_error_line(forced.stderr, f"PATH {data}", word, f"chattr -{flag}")
    assert forced.returncode == 2
    after = os.stat(data)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert sorted(os.listdir(tmp_path)) == ["data.dat"]  # no partial file left


# ---- a server fault during validate is a failed check, not a usage error ----

def test_a_server_fault_during_validate_is_a_failed_check_in_the_table(tmp_path):
    from test_remote import free_port, start, stop

    from gdsbench.job.spec import ENGINE_INFO

    if ENGINE_INFO["curl"]["unavailable"]:
        pytest.skip(f"the curl engine is not available: {ENGINE_INFO['curl']['unavailable']}")
    served = tmp_path / "served"
    served.mkdir()
    prepare(str(served / "data.dat"), 8 * MiB)
    port = free_port()
    with open(tmp_path / "server.log", "w") as log:
        server = start([sys.executable, os.path.join(ROOT, "tests", "fault_server.py"), str(port), str(served)], port, log)
    try:
        # /cut/: every ranged answer promises the range, sends half and closes the connection
        p = gdsbench_run("validate", f"http://127.0.0.1:{port}/cut/data.dat", "--profile", write_profile(tmp_path))
    finally:
        stop(server)
    assert p.returncode == 1 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    assert "FAIL" in p.stdout and last_line(p.stdout).endswith(": exit 1"), p.stdout


# ---- resume hints that work as printed ----

def test_resume_hints_name_a_run_given_by_path_and_none_is_given_while_another_writes_it(tmp_path, gdsbench,
                                                                                        monkeypatch):
    from gdsbench.execution import runner
    from gdsbench.job.errors import IoFailure

    execute, calls = runner.execute, []

    def fails_on_the_second_point(plan, **kw):
        calls.append(plan)
        if len(calls) % 2 == 0:
            raise IoFailure("read failed at offset 0 (stand-in for a disk error)")
        return execute(plan, **kw)

    monkeypatch.setattr(runner, "execute", fails_on_the_second_point)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # its default --results (results/) holds nothing of this run
    results = str(tmp_path / "r")
    failed = gdsbench("sweep", "--engine", "null", "--bs", "4K,8K,16K,32K", "--runtime", "50ms", "--results", results,
                      "--no-report")
    assert failed.code == 3
    run_dir = os.path.join(results, os.listdir(results)[0])
    failed = gdsbench("sweep", "--resume", run_dir)  # by path: its own --results is not this run's
    assert failed.code == 3 and "finish with: " in failed.err, failed.err
    hint = shlex.split(failed.err.split("finish with: ")[1].strip())
    assert hint[:3] == ["gdsbench", "sweep", "--resume"] and "results" not in hint[3:], hint

    holder = RunStore(run_dir)
    holder.lock()  # another gdsbench writing this run: no resume is suggested
    try:
        busy = gdsbench(*hint[1:])
    finally:
        holder.unlock()
    assert busy.code == 2 and "another gdsbench" in busy.err and "--resume" not in busy.err, busy.err

    monkeypatch.setattr(runner, "execute", execute)
    done = gdsbench(*hint[1:])  # the hint, as printed, finishes the run
    assert done.code == 0 and "4 of 4 measurements saved" in done.out, done.err
