"""gdsbench train and predict: the AU formula as DLIO has it, datasets in a
workload's shape, the step barrier, the pipeline model, and small runs end to
end (processes, MPI, a simulated GPU, verification)."""

import json
import os
import shutil
import threading
import time

import numpy as np
import pytest
from conftest import mpirun, needs_mpi, needs_uncached, wait_until
from test_gpu import fake_kvikio_modules

from gdsbench import _native
from gdsbench.results.store import load
from gdsbench.system.pagecache import cached_fraction
from gdsbench.train import metrics, predict, workloads
from gdsbench.train.dataset import open_dataset, record_sizes, shard, steps_per_epoch
from gdsbench.train.pipeline import AcceleratorRecord, EpochRecord

KiB, MiB = 1 << 10, 1 << 20
SMALL = ["--workload", "unet3d", "--record-bytes", "64K", "--record-stdev", "16K", "--batch", "2", "--read-threads", "2",
         "--compute-time", "5ms"]


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    """120 samples of about 64 KiB, written by `gdsbench prepare --workload`."""
    from gdsbench import cli

    path = str(tmp_path_factory.mktemp("train") / "ds")
    assert cli.main(["prepare", path, "--files", "120", *SMALL]) == 0
    return path


def epoch(compute, loaded_after, start=0.0, barrier_wait=None) -> EpochRecord:
    """A synthetic epoch (seconds in, ns out): step k waits loaded_after[k] for data, computes, and is released."""
    t, rows = start, []
    for c, wait in zip(compute, loaded_after):
        step_start = t
        loaded = step_start + wait
        computed = loaded + c
        t = computed
        rows.append((step_start, loaded, computed, t))
    arr = (np.array(rows) * 1e9).astype(np.int64)
    n = len(compute)
    return EpochRecord(start_ns=int(start * 1e9), end_ns=int(arr[-1, 3]), step_start_ns=arr[:, 0], loaded_ns=arr[:, 1],
                       computed_ns=arr[:, 2], released_ns=arr[:, 3], compute_s=np.array(compute, dtype=float),
                       barrier_wait_ns=np.zeros(n, dtype=np.int64) if barrier_wait is None else np.array(barrier_wait),
                       batch_bytes=np.zeros(n, dtype=np.int64))


# ---- the AU formula (DLIO 2.0, utils/statscounter.py) ----


def test_au_leaves_the_first_step_out_of_both_sides():
    e = epoch([0.1] * 5, [2.0, 0.0, 0.1, 0.0, 0.0])  # a slow first step (filling the pipeline), one stall of 0.1 s
    # compute of steps 2..5 over the time from the end of step 1's compute to the end
    assert metrics.epoch_au(e) == pytest.approx(0.4 / 0.5)
    assert metrics.block_au(np.array([0.1]), 0.1, 0, int(0.1e9)) == 0.0  # only the first step: nothing counted


def test_au_of_blocks_is_weighted_by_their_steps():
    e = epoch([0.1] * 6, [0.0, 0.0, 0.0, 0.0, 0.2, 0.0])  # blocks of 3 steps: the second has the stall
    first = metrics.block_au(e.compute_s[:3], 0.1, 0, int(e.released_ns[2]))
    second_start = int(e.released_ns[2])
    second = metrics.block_au(e.compute_s[3:], (e.computed_ns[3] - e.step_start_ns[3]) / 1e9, second_start,
                              int(e.released_ns[5]))
    assert first == pytest.approx(1.0) and second == pytest.approx(0.2 / 0.4)
    assert metrics.epoch_au(e, blocks=2) == pytest.approx((3 * first + 3 * second) / 6)


def test_au_is_the_mean_over_ranks_then_over_epochs():
    per_rank_epoch = np.array([[0.9, 0.5], [0.7, 0.3]])  # 2 ranks x 2 epochs
    assert metrics.mean_over_ranks_then_epochs(per_rank_epoch) == pytest.approx(np.mean([0.8, 0.4]))


def test_summary_counts_stragglers_as_the_longest_wait_at_each_barrier():
    w = workloads.with_overrides(workloads.BUILT_IN["unet3d"], {"batch": 2})
    fast = AcceleratorRecord(0, "h", [epoch([0.1] * 4, [0, 0, 0, 0], barrier_wait=[0, 50_000_000, 0, 20_000_000])],
                             latency=_native.LatencyHistogram())
    slow = AcceleratorRecord(1, "h", [epoch([0.1] * 4, [0, 0, 0, 0], barrier_wait=[0, 0, 30_000_000, 0])],
                             latency=_native.LatencyHistogram())
    row = metrics.summarise([fast, slow], w)
    assert row["straggler_mean_s"] == pytest.approx((0.05 + 0.03 + 0.02) / 3)
    assert row["accelerators"] == 2 and row["au_percent"] == pytest.approx(100.0)
    assert row["samples_per_s"] == pytest.approx(2 * 4 * 2 / 0.4)


def test_v3_throughput_leaves_the_first_step_out_as_its_au_does():
    """v3.0's DLIO counts samples/s over AU's window: the steps after the first over the time less the
    first step's load and compute. A slow first step (2 s of loading) is left out, where DLIO 2.0's
    figure counts it."""
    w = workloads.with_overrides(workloads.BUILT_IN["unet3d"], {"batch": 2})
    e = epoch([0.1] * 5, [2.0, 0.0, 0.1, 0.0, 0.0])
    assert metrics.window_samples_per_s(e, 2) == pytest.approx(4 * 2 / 0.5)
    assert metrics.window_samples_per_s(epoch([0.1], [0.0]), 2) == 0.0  # nothing after the first step
    row = metrics.summarise([AcceleratorRecord(0, "h", [e], latency=_native.LatencyHistogram())], w)
    assert row["samples_per_s"] == pytest.approx(5 * 2 / 2.6) and row["samples_per_s_v3"] == pytest.approx(16.0)
    assert row["mib_per_s_v3"] == pytest.approx(16.0 * w.record_bytes / MiB)


def test_first_steps_wait_is_reported_apart_from_the_later_waits():
    """A loader that reads the epoch ahead waits in step 1, which AU and the wait percentiles leave out:
    first_wait_s shows it (2 s here), the later waits stay the steps after it."""
    w = workloads.with_overrides(workloads.BUILT_IN["unet3d"], {"batch": 2})
    e = epoch([0.1] * 5, [2.0, 0.0, 0.1, 0.0, 0.0])
    row = metrics.summarise([AcceleratorRecord(0, "h", [e], latency=_native.LatencyHistogram())], w)
    assert row["first_wait_s"] == pytest.approx(2.0)
    assert row["wait_mean_s"] * (row["steps_per_epoch"] - 1) == pytest.approx(0.1)
    assert row["au_percent"] == pytest.approx(100.0 * 0.4 / 0.5)


def test_v3_au_counts_each_steps_compute_as_measured():
    """v3.0's DLIO times the compute call (statscounter.batch_processed): a step asked for 0.1 s that
    slept 0.15 counts 0.15 there, 0.1 in DLIO 2.0's rule (au_percent). Same window: step 1 left out."""
    w = workloads.with_overrides(workloads.BUILT_IN["unet3d"], {"batch": 2})
    e = epoch([0.15] * 5, [2.0, 0.0, 0.1, 0.0, 0.0])  # each step's compute took 0.15 s
    e.compute_s = np.full(5, 0.1)  # ... asked for 0.1
    assert metrics.epoch_au(e) == pytest.approx(0.4 / 0.7)
    assert metrics.epoch_au(e, measured=True) == pytest.approx(0.6 / 0.7)
    row = metrics.summarise([AcceleratorRecord(0, "h", [e], latency=_native.LatencyHistogram())], w)
    assert row["au_percent"] == pytest.approx(100 * 0.4 / 0.7)
    assert row["au_percent_v3"] == pytest.approx(100 * 0.6 / 0.7)


def test_the_line_gives_v3s_au_only_where_it_parts_from_the_time_asked():
    from gdsbench.reporting.train_report import point_line

    row = {"accelerators": 1, "passed": True, "au_percent": 95.0, "samples_per_s": 1.0, "mib_per_s": 1.0,
           "read_mib_per_s": 1.0, "step_time_p50_s": 0.1, "step_time_p99_s": 0.1, "wait_p50_s": 0.0, "wait_p99_s": 0.0,
           "straggler_mean_s": None, "straggler_p99_s": None, "straggler_share": None, "steps_per_epoch": 10}
    assert "v3.0's rule" not in point_line(row, None)
    assert "v3.0's rule" not in point_line({**row, "au_percent_v3": 95.04}, None)  # the same, as shown
    assert "AU  95.0% PASS (v3.0's rule, compute as measured: 97.3%)" in point_line({**row, "au_percent_v3": 97.3}, None)


# ---- datasets ----


def test_sample_sizes_are_drawn_as_dlio_draws_them():
    w = workloads.with_overrides(workloads.BUILT_IN["unet3d"], {"record_bytes": 8 * MiB, "record_stdev": 2 * MiB})
    sizes = record_sizes(w, 20_000)
    assert np.all(sizes % 4096 == 0) and sizes.min() > 0
    assert sizes.mean() == pytest.approx(8 * MiB, rel=0.01)
    assert sizes.std() == pytest.approx(2 * MiB / np.sqrt(2), rel=0.03)  # d1 x d2, each of sd stdev / (2 sqrt(mean))
    fixed = record_sizes(workloads.with_overrides(w, {"record_stdev": 0}), 10)
    assert len(set(fixed.tolist())) == 1 and abs(int(fixed[0]) - 8 * MiB) < 8192


def test_each_accelerator_gets_its_own_share_shuffled_by_epoch():
    shares = [shard(100, r, 3, epoch=0, seed=5) for r in range(3)]
    assert sorted(np.concatenate(shares).tolist()) == list(range(100))
    assert not np.array_equal(shard(100, 0, 3, epoch=0, seed=5), shard(100, 0, 3, epoch=1, seed=5))
    assert steps_per_epoch(100, 7, 3) == 4


def test_prepare_writes_the_shape_and_a_manifest(dataset_dir, gdsbench):
    d = open_dataset(dataset_dir)
    assert d.samples == 120 and d.patterned and len(d.paths) == 120
    # each file its own bytes (pattern.file_seed), as DLIO's are: no store could keep one copy of them all
    assert len({open(p, "rb").read(4096) for p in d.paths[:10]}) == 10
    assert abs(d.length.mean() - 64 * KiB) < 16 * KiB
    r = gdsbench("prepare", dataset_dir, "--files", "120", *SMALL[:-2], "--record-bytes", "128K")
    assert r.code == 2 and "another shape" in r.err


def test_a_directory_without_a_manifest_is_one_sample_per_file(tmp_path):
    for i in range(3):
        (tmp_path / f"img_{i}.npz").write_bytes(b"x" * (10_000 + i))
    d = open_dataset(str(tmp_path))
    assert d.samples == 3 and not d.patterned and d.length.tolist() == [10_000, 10_001, 10_002]


def test_a_workload_file_names_the_line_of_an_error(tmp_path, gdsbench, dataset_dir):
    bad = tmp_path / "mine.toml"
    bad.write_text('base = "unet3d"\nbatch = 4\ncompute_time = 1\n')
    r = gdsbench("train", dataset_dir, "--workload", bad)
    assert r.code == 2 and "line 3" in r.err and "unknown field" in r.err
    good = tmp_path / "tiny.toml"
    good.write_text('base = "unet3d"\nrecord_bytes = "64K"\nbatch = 2\ncompute_s = "5ms"\nread_threads = 2\n')
    w = workloads.load(str(good))
    assert (w.name, w.batch, w.compute_s, w.record_bytes, w.format) == ("tiny", 2, 0.005, 64 * KiB, "npz")
    # a new record_bytes scales the base's spread, as --record-bytes does, so the file and the flags agree
    flags = workloads.with_overrides(workloads.BUILT_IN["unet3d"], {"record_bytes": 64 * KiB})
    assert w.record_stdev == flags.record_stdev == round(68_341_808 * 64 * KiB / 146_600_628)


def test_the_built_in_workloads_are_dlio_s_h100_configs():
    u, r, c = (workloads.BUILT_IN[n] for n in ("unet3d", "resnet50", "cosmoflow"))
    assert (u.files, u.record_bytes, u.record_stdev, u.batch, u.read_threads, u.compute_s, u.au_threshold) == \
        (168, 146_600_628, 68_341_808, 7, 4, 0.323, 0.90)
    assert (r.files, r.samples_per_file, r.record_bytes, r.batch, r.read_threads, r.compute_s) == \
        (1024, 1251, 114_660, 400, 8, 0.224)
    assert (c.files, c.record_bytes, c.batch, c.compute_s, c.au_threshold) == (524_288, 2_828_486, 1, 0.0035, 0.70)
    assert u.demand_bytes_per_s == pytest.approx(3.18e9, rel=0.01)  # shared/workloads.md: 3.18 GB/s per H100


# ---- the step barrier ----


def test_the_barrier_holds_everyone_for_the_slowest_and_can_be_aborted():
    """Judged by order, not by how long anyone waited: a and b wait until the slowest arrives,
    who goes straight on; an abort releases a party that waits, with an error."""
    import mmap
    import struct

    memory = mmap.mmap(-1, _native.BARRIER_BYTES)
    _native.StepBarrier(memory, 3)

    def arrived() -> int:  # the parties waiting in this step: BarrierState's first word (native/step_barrier.hpp)
        return struct.unpack_from("=I", memory, 0)[0]

    events = []

    def party(name: str) -> None:
        _native.StepBarrier(memory).wait()
        events.append(f"{name} released")

    threads = [threading.Thread(target=party, args=(n,), daemon=True) for n in ("a", "b")]
    for t in threads:
        t.start()
    wait_until(lambda: arrived() == 2, "a and b at the barrier")
    assert events == []  # both there, and held
    events.append("slow arrives")
    threads.append(threading.Thread(target=party, args=("slow",), daemon=True))
    threads[-1].start()
    for t in threads:
        t.join(timeout=60)  # a hang guard: a last party that waited would wait for ever
    assert not any(t.is_alive() for t in threads), events
    assert events[0] == "slow arrives" and sorted(events[1:]) == ["a released", "b released", "slow released"]

    stuck = _native.StepBarrier(memory)
    aborter = threading.Thread(target=lambda: (wait_until(lambda: arrived() == 1, "a party at the barrier"),
                                               _native.StepBarrier(memory).abort()), daemon=True)
    aborter.start()
    with pytest.raises(Exception, match="aborted"):
        stuck.wait()
    aborter.join()


# ---- the model ----


def fixed_curve(rate: float) -> predict.Curve:
    return predict.Curve([predict.ProbePoint(readers=c, bytes=0, seconds=1, samples=100, rate=rate, spread=0,
                                             cpu_share=0) for c in (1, 64)])


def test_the_model_matches_the_steady_state_where_it_is_simple():
    w = workloads.with_overrides(workloads.BUILT_IN["unet3d"], {"batch": 4, "read_threads": 2, "compute_s": 0.1,
                                                                 "record_stdev": 0})
    sizes = np.full(1000, float(MiB))
    need = 4 * MiB / 0.1  # 40 MiB/s per accelerator
    plenty = fixed_curve(10 * need)
    assert predict.simulate(w, sizes, plenty, 5, 200) > 0.99
    scarce = fixed_curve(2 * need)  # 2 accelerators' worth, shared by 4: steady state AU = 50%
    assert predict.simulate(w, sizes, scarce, 4, 400) == pytest.approx(0.5, abs=0.03)


# ---- end to end ----


def test_train_emulates_and_saves_a_run_with_its_page(dataset_dir, gdsbench, tmp_path):
    r = gdsbench("train", dataset_dir, *SMALL, "--accelerators", "1,2", "--results", tmp_path, "--json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert [x["accelerators"] for x in rows] == [1, 2]
    for x in rows:
        assert 0 < x["au_percent"] <= 100 and x["steps_per_epoch"] == 120 // 2 // x["accelerators"]
        assert x["samples_read"] >= x["steps_per_epoch"] * 2 * x["accelerators"]
        assert "O_DIRECT" in x["data_path"] and x["chunk_latency_p50_ns"] > 0
    run = os.path.join(tmp_path, os.listdir(tmp_path)[0])
    df = load(run)
    assert df.attrs["run"]["kind"] == "train" and len(df) == 2 and df.attrs["run"]["status"] == "complete"
    assert os.path.exists(os.path.join(run, "report", "report.html"))
    assert os.path.exists(os.path.join(run, "report", "au_vs_accelerators.png"))
    again = gdsbench("report", run, "--out", tmp_path / "page")
    assert again.code == 0 and os.path.exists(tmp_path / "page" / "step_times.png")
    assert again.out.startswith("answer: unet3d: ")  # the verdict, as train said it at its end


def test_train_prints_a_pass_or_fail_line(dataset_dir, gdsbench, tmp_path):
    r = gdsbench("train", dataset_dir, *SMALL, "--results", tmp_path, "--au", "0.5")
    assert r.code == 0, r.err
    assert "1 accelerator(s): AU" in r.out and ("PASS" in r.out or "FAIL" in r.out)


def test_verify_finds_a_corrupted_sample(tmp_path, gdsbench):
    from gdsbench import cli

    path = str(tmp_path / "ds")
    assert cli.main(["prepare", path, "--files", "20", *SMALL]) == 0
    victim = sorted(p for p in os.listdir(path) if p.endswith(".dat"))[3]
    with open(os.path.join(path, victim), "r+b") as f:
        f.seek(5000)
        f.write(b"\xff")
    r = gdsbench("train", path, *SMALL, "--verify", "--results", tmp_path)
    assert r.code == 4 and victim in r.err and "did not match" in r.err


def test_gpu_modes_run_on_the_simulated_device_and_say_so(dataset_dir, gdsbench, tmp_path):
    r = gdsbench("train", dataset_dir, *SMALL, "--mode", "bounce", "--gpu-backend", "sim", "--verify", "--json",
                 "--results", tmp_path)
    assert r.code == 0, r.err
    row = json.loads(r.out)[0]
    assert "SIMULATED" in row["data_path"] and row["verified_blocks"] > 0 and row["verify_mismatches"] == 0


@pytest.mark.parametrize("args, words", [
    (["--mode", "kvikio"], "kvikio"),  # no GPU, or no kvikio, here: said in one line
    (["--accelerators", "0"], "between 1 and"),
    (["--accelerators", "100"], "step(s)"),
    (["--buffered"], "--allow-cached"),
    (["--batch", "0"], "--batch 0"),
])
def test_bad_input_is_one_line(dataset_dir, gdsbench, tmp_path, args, words):
    r = gdsbench("train", dataset_dir, *SMALL, *args, "--results", tmp_path)
    assert r.code == 2 and words in r.err and "Traceback" not in r.err


def test_predict_gives_the_answer_and_the_figures_it_used(dataset_dir, gdsbench):
    r = gdsbench("predict", dataset_dir, *SMALL, "--probe-seconds", "0.3", "--json")
    assert r.code == 0, r.err
    p = json.loads(r.out)
    assert p["max_accelerators"] >= 1 and [q["readers"] for q in p["probe"][:2]] == [1, 2]  # a single reader too
    assert all(q["rate_bytes_per_s"] > 0 for q in p["probe"])
    assert any(a["accelerators"] == p["max_accelerators"] for a in p["au"])
    assert p["demand_bytes_per_s"] == pytest.approx(2 * open_dataset(dataset_dir).length.mean() / 0.005)


@needs_mpi
def test_mpi_ranks_are_the_accelerators(dataset_dir, tmp_path):
    proc = mpirun(2, "train", dataset_dir, *SMALL, "--results", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert rows[0]["accelerators"] == 2 and len(os.listdir(tmp_path)) == 1


def test_kvikio_mode_reads_whole_samples_against_a_test_double(dataset_dir, monkeypatch, tmp_path):
    """--mode kvikio's reader and its place in the pipeline, with TEST DOUBLES of
    kvikio and cupy (plain pread into numpy, tests/test_gpu.py): untested on a GPU."""
    from gdsbench.execution import kvikio_mode
    from gdsbench.job.spec import JobSpec
    from gdsbench.train import accelerators
    from gdsbench.train.pipeline import SoloBarrier

    fake_kvikio_modules(monkeypatch)
    ds = open_dataset(dataset_dir)
    spec = JobSpec(path=ds.paths[0], mode="kvikio", engine="kvikio", bs=MiB, verify=True, direct=True)
    w = workloads.with_overrides(workloads.BUILT_IN["unet3d"], {"batch": 2, "read_threads": 2, "compute_s": 0.002})
    config = accelerators.TrainConfig(w, ds, spec, 1, max_steps=10)
    readers = accelerators.make_readers(config, 0)
    assert all(isinstance(r, kvikio_mode.SampleReader) for r in readers)
    record = accelerators.run_accelerator(config, 0, SoloBarrier(), readers)
    assert record.samples_read == 20 and record.latency.count == 20  # one pread, one latency sample, per sample
    assert record.verified_blocks * 4 * KiB == record.bytes_read and record.verify_mismatches == 0

    original, offset, length = ds.sample(0)
    path = str(tmp_path / "copy.dat")  # the dataset is shared by other tests: corrupt a copy
    shutil.copyfile(original, path)
    with open(path, "r+b") as f:  # one flipped byte, read three times: one bad block
        f.seek(offset + 5000)
        byte = f.read(1)
        f.seek(offset + 5000)
        f.write(bytes([byte[0] ^ 0xFF]))
    reader = kvikio_mode.SampleReader(spec, 0)
    for _ in range(3):
        assert reader.read(path, offset, length)[0] == length
    assert reader.verify_mismatches == 1 and (reader.first_mismatch_path, reader.first_mismatch_offset) == (
        path, offset + 4 * KiB)
    with pytest.raises(Exception, match="short read"):
        reader.read(path, os.path.getsize(path) - 4 * KiB, 8 * KiB)
    assert "NOT GPUDirect" in kvikio_mode.sample_data_path(spec, length)  # the double is in compatibility mode


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["bounce", "gds", "kvikio"])
def test_real_gpu_train_modes_land_correct_samples(dataset_dir, gdsbench, tmp_path, mode, gpu_needs):
    gpu_needs(mode, verify=True)  # skipped, naming it, where cuFile, kvikio or cupy is absent; any error fails
    r = gdsbench("train", dataset_dir, *SMALL, "--mode", mode, "--verify", "--accelerators", "1,2", "--steps", "10",
                 "--json", "--results", tmp_path)
    assert r.code == 0, r.err
    for row in json.loads(r.out):
        assert row["verified_blocks"] > 0 and row["verify_mismatches"] == 0 and "SIMULATED" not in row["data_path"]


# ---- predict: what it answers, and where it says its model is off ----


def test_the_answer_is_the_largest_count_up_to_which_every_count_passes(dataset_dir, gdsbench, monkeypatch):
    """The case that contradicted itself: 1: 79%, 2: 100%, 3-5: 100% was "at most 2". Now it is 0,
    and the curve's coming back is said."""
    fake = {1: 79.0, 2: 100.0, 3: 100.0, 4: 100.0, 5: 100.0}
    monkeypatch.setattr(predict, "predicted_au", lambda w, sizes, curve, n, steps: {
        "accelerators": n, "au_percent": fake.get(n, 50.0), "steps": steps, "flags": []})
    r = gdsbench("predict", dataset_dir, *SMALL, "--probe-seconds", "0.2", "--json")
    assert r.code == 0, r.err
    p = json.loads(r.out)
    assert p["max_accelerators"] == 0
    assert any("not monotone" in w and "1 fails" in w for w in p["warnings"]), p["warnings"]


def test_predict_refuses_a_count_train_refuses_in_the_same_words(dataset_dir, gdsbench, tmp_path):
    # 120 samples, batch 2: 61 accelerators would get 0 steps each
    t = gdsbench("train", dataset_dir, *SMALL, "--accelerators", "61", "--results", tmp_path)
    p = gdsbench("predict", dataset_dir, *SMALL, "--also", "61", "--probe-seconds", "0.2")
    assert t.code == p.code == 2 and t.err.splitlines()[-1] == p.err.splitlines()[-1], (t.err, p.err)


def test_predict_warns_when_the_rate_falls_as_readers_are_added():
    """The case it was silent on: 800, 400 and 200 MiB/s at 4, 8 and 16 readers."""
    w = workloads.BUILT_IN["unet3d"]
    points = [predict.ProbePoint(readers=c, bytes=0, seconds=1, samples=100, rate=r * MiB, spread=0.0, cpu_share=0.1)
              for c, r in ((4, 800), (8, 400), (16, 200))]
    warnings = predict._out_of_depth(w, None, points, 2, 100 * MiB, 100)
    assert sum("fell from" in x for x in warnings) == 2 and "800 MiB/s at 4 readers" in warnings[0]
    assert "rate falls with readers" in predict.count_flags(w, points, 2, 100)
    few = predict._out_of_depth(w, None, points[:1], 0, 100 * MiB, 10)
    assert any("few" in x or "only 10 steps" in x for x in few) and not any("in DLIO as here" in x for x in few)


def test_predict_says_a_small_dataset_not_a_short_probe_limits_it(dataset_dir, monkeypatch):
    """120 samples read by instant stand-in readers run out long before a probe's time: the
    warning says to prepare more files, not to probe longer (which could not help)."""
    from gdsbench.job.spec import JobSpec
    from gdsbench.train.dataset import open_dataset

    class InstantReader:  # a stand-in: every read completes at once
        def read(self, path, offset, length):
            return length, 1, 1000

    monkeypatch.setattr(predict, "sample_readers", lambda spec, gpu, n: [InstantReader() for _ in range(n)])
    monkeypatch.setattr(predict, "evict", lambda d: None)
    ds = open_dataset(dataset_dir)
    point = predict.probe(ds, JobSpec(path=ds.paths[0]), readers=2, seconds=1.0, repeats=2)
    assert point.ran_out and point.to_dict()["ran_out_of_samples"]
    said = predict._out_of_depth(workloads.BUILT_IN["unet3d"], ds, [point], 1, 100 * MiB, 100)
    assert any("prepare more files" in x and "cannot help" in x for x in said), said
    assert not any("probe longer" in x for x in said)


def test_the_probe_reads_each_sample_once_drops_the_cache_and_repeats(dataset_dir, monkeypatch):
    """Stand-in readers count what the probe asks for: every repeat its own shuffled pass (no sample
    twice in one), the page cache dropped before each, and the spread taken between repeats."""
    from gdsbench.train.dataset import open_dataset

    ds = open_dataset(dataset_dir)
    asked, evicted = [], []

    class CountingReader:
        def __init__(self, repeat):
            self.repeat = repeat

        def read(self, path, offset, length):
            asked.append((len(evicted), path, offset))
            time.sleep(0.0005)
            return length, 1, 1000

    monkeypatch.setattr(predict, "sample_readers", lambda spec, gpu, n: [CountingReader(i) for i in range(n)])
    monkeypatch.setattr(predict, "evict", lambda d: evicted.append(True))
    from gdsbench.job.spec import JobSpec

    point = predict.probe(ds, JobSpec(path=ds.paths[0]), readers=3, seconds=0.4, repeats=2)
    assert len(evicted) == 2
    for repeat in (1, 2):
        reads = [(p, o) for r, p, o in asked if r == repeat]
        assert reads and len(reads) == len(set(reads))  # no sample read twice within a probe
    # what completed in each repeat's ramp is left out (all of it counts where none completed after it)
    assert point.spread >= 0 and 0 < point.samples <= len(asked)


def test_hosts_probing_together_each_read_their_own_share_and_the_point_is_their_sum(dataset_dir, monkeypatch):
    """Three hosts probing at once (threads with a stand-in for MPI's communicator of host leaders,
    for the logic; tests/test_hosts.py runs it under mpirun): no sample is read by two hosts in a
    repeat, and the point counts every host's readers and adds their rates."""
    from gdsbench.job.spec import JobSpec
    from gdsbench.train.dataset import open_dataset

    ds = open_dataset(dataset_dir)
    asked, gate, shared = [], threading.Barrier(3), {}

    class StandInLeaders:  # MPI's Get_rank, Get_size, Barrier and allgather, over threads
        def __init__(self, rank):
            self.rank = rank

        def Get_rank(self):
            return self.rank

        def Get_size(self):
            return 3

        def Barrier(self):
            gate.wait()

        def allgather(self, value):
            shared[self.rank] = value
            gate.wait()
            every = [shared[r] for r in range(3)]
            gate.wait()
            return every

    class CountingReader:
        def __init__(self, host):
            self.host = host

        def read(self, path, offset, length):
            asked.append((self.host, path, offset))
            time.sleep(0.002)
            return length, 1, 1000

    host_of = threading.local()
    monkeypatch.setattr(predict, "sample_readers", lambda spec, gpu, n: [CountingReader(host_of.rank) for _ in range(n)])
    monkeypatch.setattr(predict, "evict", lambda d: None)
    points = {}

    def host(rank):
        host_of.rank = rank
        points[rank] = predict.probe(ds, JobSpec(path=ds.paths[0]), readers=2, seconds=0.3, repeats=1,
                                     hosts=StandInLeaders(rank))

    threads = [threading.Thread(target=host, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reads = [(p, o) for _, p, o in asked]
    assert {h for h, _, _ in asked} == {0, 1, 2} and len(reads) == len(set(reads))  # one repeat: each sample once
    assert points[0] == points[1] == points[2]  # every host has the same point, so the same answer
    assert points[0].readers == 6 and points[0].rate > 0


def test_the_tfrecord_model_reads_each_batch_with_every_stream():
    """tf.data's rule in the model: one accelerator's 8 streams share every batch, so with the
    storage giving each reader only 1/8 of the demand, the batch still arrives in time."""
    w = workloads.with_overrides(workloads.BUILT_IN["resnet50"], {"batch": 8, "compute_s": 0.1, "read_threads": 8})
    sizes = np.full(100, 100 * KiB)
    demand = 8 * 100 * KiB / 0.1
    curve = predict.Curve([predict.ProbePoint(readers=c, bytes=0, seconds=1, samples=100, rate=c * demand / 8 * 1.2,
                                              spread=0, cpu_share=0) for c in (1, 8, 16)])
    assert predict.simulate(w, sizes, curve, 1, 200) > 0.9
    torch_rule = workloads.with_overrides(w, {"format": "npz"})
    assert predict.simulate(torch_rule, sizes, curve, 1, 200) > 0.9  # 8 batches in flight there instead


def test_one_accelerator_has_no_stragglers_and_prefetch_0_is_dlio_s_2():
    from gdsbench.reporting.train_report import point_line

    row = {"accelerators": 1, "passed": True, "au_percent": 99.0, "samples_per_s": 1.0, "mib_per_s": 1.0,
           "read_mib_per_s": 1.0, "step_time_p50_s": 0.1, "step_time_p99_s": 0.1, "wait_p50_s": 0.0, "wait_p99_s": 0.0,
           "straggler_mean_s": None, "straggler_p99_s": None, "straggler_share": None, "steps_per_epoch": 10}
    assert "stragglers: - (one accelerator" in point_line(row, None) and "mean 0 ns" not in point_line(row, None)
    w = workloads.with_overrides(workloads.BUILT_IN["unet3d"], {"prefetch": 0})
    assert w.batches_in_flight == 4 * 2  # torch_data_loader.py: prefetch_size 0 gives a prefetch factor of 2


# ---- DLIO's TFRecord folders, as DLIO generates them ----


def write_tfrecord(path, payloads: list[bytes], index_folder=None) -> list[tuple[int, int]]:
    """A TFRecord file (length, its CRC, payload, the payload's CRC: CRCs zero here, as nothing
    checks them), and DLIO's index of it if asked; the records' (offset, length)."""
    out, at = [], 0
    with open(path, "wb") as f:
        for p in payloads:
            record = len(p).to_bytes(8, "little") + b"\0" * 4 + p + b"\0" * 4
            f.write(record)
            out.append((at, len(record)))
            at += len(record)
    if index_folder is not None:
        os.makedirs(index_folder, exist_ok=True)
        with open(os.path.join(index_folder, os.path.basename(path) + ".idx"), "w") as f:
            f.writelines(f"{o} {n}\n" for o, n in out)
    return out


def dlio_tfrecord_folder(root, files=4, records=64, size=20_000, index=True):
    train = root / "train"
    train.mkdir(parents=True)
    rng = np.random.default_rng(1)
    for i in range(files):
        write_tfrecord(str(train / f"img_{i}_of_{files}.tfrecord"),
                       [rng.bytes(size + int(rng.integers(0, 500))) for _ in range(records)],
                       str(root / "index" / "train") if index else None)
    return root


@pytest.mark.parametrize("index", [True, False])
def test_a_dlio_tfrecord_folder_is_read_record_by_record(tmp_path, index):
    from gdsbench.train.dataset import open_dataset

    root = dlio_tfrecord_folder(tmp_path, index=index)
    d = open_dataset(str(root), "tfrecord")
    assert d.samples == 4 * 64 and len(d.paths) == 4 and not d.patterned
    assert d.length.min() > 20_000 and ("from DLIO's index files" in d.note) == index
    first = d.sample(0)
    assert first[1] == 0 and first[2] == int(d.length[0])


def test_a_folder_that_does_not_fit_the_workload_s_format_is_refused(tmp_path, gdsbench):
    root = dlio_tfrecord_folder(tmp_path / "tf")
    r = gdsbench("train", root, "--workload", "unet3d", "--compute-time", "5ms")
    assert r.code == 2 and "holds .tfrecord files, and the workload reads npz" in r.err
    plain = tmp_path / "npz"
    plain.mkdir()
    (plain / "a.npz").write_bytes(os.urandom(8192))
    r = gdsbench("train", plain, "--workload", "resnet50", "--compute-time", "5ms")
    assert r.code == 2 and "no .tfrecord files" in r.err


@pytest.mark.parametrize("cache", [["--buffered", "--allow-cached"], [], ["--uncached"]])
def test_train_reads_a_dlio_tfrecord_folder_as_tf_data_does(tmp_path, gdsbench, cache):
    """Buffered, O_DIRECT and uncached alike: records at unaligned offsets are read in whole blocks
    and only their bytes counted. Uncached reads keep no pages, so a dataset under 5x RAM needs no
    --allow-cached, and none of its pages is left cached."""
    root = dlio_tfrecord_folder(tmp_path / "tf", files=8, records=64)
    args = ["--workload", "resnet50", "--batch", "16", "--read-threads", "4", "--compute-time", "5ms",
            "--files", "8", "--samples-per-file", "64", "--record-bytes", "20000"]
    if "--uncached" in cache:
        needs_uncached(root)
        os.sync()  # just written: dirty pages cannot be dropped before the run, and uncached reads keep cached ones
    r = gdsbench("train", root, *args, "--accelerators", "2", *cache, "--results", tmp_path / "res", "--json")
    assert r.code == 0, r.err
    row = json.loads(r.out)[0]
    assert row["samples_read"] == 2 * row["steps_per_epoch"] * 16 and row["bytes_read"] > 0
    if "--uncached" in cache:  # every record read, none of its pages kept (readahead's last window aside)
        files = [str(p) for p in root.rglob("*.tfrecord")]
        assert sum(cached_fraction(f, 0, os.path.getsize(f)) for f in files) / len(files) <= 0.25
    p = gdsbench("predict", root, *args, "--probe-seconds", "0.2", "--json")
    assert p.code == 0, p.err


def test_an_unaligned_record_read_with_o_direct_counts_only_its_bytes(tmp_path):
    from gdsbench import JobSpec
    from gdsbench.execution.native import to_native

    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(64 * KiB))
    job = JobSpec(path=str(path), engine="psync", bs=16 * KiB, direct=True, runtime_ns=0)
    reader = _native.SampleReader(to_native(job), 0, None)
    assert reader.read(str(path), 1000, 5000)[0] == 5000  # blocks 0-1 read, 5000 bytes counted
    assert reader.read(str(path), 60 * KiB + 7, 10 * KiB)[0] == 4 * KiB - 7  # runs past the end: what is there


@pytest.mark.parametrize("engine", ["psync", "io_uring"])
def test_the_native_reader_counts_a_bad_block_once_however_often_it_is_read(tmp_path, engine):
    """Each epoch reads every sample again: a bad block must not count once per sighting."""
    from gdsbench import JobSpec
    from gdsbench.execution.native import to_native
    from gdsbench.system.prepare import prepare

    path = str(tmp_path / "p.dat")
    prepare(path, 256 * KiB)
    with open(path, "r+b") as f:  # one flipped byte in the block at 8 KiB
        f.seek(8 * KiB + 100)
        byte = f.read(1)
        f.seek(8 * KiB + 100)
        f.write(bytes([byte[0] ^ 0xFF]))
    job = JobSpec(path=path, engine=engine, bs=16 * KiB, qd=2 if engine == "io_uring" else 1, verify=True,
                  runtime_ns=0, io_size=16 * KiB)
    reader = _native.SampleReader(to_native(job), 0, None)
    for _ in range(3):
        assert reader.read(path, 0, 64 * KiB)[0] == 64 * KiB
    assert reader.verified_blocks == 3 * 16
    assert (reader.verify_mismatches, reader.first_mismatch_path, reader.first_mismatch_offset) == (1, path, 8 * KiB)


def test_the_probe_leaves_its_start_out_as_fio_leaves_out_its_ramp():
    """A throttle's first slice, or the first reads after a cache drop, can run far faster than the
    storage does after: what completes in the probe's first PROBE_RAMP does not count."""
    class BurstThenSteady:  # a stand-in reader (no storage): one big read at once, then 1000 bytes per 10 ms
        calls = 0

        def read(self, path, offset, length):
            BurstThenSteady.calls += 1
            if BurstThenSteady.calls > 1:
                time.sleep(0.01)
                return (1000,)
            return (10 << 20,)

    nbytes, seconds, reads, _ = predict._probe_once([BurstThenSteady()], [iter([("x", 0, 0)] * 10**6)], 0.5)
    assert 10 << 20 > nbytes > 0 and reads == nbytes // 1000
    assert nbytes / seconds < 1 << 20  # the burst alone would make it 20 MiB/s


def test_flags_given_beside_a_dlio_yaml_are_said_to_replace_its_values(gdsbench, dataset_dir, tmp_path):
    yaml = os.path.join(os.path.dirname(__file__), "data", "mlcommons-storage-v2.0", "unet3d_h100.yaml")
    r = gdsbench("train", dataset_dir, "--workload", yaml, "--epochs", "1", "--batch", "2", "--record-bytes", "64K",
                 "--compute-time", "5ms", "--read-threads", "2", "--steps", "3", "--results", tmp_path, "--json")
    assert r.code == 0, r.err
    said = next(line for line in r.err.splitlines() if "(DLIO workload YAML)" in line)
    assert "train.epochs -> --epochs 5 (the command line's --epochs instead)" in said
    assert "reader.batch_size -> batch 7 (the command line's --batch instead)" in said
    assert "metric.au -> au_threshold 0.9" in said and "au_threshold 0.9 (" not in said  # not given: as it is


def test_train_reads_a_dlio_jpeg_folder_a_file_a_sample_whole(tmp_path, gdsbench):
    """MLPerf Storage v3.0's retinanet: DLIO's folder of .jpeg files (img_I_of_N.jpeg), each one sample,
    opened, read whole and closed; the files beside them are not samples, and an npz workload is refused."""
    root = tmp_path / "retinanet" / "train"
    root.mkdir(parents=True)
    sizes = [30_000 + 4096 * i for i in range(24)]
    for i, n in enumerate(sizes):
        (root / f"img_{i}_of_{len(sizes)}.jpeg").write_bytes(os.urandom(n))
    (root / "notes.txt").write_bytes(b"not a sample")
    d = open_dataset(str(root))
    assert d.samples == 24 and sorted(d.length.tolist()) == sizes and "JPEG files" in d.note
    args = ["--workload", "retinanet", "--files", "24", "--record-bytes", "40000", "--batch", "4", "--read-threads",
            "2", "--compute-time", "5ms", "--epochs", "1"]
    r = gdsbench("train", root, *args, "--results", tmp_path / "res", "--json")
    assert r.code == 0, r.err
    row = json.loads(r.out)[0]
    assert row["samples_read"] == row["steps_per_epoch"] * 4 and row["bytes_read"] > 0
    r = gdsbench("train", root, "--workload", "unet3d", "--compute-time", "5ms")
    assert r.code == 2 and "holds .jpeg files, and the workload reads npz" in r.err


def test_prepare_makes_a_retinanet_dataset_that_train_reads(tmp_path, gdsbench):
    r = gdsbench("prepare", tmp_path / "ds", "--workload", "retinanet", "--files", "48")
    assert r.code == 0, r.err
    d = open_dataset(str(tmp_path / "ds"))
    assert d.samples == 48 and d.patterned and set(d.length.tolist()) == {323_584}  # in whole 4 KiB pattern blocks
    r = gdsbench("train", tmp_path / "ds", "--workload", "retinanet", "--files", "48", "--compute-time", "1ms",
                 "--epochs", "1", "--verify", "--results", tmp_path / "res", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)[0]["samples_read"] > 0
