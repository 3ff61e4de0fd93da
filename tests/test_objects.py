"""gdsbench objects s3://BUCKET/PREFIX/: warp's operations (PUT, HEAD, GET, LIST, DELETE) on a set of
objects gdsbench makes, natively, against SeaweedFS: every request counted, the set's manifest
kept, only gdsbench's objects ever removed, bad input one line."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import MPI_ENV, ROOT, mpirun_command, needs_mpi
from test_bad_input import assert_one_line_error

from gdsbench.system import object_store


@pytest.fixture
def s3(seaweed_s3):
    return seaweed_s3  # (conftest's SeaweedFS and its client)


def keys(s3, prefix: str) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket="bucket", Prefix=prefix).get("Contents", ()))


def objects(gdsbench, prefix: str, *args):
    res = gdsbench("objects", f"s3://bucket/{prefix}/", *args, "--json")
    assert res.code == 0, res.err
    return {r["op"]: r for r in json.loads(res.out)}


def test_each_operation_counts_every_request_and_delete_leaves_the_prefix_empty(gdsbench, s3, tmp_path):
    rows = objects(gdsbench, "all", "--objects", "40", "--size", "8K", "--threads", "2", "--qd", "4", "--lists", "6",
                   "--results", tmp_path)
    assert list(rows) == ["put", "head", "get", "list", "delete"]
    for op in ("put", "head", "get", "delete"):
        r = rows[op]
        assert r["ops"] == 40 and r["ops_per_s"] > 0 and r["lat_p50_us"] <= r["lat_p99_us"] <= r["lat_max_us"]
        assert r["connections"] >= 1 and r["retries"] == 0
    assert rows["put"]["bytes"] == rows["get"]["bytes"] == 40 * 8192 and rows["head"]["bytes"] == 0
    assert rows["list"]["ops"] == 6 and rows["list"]["listed"] == 6 * 41  # the objects and the manifest, each time
    assert keys(s3, "all/") == []  # the set, then its manifest, removed
    run = next(tmp_path.glob("*-objects"))
    assert (run / "report" / "report.html").exists()
    assert json.load(open(run / "run.json"))["kind"] == "objects"


def test_a_set_is_read_by_later_runs_and_a_strangers_object_is_never_touched(gdsbench, s3, tmp_path):
    objects(gdsbench, "set", "--ops", "put", "--objects", "12", "--size", "4K", "--results", tmp_path)
    head = objects(gdsbench, "set", "--ops", "head,get", "--results", tmp_path)
    assert head["get"]["ops"] == 12 and head["get"]["bytes"] == 12 * 4096  # the manifest's count and size
    s3.put_object(Bucket="bucket", Key="set/obj-0000003", Body=b"mine now")  # a user's, under the set's name
    assert_one_line_error(gdsbench("objects", "s3://bucket/set/", "--ops", "head,delete", "--results", tmp_path),
                          "holds s3://bucket/set/obj-0000003, which gdsbench did not make (or which was changed")
    assert len(keys(s3, "set/")) == 13  # nothing deleted
    s3.put_object(Bucket="bucket", Key="set/obj-0000003", Body=object_store.pattern_bytes(0, 4096, 1))  # as it was
    s3.put_object(Bucket="bucket", Key="set/theirs", Body=b"not ours")
    assert_one_line_error(gdsbench("objects", "s3://bucket/set/", "--results", tmp_path),
                          "holds s3://bucket/set/theirs, which gdsbench did not make", "left as it is")
    assert "set/theirs" in keys(s3, "set/") and len(keys(s3, "set/")) == 14
    s3.put_object(Bucket="bucket", Key="other/obj-0000000", Body=b"not ours")
    assert_one_line_error(gdsbench("objects", "s3://bucket/other/", "--results", tmp_path), "no manifest of gdsbench's")
    assert keys(s3, "other/") == ["other/obj-0000000"]


def test_duration_repeats_head_get_and_list_over_the_set_until_it_is_up(gdsbench, s3, tmp_path):
    """warp's --duration: head, get and list ask the set again from the first until the time is up
    (no new request after it); put and delete still go over the set once."""
    rows = objects(gdsbench, "timed", "--objects", "8", "--size", "4K", "--qd", "2", "--lists", "2", "--duration",
                   "1s", "--results", tmp_path)
    for op in ("put", "delete"):
        assert rows[op]["ops"] == 8 and rows[op]["duration_s"] == 0
    for op in ("head", "get", "list"):
        r = rows[op]
        assert r["duration_s"] == 1 and r["ops"] > (8 if op != "list" else 2), r  # the set more than once
        assert 1 <= r["seconds"] < 30  # the time asked, and the requests in flight then answered
    assert rows["get"]["bytes"] == rows["get"]["ops"] * 4096
    assert keys(s3, "timed/") == []


def test_batch_deletes_many_objects_a_request_as_s3s_deleteobjects(gdsbench, s3, tmp_path):
    rows = objects(gdsbench, "batched", "--objects", "20", "--size", "4K", "--qd", "2", "--ops", "put,delete",
                   "--batch", "7", "--results", tmp_path)
    assert rows["delete"]["ops"] == 3 and rows["delete"]["batch"] == 7  # 7 + 7 + 6 objects, a request each
    assert rows["delete"]["objects_per_s"] > rows["delete"]["ops_per_s"] > 0
    assert rows["put"]["batch"] == 1 and rows["put"]["objects_per_s"] == rows["put"]["ops_per_s"]
    assert keys(s3, "batched/") == []


def test_bad_input_is_one_line(gdsbench, s3, tmp_path, monkeypatch):
    assert_one_line_error(gdsbench("objects", "s3://bucket/none/", "--ops", "get", "--results", tmp_path),
                          "no complete set of gdsbench's objects", "--ops put,get")
    assert_one_line_error(gdsbench("objects", "s3://bucket/x/", "--ops", "frob"), "--ops", "choose from put")
    assert_one_line_error(gdsbench("objects", "s3://bucket/x/", "--size", "1000"), "--size", "4 KiB")
    assert_one_line_error(gdsbench("objects", "http://host/x/"), "give s3://BUCKET/PREFIX/")
    assert_one_line_error(gdsbench("objects", "s3://bucket/"), "give a prefix")
    assert_one_line_error(gdsbench("objects", "s3://bucket/x/", "--qd", "1024", "--size", "64M"), "4 GiB of buffers")
    assert_one_line_error(gdsbench("objects", "s3://bucket/x/", "--duration", "0s"), "--duration", "more than 0")
    assert_one_line_error(gdsbench("objects", "s3://bucket/x/", "--ops", "put,get", "--batch", "10"), "--batch 10",
                          "no delete")
    assert_one_line_error(gdsbench("objects", "s3://bucket/x/", "--batch", "1001"), "--batch", "between 1 and 1000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    assert_one_line_error(gdsbench("objects", "s3://bucket/x/", "--results", tmp_path), "HTTP 403",
                          "AWS_SECRET_ACCESS_KEY")
    assert not (tmp_path / "results").exists()


@needs_mpi
def test_mpi_ranks_share_the_set_and_rank_0_sums_them(seaweed, s3, tmp_path):
    proc = subprocess.run(mpirun_command(2, "objects", "s3://bucket/mpi/", "--objects", "10", "--size", "4K",
                                         "--ops", "put,get,delete", "--results", tmp_path, "--json"),
                          cwd=ROOT, env=dict(MPI_ENV, **seaweed), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    rows = {r["op"]: r for r in json.loads(proc.stdout)}
    assert all(r["ops"] == 10 and r["ranks"] == 2 for r in rows.values())
    assert keys(s3, "mpi/") == []
