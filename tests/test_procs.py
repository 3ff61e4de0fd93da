"""Many processes and MPI ranks: exact aggregation, stonewalling, failures."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import alive, children_of, mpirun, needs_mpi, wait_for_workers, wait_until, workers_of
from test_histogram import exact_percentile

from gdsbench import JobSpec, _native, load, run
from gdsbench.execution.aggregate import aggregate
from gdsbench.execution.parts import part_specs
from gdsbench.execution.record import RunRecord, ThreadRecord
from gdsbench.job.result import Result

MiB = 1 << 20
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fake_part(samples, start_ns, nbytes=4096, stonewall_bytes=0):
    h = _native.LatencyHistogram()
    h.add(np.asarray(samples, dtype=np.uint64))
    thread = dataclasses.replace(
        ThreadRecord.empty(), latency=h, bytes=nbytes * len(samples), ops=len(samples), last_complete_ns=1_000_000,
        timeline_bytes=np.array([nbytes * len(samples)], dtype=np.uint64), cpu_user_s=0.1, cpu_sys_s=0.2, passes=1,
        stonewall_bytes=stonewall_bytes, stonewall_ops=stonewall_bytes // nbytes, stonewall_ns=500_000)
    return RunRecord(threads=[thread], interrupted=False, start_skew_ns=0, process_cpu_user_s=0.1,
                     process_cpu_sys_s=0.2, window_cpu_user_s=0.1, window_cpu_sys_s=0.2, wall_ns=2_000_000,
                     start_realtime_ns=start_ns, first_done_ns=600_000)


def test_aggregate_is_the_sum_of_parts_and_percentiles_are_of_the_pooled_samples():
    rng = np.random.default_rng(3)
    samples = [rng.lognormal(11, 0.6, 5000).astype(np.uint64), rng.lognormal(12, 0.3, 3000).astype(np.uint64),
               rng.lognormal(10, 1.0, 8000).astype(np.uint64)]
    starts = [10_000_000_000, 10_000_050_000, 10_000_020_000]  # gates 50 us apart
    raw = aggregate([fake_part(s, t) for s, t in zip(samples, starts)], [{"host": "h", "pid": i} for i in range(3)],
                    100_000_000)
    r = Result.from_run(JobSpec(engine="null", procs=3), raw)
    assert r.ops == sum(len(s) for s in samples) and r.bytes == 4096 * r.ops
    assert r.cpu_user_s == pytest.approx(0.3) and r.cpu_sys_s == pytest.approx(0.6)
    assert r.start_skew_ns == 50_000
    # IOR: total bytes over latest end - earliest start (the 50 us late part ends 50 us later)
    assert r.elapsed_ns == 1_000_000 + 50_000
    pooled = np.concatenate(samples)
    for p in (50, 90, 99, 99.9):
        exact = exact_percentile(pooled, p)
        assert abs(r.percentile(p) - exact) <= 0.01 * exact
    assert [p["bytes"] for p in r.procs] == [4096 * len(s) for s in samples]
    assert [p["start_offset_ns"] for p in r.procs] == [0, 50_000, 20_000]


def test_parts_divide_a_shared_file_and_reorder_shifts_them():
    spec = JobSpec(path="f", bs=MiB, size=4 * MiB, offset=MiB, gpu="0,1", mode="bounce")
    parts = part_specs(spec, 3)
    assert [p.offset for p in parts] == [MiB, 5 * MiB, 9 * MiB] and [p.gpu for p in parts] == [(0,), (1,), (0,)]
    assert [p.offset for p in part_specs(spec.replace(reorder=True), 3, shift=1)] == [5 * MiB, 9 * MiB, MiB]
    assert [p.path for p in part_specs(spec.replace(layout="per-proc"), 2)] == ["f.0", "f.1"]
    assert len({p.seed for p in part_specs(spec.replace(layout="shared-all"), 3)}) == 3


def test_processes_read_every_block_once_and_add_up(pattern_file):
    r = run(JobSpec(path=pattern_file, procs=2, threads=2, bs=MiB, qd=2, verify=True, io_size=4 * MiB))
    size = os.path.getsize(pattern_file)
    assert r.bytes == 8 * MiB and r.verify_mismatches == 0 and r.verified_blocks == 8 * MiB // 4096
    assert len(r.procs) == 2 and sum(p["bytes"] for p in r.procs) == r.bytes
    assert {p["pid"] for p in r.procs}.isdisjoint({os.getpid()})
    assert r.latency.count == r.ops and r.start_skew_ns < 1_000_000_000
    assert size >= 8 * MiB


def test_stonewall_notes_progress_when_told_another_process_finished(pattern_file):
    """The native mechanism: a poll that reports a peer done makes every worker note its progress."""
    from gdsbench.execution.native import to_native
    from gdsbench.execution.record import RunRecord
    from gdsbench.execution.runner import plan

    spec = plan(JobSpec(path=pattern_file, engine="null", bs=4096, threads=2, stonewall=True,
                        runtime_ns=60_000_000_000)).spec  # a hang guard: the poll below ends the run
    seen = {}

    def poll(nbytes, elapsed_ns, worker_done):
        """Say a peer is done once bytes have moved; then, once the workers have moved at least
        3 reads more than they had by the next poll (every one of them had the notice by then),
        end the run. By bytes, not by time: a loaded machine only makes the run longer."""
        if "notice" not in seen:
            if nbytes == 0:
                return 0
            seen["notice"] = nbytes
            return 2
        seen.setdefault("after", nbytes)
        return 1 if nbytes >= seen["after"] + 3 * 4096 else 0

    run = RunRecord.from_native(_native.run(to_native(spec), poll))
    r = Result.from_run(spec, run)
    # the workers noted their progress once told (each at its first completion after the notice,
    # or at its end if it had none), and went on: together at least what they had at the notice,
    # at most a read each more than at the next poll, so less than the whole
    assert run.interrupted and not r.stonewall["first_done_ns"]  # no worker ran out of work
    assert seen["notice"] <= r.stonewall["bytes"] < r.bytes
    for t in run.threads:
        assert t.stonewall_ns > 0 and t.stonewall_bytes <= t.bytes


def test_the_first_worker_to_finish_stonewalls_the_others(pattern_file):
    r = run(JobSpec(path=pattern_file, engine="psync", bs=MiB, threads=2, stonewall=True, io_size=3 * MiB,
                    direct=False))
    # budgets of 2 and 1 reads: the stonewall figures exist and never exceed the full ones
    assert r.stonewall is not None and 0 < r.stonewall["bytes"] <= r.bytes
    assert r.stonewall["first_done_ns"] > 0
    d = r.to_dict()
    assert d["stonewall_bandwidth_bytes_per_s"] > 0


def test_bad_process_input(gdsbench, pattern_file):
    res = gdsbench("run", pattern_file, "--procs", "0")
    assert res.code == 2 and "--procs 0" in res.err
    res = gdsbench("run", pattern_file, "--procs", "4", "--size", "8M", "--bs", "1M")
    assert res.code == 2 and "run past the end" in res.err and "--procs 4" in res.err
    res = gdsbench("run", pattern_file, "--mode", "bounce", "--gpu-backend", "sim", "--procs", "2", "--gpus", "0,3",
                   "--io-size", "4M")
    assert res.code == 2 and "--gpu 3" in res.err and "process 1" in res.err
    res = gdsbench("run", str(pattern_file) + ".nope", "--layout", "per-proc", "--procs", "2")
    assert res.code == 2 and "does not exist" in res.err


def test_per_process_files(tmp_path, gdsbench):
    base = str(tmp_path / "pp.dat")
    assert gdsbench("prepare", base, "--size", "4M", "--files", "3").code == 0
    r = run(JobSpec(path=base, layout="per-proc", procs=3, bs=MiB, verify=True, io_size=4 * MiB, reorder=True))
    assert r.bytes == 12 * MiB and r.verify_mismatches == 0


def test_a_killed_worker_ends_the_run_promptly(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "gdsbench", "run", "--engine", "null", "--procs", "2",
                             "--runtime", "60s"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    children = workers_of(proc.pid, 2)
    everyone = children_of(proc.pid)  # the workers and multiprocessing's resource tracker
    for child in children:
        wait_for_workers(child)  # both measuring
    os.kill(children[-1], signal.SIGKILL)
    # ended by the kill, not by its 60 s runtime: the bound is half of that, which a loaded machine
    # does not take to end a run by accident
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3 and "killed by signal SIGKILL" in err and err.count("\n") == 1
    wait_until(lambda: not any(alive(c) for c in everyone), "the run's other processes ended", timeout=30)


def test_procs_is_a_sweep_dimension(gdsbench, tmp_path):
    res = gdsbench("sweep", "--engine", "null", "--procs", "1,2", "--runtime", "100ms", "--results", tmp_path,
                   "--no-report")
    assert res.code == 0, res.err
    df = load(os.path.join(tmp_path, os.listdir(tmp_path)[0]))
    assert sorted(df["procs"]) == [1, 2] and sorted(df["processes"]) == [1, 2]


# ---- MPI, on this host ----

@needs_mpi
def test_mpirun_four_ranks(pattern_file):
    proc = mpirun(4, "run", pattern_file, "--bs", "1M", "--io-size", "2M", "--verify", "--stonewall", "--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)  # only rank 0 prints
    assert d["processes"] == 4 and d["bytes"] == 8 * MiB and d["verify_mismatches"] == 0
    assert sorted(p["rank"] for p in d["per_process"]) == [0, 1, 2, 3]
    assert all(p["host"] for p in d["per_process"]) and d["stonewall_bytes"] <= d["bytes"]


@needs_mpi
def test_mpirun_sweep(tmp_path):
    proc = mpirun(2, "sweep", "--engine", "null", "--bs", "4K,8K", "--runtime", "100ms", "--results", str(tmp_path),
                  "--no-report")
    assert proc.returncode == 0, proc.stderr
    runs = os.listdir(tmp_path)
    assert len(runs) == 1  # rank 0 alone writes
    df = load(os.path.join(tmp_path, runs[0]))
    assert len(df) == 2 and set(df["processes"]) == {2}


@needs_mpi
def test_mpirun_failure_names_the_rank_and_host(tmp_path):
    start = time.monotonic()
    proc = mpirun(2, "run", str(tmp_path / "missing.dat"), timeout=60)
    assert proc.returncode != 0 and time.monotonic() - start < 30  # it ends, not hangs: a generous bound
    assert "gdsbench: error: rank " in proc.stderr and " on " in proc.stderr and "does not exist" in proc.stderr


def test_parts_starting_intervals_apart_line_up_on_the_timeline():
    parts = [fake_part([1000] * 10, 10_000_000_000), fake_part([1000] * 10, 10_250_000_000)]
    raw = aggregate(parts, [{"host": "h", "pid": 1}, {"host": "h", "pid": 2}], 100_000_000)
    r = Result.from_run(JobSpec(engine="null", procs=2), raw)
    # the second part started 2.5 intervals later: its bytes land in interval 2
    assert r.timeline_bytes[0] == 40960 and r.timeline_bytes[2] == 40960 and sum(r.timeline_bytes) == r.bytes


@pytest.mark.parametrize("when", ["start-up", "running"])
def test_ctrl_c_with_processes_stops_cleanly(when):
    proc = subprocess.Popen([sys.executable, "-m", "gdsbench", "run", "--engine", "null", "--procs", "2", "--threads",
                             "8", "--runtime", "60s", "--json"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    children = workers_of(proc.pid, 2, timeout=60)  # spawning: whatever the machine's load, the run has begun
    if when == "running":
        for child in children:
            wait_for_workers(child)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=90)  # a hang guard: a machine loaded past its cores is slow to stop 16 threads
    assert proc.returncode == 130, err
    assert out, f"nothing measured was printed after the Ctrl-C, only: {err.strip()}"  # docs/running.md: 130 "likewise"
    assert json.loads(out)["interrupted"] is True


def test_ctrl_c_while_the_processes_are_being_started_is_kept(monkeypatch):
    """SIGINT is blocked while the children are spawned; one that arrives then is acted on once
    they are started (it was once ignored there, and a loaded machine's run went its full time)."""
    import multiprocessing.context

    real_start = multiprocessing.context.SpawnProcess.start
    sent = []

    def start_then_ctrl_c(self):
        real_start(self)
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)  # in the middle of starting them

    monkeypatch.setattr(multiprocessing.context.SpawnProcess, "start", start_then_ctrl_c)
    began = time.monotonic()
    try:
        result = run(JobSpec(engine="null", procs=2, runtime_ns=60_000_000_000))
    except KeyboardInterrupt:  # a failure of this test, not the end of the whole session
        pytest.fail("the Ctrl-C's KeyboardInterrupt left run() in place of an interrupted result (the processes "
                    "were killed before they sent what they had)")
    # ended by the Ctrl-C, not at its 60 s runtime: a bound no loaded machine reaches by accident
    assert sent and result.interrupted and time.monotonic() - began < 50
