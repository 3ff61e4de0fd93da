"""gdsbench checkpoint s3://BUCKET/PREFIX/: every rank's file an object created whole by the native
curl engine (only where none is there), read back checked; the folders' manifests and the
prefix's lock as objects; only gdsbench's objects replaced, a killed run's uploads aborted and its
lock taken over. Against SeaweedFS, which keeps S3's conditions (rclone's server ignores them)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import MPI_ENV, ROOT, mpirun_command, needs_mpi
from test_bad_input import assert_one_line_error

from gdsbench import _native
from gdsbench.checkpoint import models

SMALL = ("--model", "llama3-8b", "--dp", "2", "--layers", "1", "--vocab", "1024", "--scale", "0.01")


@pytest.fixture
def s3(seaweed_s3):
    return seaweed_s3  # (conftest's SeaweedFS and its client)


def keys(s3, prefix: str) -> dict[str, int]:
    return {o["Key"]: o["Size"] for o in s3.list_objects_v2(Bucket="bucket", Prefix=prefix).get("Contents", ())}


def uploads(s3, prefix: str) -> list:
    return s3.list_multipart_uploads(Bucket="bucket", Prefix=prefix).get("Uploads") or []


def test_checkpoints_go_to_objects_read_back_checked_and_replace_only_their_own(gdsbench, s3, tmp_path):
    res = gdsbench("checkpoint", "s3://bucket/ck/", *SMALL, "--checkpoints", "2", "--qd", "2", "--results",
                   tmp_path / "res", "--json")
    assert res.code == 0, res.err
    rows = json.loads(res.out)
    model = models.load("llama3-8b", {"dp": 2, "layers": 1, "vocab": 1024})
    files = {f.name: f.size for r in range(2) for f in models.rank_files(model, r, 0.01)}
    assert [(r["phase"], r["checkpoint"]) for r in rows] == [("write", 1), ("write", 2), ("read", 1), ("read", 2)]
    for r in rows:
        assert r["bytes"] == sum(files.values()) and r["files"] == 4 and r["file_max_s"] <= r["duration_s"]
    assert all(r["verified_blocks"] == sum(files.values()) // 4096 and r["verify_mismatches"] == 0
               for r in rows if r["phase"] == "read")
    held = keys(s3, "ck/")
    assert held == {**{f"ck/global_epoch1_step{k}/{n}": s for k in (1, 2) for n, s in files.items()},
                    **{f"ck/global_epoch1_step{k}/gdsbench-checkpoint.json": held[f"ck/global_epoch1_step{k}/"
                                                                                   "gdsbench-checkpoint.json"]
                       for k in (1, 2)}}  # every object, the manifests, and no lock left behind
    names = [f"ck/global_epoch1_step1/{n}" for n in files]
    seeds = {json.loads(s3.head_object(Bucket="bucket", Key=k)["Metadata"]["gdsbench-prepared"])["seed"] for k in names}
    assert len(seeds) == len(names) and 1 not in seeds  # marked as gdsbench's, each with its own payload seed
    first = [s3.get_object(Bucket="bucket", Key=k, Range="bytes=0-4095")["Body"].read() for k in names]
    assert len({block[24:4088] for block in first}) == len(names)  # block 0 of each its own bytes (stamps aside)
    manifest = json.loads(s3.get_object(Bucket="bucket", Key="ck/global_epoch1_step2/gdsbench-checkpoint.json")
                          ["Body"].read())
    assert manifest["complete"] is True and set(manifest["written"]) == set(files)
    run = json.load(open(next((tmp_path / "res").glob("*/run.json"))))
    assert run["data_path"]["write"].startswith("S3, curl engine PUTs")

    again = gdsbench("checkpoint", "s3://bucket/ck", *SMALL, "--checkpoints", "1", "--results", tmp_path / "res")
    assert again.code == 0, again.err
    assert "removed s3://bucket/ck/global_epoch1_step1/, an earlier complete checkpoint" in again.err

    s3.put_object(Bucket="bucket", Key="ck/global_epoch1_step1/theirs.bin", Body=b"not ours")
    refused = gdsbench("checkpoint", "s3://bucket/ck/", *SMALL, "--checkpoints", "1", "--results", tmp_path / "res")
    assert_one_line_error(refused, "holds theirs.bin, which gdsbench did not make", "left as it is")
    assert s3.get_object(Bucket="bucket", Key="ck/global_epoch1_step1/theirs.bin")["Body"].read() == b"not ours"
    assert f"ck/global_epoch1_step1/{next(iter(files))}" in keys(s3, "ck/")  # nothing of the folder removed


def test_a_checkpoint_changed_by_hand_is_refused(gdsbench, s3, tmp_path):
    assert gdsbench("checkpoint", "s3://bucket/hand/", *SMALL, "--checkpoints", "1", "--results", tmp_path).code == 0
    name = models.rank_files(models.load("llama3-8b", {"dp": 2, "layers": 1, "vocab": 1024}), 0, 0.01)[0].name
    s3.put_object(Bucket="bucket", Key=f"hand/global_epoch1_step1/{name}", Body=b"replaced")
    refused = gdsbench("checkpoint", "s3://bucket/hand/", *SMALL, "--checkpoints", "1", "--results", tmp_path)
    assert_one_line_error(refused, f"hand/global_epoch1_step1/{name}: changed since gdsbench wrote it")


def test_s3s_part_rules_o_direct_and_a_busy_prefix_are_one_line(gdsbench, s3, tmp_path):
    assert_one_line_error(gdsbench("checkpoint", "s3://bucket/rules/", *SMALL, "--bs", "1M"),
                          "--bs 1 MiB", "5 MiB", "leave --bs out")
    assert_one_line_error(gdsbench("checkpoint", "s3://bucket/rules/", *SMALL, "--direct"), "--direct", "leave --direct out")
    lock = {"gdsbench_checkpoint_lock": 1, "host": "elsewhere", "pid": 1, "started": "1", "run": None}
    s3.put_object(Bucket="bucket", Key="rules/.gdsbench-checkpoint-lock", Body=json.dumps(lock).encode())
    assert_one_line_error(gdsbench("checkpoint", "s3://bucket/rules/", *SMALL, "--results", tmp_path),
                          "another gdsbench checkpoint (pid 1 on elsewhere", "remove s3://bucket/rules/.gdsbench-checkpoint-lock")
    assert keys(s3, "rules/") == {"rules/.gdsbench-checkpoint-lock": len(json.dumps(lock))}  # nothing written


def test_a_killed_runs_uploads_are_aborted_and_its_lock_taken_over_by_the_next(gdsbench, s3, tmp_path):
    env = dict(os.environ)
    run = subprocess.Popen([sys.executable, "-m", "gdsbench", "checkpoint", "s3://bucket/killed/", *SMALL,
                            "--checkpoints", "1", "--results", str(tmp_path)], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not uploads(s3, "killed/") and time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()
        time.sleep(0.01)
    os.killpg(run.pid, signal.SIGKILL)  # the command and its ranks, mid-upload
    run.wait()
    assert uploads(s3, "killed/") and "killed/.gdsbench-checkpoint-lock" in keys(s3, "killed/")
    theirs = s3.create_multipart_upload(Bucket="bucket", Key="killed/global_epoch1_step1/theirs.bin")["UploadId"]

    res = gdsbench("checkpoint", "s3://bucket/killed/", *SMALL, "--checkpoints", "1", "--results", tmp_path)
    assert res.code == 0, res.err
    assert "took over the lock of an earlier run" in res.err
    assert "an INCOMPLETE checkpoint" in res.err and "aborted" in res.err
    assert [u["UploadId"] for u in uploads(s3, "killed/")] == [theirs]  # another's upload in the folder: kept
    assert "killed/.gdsbench-checkpoint-lock" not in keys(s3, "killed/")


def test_an_object_is_created_only_where_none_is_there(s3):
    """The native writer's If-None-Match: an object at the key (another writer's, put after the
    run's look) is left as it is, and the write fails in one line."""
    s3.put_object(Bucket="bucket", Key="taken/obj", Body=b"theirs")
    job = _native.Job()
    job.engine, job.bs, job.qd, job.seed = "curl", 8 << 20, 2, 1
    job.direction = "write"
    writer = _native.SampleReader(job)
    with pytest.raises(Exception, match="put one where this run creates one"):
        writer.create("s3://bucket/taken/obj", 16 << 20, json.dumps({"size": 16 << 20, "seed": 1}))
    assert s3.get_object(Bucket="bucket", Key="taken/obj")["Body"].read() == b"theirs"
    assert not uploads(s3, "taken/")  # the upload in parts aborted, not left
    made = writer.create("s3://bucket/taken/new", 4 << 20, json.dumps({"size": 4 << 20, "seed": 1}))
    assert made[0] == 4 << 20 and keys(s3, "taken/")["taken/new"] == 4 << 20


@needs_mpi
def test_mpi_ranks_write_and_read_their_own_objects(seaweed, s3, tmp_path):
    proc = subprocess.run(mpirun_command(2, "checkpoint", "s3://bucket/mpi/", *SMALL, "--checkpoints", "1", "--results",
                                         tmp_path, "--json"), cwd=ROOT, env=dict(MPI_ENV, **seaweed), capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["phase"] for r in rows] == ["write", "read"] and all(r["ranks"] == 2 for r in rows)
    assert rows[1]["verify_mismatches"] == 0 and rows[1]["verified_blocks"] == rows[1]["bytes"] // 4096
    assert len(keys(s3, "mpi/")) == 5  # 4 objects and the manifest; the lock gone


def test_bounce_writes_objects_from_the_cpu_stand_in_and_gds_is_refused(gdsbench, s3, tmp_path):
    res = gdsbench("checkpoint", "s3://bucket/bounce/", *SMALL, "--checkpoints", "1", "--mode", "bounce",
                   "--gpu-backend", "sim", "--results", tmp_path, "--json")
    assert res.code == 0, res.err
    assert all(r["verify_mismatches"] == 0 for r in json.loads(res.out))
    run = json.load(open(next(tmp_path.glob("*/run.json"))))
    assert "S3, curl engine PUTs" in run["data_path"]["write"] and "SIMULATED" in run["data_path"]["write"]
    assert_one_line_error(gdsbench("checkpoint", "s3://bucket/gds/", *SMALL, "--mode", "gds", "--gpu-backend", "sim"),
                          "--mode gds", "cufile")
