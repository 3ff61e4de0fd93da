"""gdsbench checkpoint: DLIO's layout for MLPerf Storage v2.0's models (checked
against the numbers DLIO's own code gives), the write-then-read procedure as
MLPerf reports it, and crash safety: an incomplete checkpoint is named, never
read back, and replaced only where gdsbench wrote it."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import subprocess
import sys
import time

import pytest
from conftest import mpirun, needs_mpi, needs_uncached
from test_bad_input import assert_one_line_error

from gdsbench.checkpoint import dlio_yaml as checkpoint_yaml
from gdsbench.checkpoint import models
from gdsbench.checkpoint.manifest import planned_sizes
from gdsbench.checkpoint.on_disk import MANIFEST, read_manifest

SMALL = ("--model", "llama3-8b", "--dp", "2", "--layers", "1", "--vocab", "1024", "--scale", "0.01")


def total(model: models.Model) -> int:
    return sum(f.tensor_bytes for rank in models.layout(model) for f in rank)


def test_the_layout_is_dlios_for_each_model():
    """Against dlio_benchmark 295c1c7 (mlperf_storage_v2.0): its parameter count and per-file
    tensor bytes, worked out from its code, and a scaled llama3-8b it wrote on this machine."""
    m = models.load("llama3-8b")
    assert m.parameters == 8_030_261_248 and m.ranks == 8
    assert [(f.name, f.tensor_bytes) for f in models.rank_files(m, 3)] == [
        ("zero_pp_rank_3_mp_rank_0_model_states.pt", 2_007_565_312),
        ("zero_pp_rank_3_mp_rank_0_optim_states.pt", 12_045_637_632)]
    assert total(m) == 112_425_623_552  # DLIO's checkpoint_size_GB 104.7045 (GiB)
    scaled = models.load("llama3-8b", {"layers": 2, "vocab": 8192})  # DLIO wrote 125,838,838 and 755,253,717
    assert [f.tensor_bytes for f in models.rank_files(scaled, 0)] == [125_834_240, 755_251_200]  # bytes + torch's zip
    assert round(total(models.load("llama3-70b")) / 2**30, 2) == 911.21
    big = models.load("llama3-405b")
    assert [f.name for f in models.rank_files(big, 0)] == [f"layer_{i}-model_0_model_states.pt" for i in range(5)] + [
        "zero_pp_rank_0_mp_rank_0_optim_states.pt"]
    assert round(sum(f.tensor_bytes for f in models.rank_files(big, 0)) / 1e9, 2) == 13.23
    assert [(f.name, f.tensor_bytes) for f in models.rank_files(big, 256)] == [
        ("zero_pp_rank_1_mp_rank_0_optim_states.pt", 9_513_171_840)]  # dp 1 of ZeRO-1: optimizer only
    assert round(total(models.load("llama3-1t")) / 2**30, 1) == 15426.6  # DLIO's formula; MLPerf's table says 18 TB
    with pytest.raises(Exception, match="ZeRO-3 with pipeline parallelism"):
        models.load("llama3-8b", {"pp": 2})


def test_checkpoints_are_written_then_read_back_checked_and_reported_as_mlperf_does(gdsbench, tmp_path):
    res = gdsbench("checkpoint", tmp_path / "ck", *SMALL, "--checkpoints", "2", "--results", tmp_path / "res", "--json")
    assert res.code == 0, res.err
    rows = json.loads(res.out)
    assert [(r["phase"], r["checkpoint"]) for r in rows] == [("write", 1), ("write", 2), ("read", 1), ("read", 2)]
    sizes = [f.size for r in range(2) for f in models.rank_files(models.load("llama3-8b", {"dp": 2, "layers": 1,
                                                                                           "vocab": 1024}), r, 0.01)]
    for r in rows:
        assert r["ranks"] == 2 and r["bytes"] == sum(sizes) and r["duration_s"] == max(r["rank_seconds"])
        assert r["throughput_bytes_per_s"] == pytest.approx(r["bytes"] / r["duration_s"])
    assert all(r["fsync"] for r in rows[:2]) and rows[2]["verified_blocks"] == sum(sizes) // 4096
    assert all(r["verify_mismatches"] == 0 for r in rows)
    manifest = read_manifest(str(tmp_path / "ck" / "global_epoch1_step2"))
    assert manifest["complete"] is True and len(manifest["files"]) == 2
    (run,) = (tmp_path / "res").iterdir()
    assert (run / "report" / "report.html").exists() and json.loads((run / "run.json").read_text())["status"] == "complete"
    # every file its own bytes (pattern.file_seed): block 0 of two ranks' files, of two checkpoints, all differ
    firsts = {(tmp_path / "ck" / step / name).read_bytes()[:4096]
              for step in ("global_epoch1_step1", "global_epoch1_step2")
              for name in ("zero_pp_rank_0_mp_rank_0_model_states.pt", "zero_pp_rank_1_mp_rank_0_model_states.pt")}
    assert len(firsts) == 4
    again = gdsbench("report", run, "--out", tmp_path / "page")  # `gdsbench report` knows a checkpoint run's page
    assert again.code == 0 and (tmp_path / "page" / "report.html").exists(), again.err
    assert again.out.startswith("answer: write: ") and "read: " in again.out  # the means, as checkpoint said them


def test_every_rank_times_from_the_one_release_so_a_rank_started_late_counts_its_wait(gdsbench, tmp_path,
                                                                                      monkeypatch):
    """Rank 1 starts 1 s after the release (a test hook: a rank the scheduler ran late, made on
    purpose). Its time, and so the checkpoint's duration, holds that second in both phases: every
    local rank times from the parent's one release, not from its own start. Lower bounds only: a
    loaded machine makes every time longer, never shorter."""
    from gdsbench.checkpoint.session import LATE_RANK

    late_s = 1.0
    monkeypatch.setenv(LATE_RANK, f"1:{late_s}")
    res = gdsbench("checkpoint", tmp_path / "ck", *SMALL, "--checkpoints", "1", "--results", tmp_path / "res", "--json")
    assert res.code == 0, res.err
    rows = json.loads(res.out)
    assert [r["phase"] for r in rows] == ["write", "read"]
    for r in rows:
        assert r["rank_seconds"][1] >= late_s and r["duration_s"] >= late_s, r
        assert r["throughput_bytes_per_s"] <= r["bytes"] / late_s


def test_a_corrupted_checkpoint_fails_its_read_in_one_line(gdsbench, tmp_path):
    assert gdsbench("checkpoint", tmp_path / "ck", *SMALL, "--checkpoints", "1", "--results", tmp_path / "res").code == 0
    path = tmp_path / "ck" / "global_epoch1_step1" / "zero_pp_rank_1_mp_rank_0_optim_states.pt"
    with open(path, "r+b") as f:
        f.seek(8192 + 100)
        f.write(b"\xff")
    from gdsbench.checkpoint import session

    run = session.CheckpointRun(models.load("llama3-8b", {"dp": 2, "layers": 1, "vocab": 1024}), str(tmp_path / "ck"), 1,
                                _spec(tmp_path), 0.01)
    record = session.read_rank(run, 1, 1)  # rank 1 reads its own files: one node, the shift goes round
    assert record.verify_mismatches == 1 and "zero_pp_rank_1_mp_rank_0_optim_states.pt" in record.first_mismatch


def _spec(tmp_path):
    from gdsbench.execution.runner import runnable_here
    from gdsbench.job.spec import JobSpec

    spec = runnable_here(JobSpec(path=str(tmp_path / "probe.pt"), rw="write", bs=1 << 20))
    return spec.replace(direct=spec.uses_o_direct)


def test_gds_checkpoints_write_from_device_memory_on_the_cpu_stand_in(gdsbench, tmp_path):
    """--mode gds: every file written from (simulated) device memory, each write's blocks stamped
    there, then read back into it and checked. pwrite and pread stand in for cuFileWrite and
    cuFileRead on the SIMULATED device; on a GPU this is untested."""
    res = gdsbench("checkpoint", tmp_path / "ck", *SMALL, "--checkpoints", "1", "--mode", "gds", "--gpu-backend", "sim",
                   "--results", tmp_path / "res", "--json")
    assert res.code == 0, res.err
    write, read = json.loads(res.out)
    assert read["verified_blocks"] == write["bytes"] // 4096 and read["verify_mismatches"] == 0
    info = json.loads(next((tmp_path / "res").glob("*/run.json")).read_text())
    assert info["data_path"]["write"].startswith("psync writes from simulated device memory, standing in for cufile")
    # from VMM memory (PyTorch's expandable segments hold a model's tensors so), recorded and said
    res = gdsbench("checkpoint", tmp_path / "ck2", *SMALL, "--checkpoints", "1", "--mode", "gds", "--gpu-backend", "sim",
                   "--gpu-memory", "vmm", "--results", tmp_path / "res2", "--json")
    assert res.code == 0, res.err
    write, read = json.loads(res.out)
    assert read["verified_blocks"] == write["bytes"] // 4096 and read["verify_mismatches"] == 0
    info = json.loads(next((tmp_path / "res2").glob("*/run.json")).read_text())
    assert info["job"]["gpu_memory"] == "vmm" and info["data_path"]["write"].endswith("mapped by cuMemMap (VMM)")


def test_kvikio_checkpoint_ranks_write_and_read_through_kvikio_against_test_doubles(tmp_path, monkeypatch):
    """--mode kvikio: a rank's files written by CuFile.pwrite and read back by CuFile.pread, here
    TEST DOUBLES of kvikio and cupy (tests/test_gpu.py; numpy in host memory). The ranks' own
    processes and kvikio itself are untested on a GPU."""
    from test_gpu import _FakeCuFile, fake_kvikio_modules

    from gdsbench.checkpoint import session

    fake_kvikio_modules(monkeypatch)
    _FakeCuFile.opened = []
    model = models.load("llama3-8b", {"dp": 2, "layers": 1, "vocab": 1024})
    spec = _spec(tmp_path).replace(mode="kvikio", engine="kvikio", qd=4, direct=False)
    run = session.CheckpointRun(model, str(tmp_path / "ck"), 1, spec, 0.01)
    os.makedirs(run.folder(1))
    wrote = session.write_rank(run, 1, 0)
    assert wrote.files == 2 and _FakeCuFile.opened[:2] == ["r+", "r+"]
    read = session.read_rank(run, 1, 0)  # one node: a rank reads its own files back
    assert read.verify_mismatches == 0 and read.verified_blocks == sum(-(-f.size // 4096) for f in run.files(0))


def test_a_checkpoint_killed_while_written_is_named_never_read_and_replaced_only_if_gdsbench_s(gdsbench, tmp_path):
    ck = tmp_path / "ck"
    proc = subprocess.Popen([sys.executable, "-m", "gdsbench", "checkpoint", str(ck), *SMALL[:-2], "--scale", "0.5",
                             "--checkpoints", "3", "--results", str(tmp_path / "res")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (ck / "global_epoch1_step2" / MANIFEST).exists():  # checkpoint 1 done, 2 begun
        assert time.monotonic() < deadline and proc.poll() is None, "the run ended before checkpoint 2 began"
        time.sleep(0.02)
    proc.kill()
    proc.wait(30)
    left = read_manifest(str(ck / "global_epoch1_step2"))
    assert left is not None and left["complete"] is False  # never read back as complete
    res = gdsbench("checkpoint", ck, *SMALL, "--checkpoints", "2", "--results", tmp_path / "res")
    assert res.code == 0, res.err
    assert "global_epoch1_step2: an INCOMPLETE checkpoint" in res.err and "an earlier INCOMPLETE checkpoint" in res.err
    stranger = ck / "global_epoch1_step1" / "notes.txt"  # something that is not gdsbench's, in its folder
    stranger.write_text("mine")
    assert_one_line_error(gdsbench("checkpoint", ck, *SMALL, "--checkpoints", "1", "--results", tmp_path / "res"),
                          "not a checkpoint gdsbench wrote")
    assert stranger.read_text() == "mine"


def test_what_checkpoint_cannot_do_says_so(gdsbench, tmp_path):
    assert_one_line_error(gdsbench("checkpoint", tmp_path, "--model", "llama3-9b"), "--model llama3-9b: unknown")
    assert_one_line_error(gdsbench("checkpoint", tmp_path, "--model", "llama3-8b", "--mode", "kvikio"), "needs a GPU")
    assert_one_line_error(gdsbench("checkpoint", tmp_path, *SMALL[:-2], "--scale", "2"), "--scale")
    assert_one_line_error(gdsbench("checkpoint", "http://b/ck", "--model", "llama3-8b"), "local or mounted directory, or an "
                          "s3:// prefix")  # objects go to S3 only (test_checkpoint_s3)
    assert_one_line_error(gdsbench("checkpoint", tmp_path, "--model", "llama3-405b", "--checkpoints", "1"),
                          "free in")  # 5 TiB does not fit
    a_file = tmp_path / "a.dat"
    a_file.write_bytes(b"mine")
    results = tmp_path / "results"
    for where, said in ((a_file, "is not a directory"), ("/proc/ck", "cannot create it")):
        assert_one_line_error(gdsbench("checkpoint", where, *SMALL, "--results", results), f"DIR {where}: {said}")
    assert a_file.read_bytes() == b"mine" and not results.exists()  # refused before a run folder is made


def test_files_are_read_back_in_transfers_of_their_own_where_asked(gdsbench, tmp_path):
    """--read-bs and --read-qd: written in 64 KiB transfers one at a time, read back in 1 MiB ones,
    4 in flight (v3.0's StreamingCheckpointing reads larger than it writes); every block checked."""
    flags = (*SMALL, "--checkpoints", "1", "--bs", "64K", "--read-bs", "1M", "--read-qd", "4")
    plan = json.loads(gdsbench("checkpoint", tmp_path / "ck", *flags, "--dry-run", "--json").out)
    assert (plan["job"]["bs"], plan["job"]["qd"], plan["job"]["read_bs"], plan["job"]["read_qd"]) == (64 << 10, 1, 1 << 20, 4)
    res = gdsbench("checkpoint", tmp_path / "ck", *flags, "--results", tmp_path / "res")
    assert res.code == 0, res.err
    assert "64 KiB transfers, each file fsync'd, read back in 1 MiB transfers, 4 in flight" in res.out
    (run,) = (tmp_path / "res").iterdir()
    rows = [json.loads(line) for line in (run / "points.jsonl").read_text().splitlines()]
    read = next(r for r in rows if r["phase"] == "read")
    assert read["verify_mismatches"] == 0 and read["verified_blocks"] == read["bytes"] // 4096
    for flags in (("--read-bs", "3K"), ("--read-qd", "0"), ("--no-verify", "--read-bs", "1000")):  # 1000: not O_DIRECT's
        res = gdsbench("checkpoint", tmp_path / "ck2", *SMALL, *flags)
        assert_one_line_error(res, flags[-2])
        assert "--verify" not in res.err and "--offset" not in res.err  # checkpoint has neither
    assert not list((tmp_path / "ck2").glob("global_epoch*"))  # refused before any checkpoint is written


def test_uncached_checkpoints_write_and_read_through_the_page_cache_keeping_nothing(gdsbench, tmp_path):
    """--uncached (fio's uncached=1, RWF_DONTCACHE): each file written and read back buffered, its
    pages dropped once written or copied, as v3.0's StreamingCheckpointing drops each write's."""
    needs_uncached(tmp_path)
    res = gdsbench("checkpoint", tmp_path / "ck", *SMALL, "--checkpoints", "1", "--uncached", "--results",
                   tmp_path / "res")
    assert res.code == 0, res.err
    assert "uncached page-cache writes" in res.out and "uncached page-cache reads" in res.out
    (run,) = (tmp_path / "res").iterdir()
    job = json.loads((run / "run.json").read_text())["job"]
    assert job["uncached"] and not job["direct"]
    rows = [json.loads(line) for line in (run / "points.jsonl").read_text().splitlines()]
    assert next(r for r in rows if r["phase"] == "read")["verify_mismatches"] == 0


def test_buffers_beyond_the_memory_available_are_refused_naming_the_flags(tmp_path, monkeypatch):
    """Each rank on the host moves one file at a time, --qd transfers of --bs in flight (fewer where
    the largest file holds fewer): more than MemAvailable is one line naming the phase's flags."""
    from gdsbench.checkpoint import session
    from gdsbench.job.errors import UsageError

    spec = _spec(tmp_path).replace(bs=1 << 20, qd=4)
    model = models.load("llama3-8b", {"dp": 2, "layers": 1, "vocab": 1024})
    run = session.CheckpointRun(model, str(tmp_path), 1, spec, 0.1, read_spec=spec.replace(bs=4 << 20, qd=8))
    largest = max(f.size for r in range(run.ranks) for f in run.files(r))
    assert largest >= 32 << 20
    monkeypatch.setattr(session, "meminfo", lambda key: 64 << 20)
    session.check_memory(run, 2)  # the reads' 2 ranks x 8 x 4 MiB fit exactly
    monkeypatch.setattr(session, "meminfo", lambda key: (64 << 20) - 1)
    with pytest.raises(UsageError, match=r"^--read-qd 8 x --read-bs 4 MiB x 2 ranks on this host: 64 MiB of buffers"):
        session.check_memory(run, 2)
    alone = dataclasses.replace(run, read_spec=None, spec=spec.replace(bs=largest * 4, qd=16))
    monkeypatch.setattr(session, "meminfo", lambda key: largest * 4)  # one transfer: the largest file holds no more
    session.check_memory(alone, 1)
    with pytest.raises(UsageError, match=r"^--qd 16 x --bs .* x 2 ranks on this host: .* lower --bs or --qd$"):
        session.check_memory(alone, 2)


def test_the_read_job_moves_the_reads_and_only_the_reads(tmp_path, monkeypatch):
    """A rank's writes go in the write job's transfers, its reads in the read job's: each native
    job's block size and depth, as move_whole hands them to run_part."""
    from gdsbench.checkpoint import moves, session

    jobs = []
    real = moves.run_part
    monkeypatch.setattr(moves, "run_part", lambda job: jobs.append((job.rw, job.bs, job.qd)) or real(job))
    spec = _spec(tmp_path).replace(bs=64 << 10, qd=1)
    model = models.load("llama3-8b", {"dp": 2, "layers": 1, "vocab": 1024})
    run = session.CheckpointRun(model, str(tmp_path / "ck"), 1, spec, 0.01, read_spec=spec.replace(bs=1 << 20, qd=4))
    os.makedirs(run.folder(1))
    session.write_rank(run, 1, 0)
    writes, jobs[:] = list(jobs), []
    assert session.read_rank(run, 1, 0).verify_mismatches == 0
    assert {(rw, bs, qd) for rw, bs, qd in writes if bs == 64 << 10} == {("write", 64 << 10, 1)}
    bodies = [(rw, bs, qd) for rw, bs, qd in jobs if bs == 1 << 20]  # each file's body (a shorter tail after)
    assert len(bodies) == 2 and all(rw == "read" and 1 <= qd <= 4 for rw, _, qd in bodies)
    assert all(rw == "read" and bs <= 1 << 20 for rw, bs, _ in jobs)


def test_a_dry_run_says_the_layout_as_json_with_json(gdsbench, tmp_path):
    r = gdsbench("checkpoint", tmp_path / "ck", *SMALL, "--dry-run", "--json")
    d = json.loads(r.out)
    assert r.code == 0 and d["ranks"] == len(d["files"]) and not (tmp_path / "ck").exists()
    assert d["checkpoint_bytes"] == sum(f["bytes"] for rank in d["files"] for f in rank)


@needs_mpi
def test_mpi_ranks_are_the_checkpoint_ranks(tmp_path):
    proc = mpirun(2, "checkpoint", tmp_path / "ck", *SMALL, "--checkpoints", "1", "--results", tmp_path / "res", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [(r["phase"], r["ranks"], r["verify_mismatches"]) for r in rows] == [("write", 2, 0), ("read", 2, 0)]
    bad = mpirun(3, "checkpoint", tmp_path / "ck", *SMALL, "--checkpoints", "1", "--results", tmp_path / "res")
    assert bad.returncode != 0 and "more than the model's 2" in bad.stderr


def test_a_rank_that_fails_mid_write_ends_the_run_naming_it_and_leaves_the_checkpoint_incomplete(gdsbench, tmp_path):
    """Each rank's fourth copy from the (SIMULATED) GPU fails: the run ends in one line naming a
    process, and the checkpoint it was writing is marked incomplete, never complete. Written through
    the page cache (cached-bounce), its files grow as they are written."""
    res = gdsbench("checkpoint", tmp_path / "ck", *SMALL, "--checkpoints", "1", "--mode", "cached-bounce",
                   "--gpu-backend", "sim:fail-copy=4", "--results", tmp_path / "res")
    assert res.code != 0 and "process" in res.err and "Traceback" not in res.err, res.err
    folder = tmp_path / "ck" / "global_epoch1_step1"
    left = read_manifest(str(folder))
    assert left["complete"] is False
    # buffered, files grow as they are written, as torch.save's do (none sized first): the ones cut short are shorter
    sizes = {name: (folder / name).stat().st_size for name in planned_sizes(left) if (folder / name).exists()}
    assert any(0 < size < planned_sizes(left)[name] for name, size in sizes.items()), sizes
    grown = next(name for name, size in sizes.items() if size)
    with open(folder / grown, "ab") as f:  # longer than gdsbench writes it: not the file gdsbench made
        f.write(bytes(4096 * 2048))
    assert_one_line_error(gdsbench("checkpoint", tmp_path / "ck", *SMALL, "--checkpoints", "1", "--results",
                                   tmp_path / "res"), "and gdsbench writes it")
    os.truncate(folder / grown, sizes[grown])
    again = gdsbench("checkpoint", tmp_path / "ck", *SMALL, "--checkpoints", "1", "--results", tmp_path / "res")
    assert again.code == 0 and "an earlier INCOMPLETE checkpoint" in again.err, again.err  # its part-written files too


def test_subset_mode_writes_and_reads_the_first_ranks_share(gdsbench, tmp_path):
    """MLPerf's subset mode: 2 of llama3-8b's 8 ranks, as one host of the full job writes its share."""
    res = gdsbench("checkpoint", tmp_path / "ck", "--model", "llama3-8b", "--layers", "1", "--vocab", "1024", "--scale",
                   "0.005", "--ranks", "2", "--checkpoints", "1", "--results", tmp_path / "res", "--json")
    assert res.code == 0, res.err
    rows = json.loads(res.out)
    full = models.load("llama3-8b", {"layers": 1, "vocab": 1024})
    assert all(r["ranks"] == 2 and r["bytes"] == sum(f.size for i in (0, 1) for f in models.rank_files(full, i, 0.005))
               for r in rows)
    assert sorted(os.listdir(tmp_path / "ck" / "global_epoch1_step1")) == [
        MANIFEST, "zero_pp_rank_0_mp_rank_0_model_states.pt", "zero_pp_rank_0_mp_rank_0_optim_states.pt",
        "zero_pp_rank_1_mp_rank_0_model_states.pt", "zero_pp_rank_1_mp_rank_0_optim_states.pt"]
    assert_one_line_error(gdsbench("checkpoint", tmp_path / "ck", "--model", "llama3-8b", "--ranks", "9"),
                          "more than the model's 8")


V2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mlcommons-storage-v2.0")
TINY = """model:
  name: tiny
  type: transformer
  num_layers: 1
  model_datatype: fp16
  optimizer_datatype: fp32
  parallelism: {{tensor: 1, pipeline: 1, zero_stage: 3{data}}}
  transformer: {{vocab_size: 1024, hidden_size: 256, ffn_hidden_size: 512, num_attention_heads: 4, num_kv_heads: 2}}
framework: pytorch
workflow: {{generate_data: False, train: False, checkpoint: True}}
checkpoint: {{checkpoint_folder: checkpoints/tiny, num_checkpoints_write: 2, num_checkpoints_read: 2, fsync: True{more}}}
"""


def test_mlperf_s_checkpoint_yamls_are_its_models():
    """mlcommons/storage's llama3 files, v2.0's and the v3.0-era versions held (some with
    parallelism.data, noted), give the built-in models, their data-parallel count MLPerf's, with the
    files' checkpoint count and fsync."""
    for folder, size in itertools.product((V2, V2.replace("v2.0", "v3.0")), ("8b", "70b", "405b", "1t")):
        t = checkpoint_yaml.translate(os.path.join(folder, f"llama3_{size}.yaml"))
        assert t.twin == models.BUILT_IN[f"llama3-{size}"] and t.model.dp == 0  # the ranks started say it, or MLPerf
        assert dataclasses.replace(t.model, name=t.twin.name, dp=t.twin.dp) == t.twin
        assert (t.checkpoints, t.fsync, t.subset) == (10, True, False)
        assert any("checkpoint_folder: not emulated" in n for n in t.notes)


def test_a_checkpoint_yaml_runs_as_its_model_in_subset_mode(gdsbench, tmp_path):
    """checkpoint.mode subset with parallelism.data: the full job's DP, of which --ranks run."""
    yaml = tmp_path / "tiny.yaml"
    yaml.write_text(TINY.format(data=", data: 4", more=", mode: subset"))
    res = gdsbench("checkpoint", tmp_path / "ck", "--model", yaml, "--ranks", "2", "--results", tmp_path / "res",
                   "--json")
    assert res.code == 0, res.err
    rows = json.loads(res.out)
    assert [(r["phase"], r["checkpoint"]) for r in rows] == [("write", 1), ("write", 2), ("read", 1), ("read", 2)]
    assert all(len(r["rank_seconds"]) == 2 for r in rows)
    assert "(DLIO checkpoint workload YAML)" in res.err and "checkpoint.mode -> subset" in res.err
    assert sorted(os.listdir(tmp_path / "ck" / "global_epoch1_step1")) == [
        MANIFEST, *(f"zero_pp_rank_{r}_mp_rank_0_{s}_states.pt" for r in range(2) for s in ("model", "optim"))]


@pytest.mark.parametrize("data, more, flags, words", [
    ("", ", mode: subset", ("--ranks", "1"), "needs model.parallelism.data"),
    (", data: 2", ", mode: subset", (), "give --ranks N"),
    ("", "", (), "give --dp N"),
    ("", "", ("--ranks", "3", "--dp", "1"), "--ranks 3: more than the model's 1"),
    ("", ", num_checkpoints_read: 1", ("--dp", "2"), "is given twice"),
    ("", ", steps_between_checkpoints: 5", ("--dp", "2"), "checkpoint.steps_between_checkpoints: a checkpoint setting"),
    ("", ", type: rank_zero", ("--dp", "2"), "checkpoint.type 'rank_zero'"),
])
def test_a_checkpoint_yaml_gdsbench_cannot_run_as_written_is_one_line(gdsbench, tmp_path, data, more, flags, words):
    yaml = tmp_path / "tiny.yaml"
    yaml.write_text(TINY.format(data=data, more=more))
    assert_one_line_error(gdsbench("checkpoint", tmp_path / "ck", "--model", yaml, *flags, "--dry-run"), words)


def test_unequal_reads_and_writes_and_another_framework_are_refused(gdsbench, tmp_path):
    yaml = tmp_path / "tiny.yaml"
    yaml.write_text(TINY.format(data="", more="").replace("num_checkpoints_read: 2", "num_checkpoints_read: 1"))
    assert_one_line_error(gdsbench("checkpoint", tmp_path / "ck", "--model", yaml, "--dp", "2", "--dry-run"),
                          "reads back every checkpoint it writes")
    yaml.write_text(TINY.format(data="", more="").replace("framework: pytorch", "framework: tensorflow"))
    assert_one_line_error(gdsbench("checkpoint", tmp_path / "ck", "--model", yaml, "--dp", "2", "--dry-run"),
                          "framework 'tensorflow'")


def test_a_checkpoint_yaml_s_data_parallel_count_is_dlio_s_rule(gdsbench, tmp_path):
    """parallelism.data in subset mode; else the ranks started over TP x PP; else, alone, MLPerf's count for
    a model of the same dimensions. Outside subset mode parallelism.data (some of mlcommons/storage's files
    have it, 1 for llama3-8b, whose full run is 8 ranks) is noted and not used."""
    yaml = tmp_path / "tiny.yaml"
    yaml.write_text(TINY.format(data=", data: 2", more=""))
    res = gdsbench("checkpoint", tmp_path / "ck", "--model", yaml, "--ranks", "3", "--dry-run", "--json")
    assert res.code == 0 and json.loads(res.out)["ranks"] == 3 and "data 2: not used outside" in res.err, res.err
    yaml.write_text(TINY.format(data="", more=""))
    res = gdsbench("checkpoint", tmp_path / "ck", "--model", yaml, "--ranks", "3", "--dry-run", "--json")
    assert res.code == 0 and json.loads(res.out)["ranks"] == 3 and not json.loads(res.out)["subset"], res.err
    assert "3 ranks started over TP x PP -> --dp 3" in res.err
    res = gdsbench("checkpoint", tmp_path / "ck", "--model", os.path.join(V2, "llama3_70b.yaml"), "--dry-run", "--json")
    assert res.code == 0 and json.loads(res.out)["ranks"] == 64 and "MLPerf's 64 ranks -> --dp 8" in res.err


def test_a_file_of_zeros_under_a_checkpoint_s_name_is_not_taken_for_gdsbench_s(gdsbench, tmp_path):
    """An incomplete checkpoint's file that starts with zeros written by another program (DLIO 3.0's own
    backend writes zeros under the same names) is refused and kept; a hole at its start is gdsbench's."""
    res = gdsbench("checkpoint", tmp_path / "ck", *SMALL, "--checkpoints", "1", "--mode", "bounce", "--gpu-backend",
                   "sim:fail-copy=4", "--results", tmp_path / "res")
    assert res.code != 0
    folder = tmp_path / "ck" / "global_epoch1_step1"
    victim = next(p for p in sorted(folder.glob("*.pt")) if p.stat().st_size)
    size = victim.stat().st_size
    victim.write_bytes(bytes(size))  # zeros, written: data, not a hole
    assert_one_line_error(gdsbench("checkpoint", tmp_path / "ck", *SMALL, "--checkpoints", "1", "--results",
                                   tmp_path / "res"), "does not start with gdsbench's pattern")
    assert victim.read_bytes() == bytes(size)
    os.truncate(victim, 0)
    os.truncate(victim, size)  # a hole to its end: as a rank that never wrote leaves a sized file
    again = gdsbench("checkpoint", tmp_path / "ck", *SMALL, "--checkpoints", "1", "--results", tmp_path / "res")
    assert again.code == 0, again.err
