"""Remote objects against hostile servers (issue 35): a server that never answers, one that
answers another range than asked, a redirect, a plain HTTP 403, an unmet --http2; S3 through
boto3 with the same --timeout/--retries and the same credentials as the native curl engine;
an upload a killed `prepare s3://` left behind. Real servers (nginx, rclone's S3,
tests/fault_server.py), and a socket that accepts and never answers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import wait_until
from test_bad_input import assert_one_line_error
from test_remote import KEY, SECRET, boto3_client, faulty, nginx, run_json, s3, s3_env, served

SERVERS = (served, nginx, faulty, s3, s3_env)  # test_remote's fixtures, found here by their names

# A hang guard, not a measure: each command here must end in seconds; a loaded machine gets room
BOUND_S = 60


@pytest.fixture
def silent():
    """A server that never answers: the kernel accepts its connections (the listen backlog), and
    nothing reads or writes them. Its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def timed(gdsbench, *args):
    started = time.monotonic()
    res = gdsbench(*args)
    return res, time.monotonic() - started


# ---- High 1: --timeout and --retries hold for the first look at a URL, and its pattern block ----

def test_timeout_holds_for_the_first_look_at_a_url_and_names_the_value_given(gdsbench, faulty, tmp_path):
    url = f"{faulty}/slow-600000/bucket/data.dat"  # the HEAD waits 10 minutes
    res, took = timed(gdsbench, "run", url, "--io-size", "1M", "--timeout", "2s", "--retries", "1")
    assert took < BOUND_S, took  # before: 4 tries of 30 s, whatever --timeout said
    assert_one_line_error(res, "--timeout 2 s", "2 tries")
    res, took = timed(gdsbench, "sweep", url, "--bs", "64K,1M", "--io-size", "1M", "--timeout", "2s", "--results",
                      tmp_path)
    assert took < BOUND_S and "--timeout 2 s" in res.err, (took, res.err)


def test_the_pattern_block_read_before_verify_honours_timeout(gdsbench, faulty):
    """The HEAD is answered at once; the first GET of each range waits 10 minutes. The 4 KiB read
    that checks for the pattern asks as the run does: it fails at --timeout, naming that read."""
    url = f"{faulty}/busy-600000-0/bucket/data.dat"
    res, took = timed(gdsbench, "run", url, "--bs", "64K", "--io-size", "64K", "--verify", "--timeout", "2s")
    assert took < BOUND_S, took
    assert_one_line_error(res, "--timeout 2 s", "4096 bytes at offset 0", code=3)


def test_validate_and_info_honour_timeout_for_the_first_look(gdsbench, faulty):
    url = f"{faulty}/slow-600000/bucket/data.dat"  # the HEAD waits 10 minutes
    for args in (("validate", url, "--quick"), ("info", "--path", url)):
        res, took = timed(gdsbench, *args, "--timeout", "2s", "--retries", "1")
        assert took < BOUND_S, (args, took)  # before: validate and info had no --timeout (30 s a try)
        assert_one_line_error(res, "--timeout 2 s", "2 tries")


def test_every_read_of_validate_honours_timeout_and_each_is_a_fail_not_the_end(gdsbench, faulty):
    """The HEAD is answered at once, every first GET of a range waits 10 minutes: the pattern look,
    the path read and each reference point fail at --timeout, each its own FAIL in the table. (The
    server remembers the ranges it refused by path: this path is asked by no other test.)"""
    url = f"{faulty}/busy-600000-1/bucket/data.dat"
    res, took = timed(gdsbench, "validate", url, "--quick", "--timeout", "2s")
    assert took < 3 * BOUND_S, took
    assert res.code == 1 and "Traceback" not in res.err, res.err
    failed = [line for line in res.out.splitlines() if line.startswith("FAIL")]
    assert {line.split()[1] for line in failed} >= {"path.cpu", "integrity.cpu", "performance.storage_seq"}, res.out
    assert res.out.count("--timeout 2 s") >= len(failed), res.out


def test_validate_and_info_refuse_timeout_for_a_local_path(gdsbench, tmp_path):
    for args, code in ((("validate", tmp_path), 3), (("info", "--path", tmp_path), 2)):  # validate's usage code: 3
        assert_one_line_error(gdsbench(*args, "--retries", "2"), "--retries", "URL", code=code)
    assert not list(tmp_path.iterdir())  # refused before anything was written


# ---- High 2: boto3 (prepare s3://, train/predict listings) with timeouts, one-line errors, same credentials ----

@pytest.fixture
def silent_s3(silent, s3_env, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", silent)
    return silent


def test_an_s3_upload_to_a_silent_server_ends_at_timeout_in_one_line(gdsbench, silent_s3):
    res, took = timed(gdsbench, "prepare", "s3://bucket/new.dat", "--size", "1M", "--timeout", "2s", "--retries", "1")
    assert took < BOUND_S, took
    assert_one_line_error(res, "PATH s3://bucket/new.dat", "--timeout 2 s", "2 tries")


def test_s3_listings_of_train_and_predict_end_at_timeout_in_one_line(gdsbench, silent_s3):
    flags = ("--workload", "unet3d", "--files", "2", "--timeout", "2s")
    for command in ("train", "predict"):
        res, took = timed(gdsbench, command, "s3://bucket/ds/", *flags)
        assert took < BOUND_S, (command, took)
        assert_one_line_error(res, "s3://bucket/ds/", "--timeout 2 s")


def test_a_botocore_error_without_a_response_is_one_line_not_a_traceback(silent_s3):
    """A read timeout carries no response: it is a failure to report, not a missing object."""
    from gdsbench.job.errors import UsageError
    from gdsbench.system import object_store

    s3 = object_store.client({"timeout_ns": 1_000_000_000, "retries": 0})
    with pytest.raises(UsageError, match=r"PATH s3://bucket/x.dat: .*--timeout 1 s"):
        object_store.head(s3, "s3://bucket/x.dat")


def test_prepare_refuses_remote_flags_for_a_local_file(gdsbench, tmp_path):
    assert_one_line_error(gdsbench("prepare", tmp_path / "x.dat", "--size", "1M", "--timeout", "2s"), "--timeout",
                          "s3://")
    assert not (tmp_path / "x.dat").exists()


def test_credentials_from_the_aws_files_serve_run_as_they_serve_prepare(s3, tmp_path):
    """No AWS_ACCESS_KEY_ID in the environment: the shared credentials file names them, as the AWS
    tools read it. prepare (boto3) and run (the native engine) both find them there."""
    (tmp_path / "credentials").write_text(f"[default]\naws_access_key_id = {KEY}\naws_secret_access_key = {SECRET}\n")
    (tmp_path / "config").write_text("[default]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ENDPOINT_URL=s3["AWS_ENDPOINT_URL"], AWS_DEFAULT_REGION="us-east-1", HOME=str(tmp_path),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "credentials"), AWS_CONFIG_FILE=str(tmp_path / "config"),
               AWS_EC2_METADATA_DISABLED="true")

    def gdsbench(*args):
        return subprocess.run([sys.executable, "-m", "gdsbench", *args], env=env, capture_output=True, text=True,
                              timeout=300, cwd=tmp_path)

    made = gdsbench("prepare", "s3://bucket/from-profile.dat", "--size", "1M")
    assert made.returncode == 0, made.stderr
    read = gdsbench("run", "s3://bucket/from-profile.dat", "--bs", "64K", "--io-size", "1M", "--verify", "--json")
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["verify_mismatches"] == 0


# ---- Medium: a 206 naming another range than asked is the server's fault ----

def test_a_206_for_another_range_is_refused_as_the_servers_fault(gdsbench, faulty):
    """The server answers each range 4 KiB later than asked, saying so in its Content-Range:
    wrong data, never taken; with --verify the server's range is blamed, not the object."""
    url = f"{faulty}/offrange/bucket/data.dat"
    for extra in ((), ("--verify",)):
        res = gdsbench("run", url, "--bs", "64K", "--io-size", "1M", *extra)
        assert_one_line_error(res, "Content-Range", "bytes 4096-", "127.0.0.1", "server", code=3)
        assert "pattern" not in res.err and "mismatch" not in res.err


# ---- Low: wording ----

def test_a_redirect_says_where_it_points(gdsbench, faulty):
    res = gdsbench("run", f"{faulty}/moved/bucket/data.dat", "--io-size", "1M")
    assert_one_line_error(res, "HTTP 301", "redirects to", "/plain/bucket/data.dat")
    assert "failed the request" not in res.err


def test_a_plain_http_403_gives_no_aws_advice(gdsbench, faulty):
    res = gdsbench("run", f"{faulty}/forbidden/bucket/data.dat", "--io-size", "1M")
    assert_one_line_error(res, "HTTP 403", "refused")
    assert "AWS_" not in res.err and "403 403" not in res.err


def test_an_s3_refusal_names_its_code_once(gdsbench, s3_env, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    res = gdsbench("prepare", "s3://bucket/refused.dat", "--size", "1M")
    assert_one_line_error(res, "HTTP 403", "AWS_SECRET_ACCESS_KEY")
    assert "403 403" not in res.err


def test_an_unmet_http2_is_said_not_hidden(gdsbench, nginx):
    """nginx without http2 over cleartext answers HTTP/1.1: the run says --http2 was asked and not granted."""
    d = run_json(gdsbench, f"{nginx}/bucket/data.dat", "--http2", "--bs", "64K", "--io-size", "1M")
    assert "--http2 asked" in d["data_path"] and "HTTP/1.1" in d["data_path"], d["data_path"]


def test_an_upload_a_killed_prepare_left_is_aborted_by_the_next_and_no_other(gdsbench, s3_env, tmp_path,
                                                                          monkeypatch):
    """`prepare s3://` killed mid-upload (SIGKILL: nothing of it runs after) leaves an incomplete
    multipart upload; the next prepare of that key aborts it. Someone else's upload of the same
    key, which gdsbench did not start, is left alone."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    s3 = boto3_client(s3_env)

    def uploads() -> set[str]:
        listed = s3.list_multipart_uploads(Bucket="bucket", Prefix="killed.dat").get("Uploads") or []
        return {u["UploadId"] for u in listed if u["Key"] == "killed.dat"}

    theirs = s3.create_multipart_upload(Bucket="bucket", Key="killed.dat")["UploadId"]
    try:
        prepare = subprocess.Popen([sys.executable, "-m", "gdsbench", "prepare", "s3://bucket/killed.dat", "--size",
                                    "1G"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            notes = tmp_path / "state" / "gdsbench" / "uploads"  # where gdsbench notes the uploads it starts
            wait_until(lambda: len(uploads()) == 2 and any(notes.glob("*.json")), "the prepare's upload, noted",
                       timeout=120)
        finally:
            prepare.send_signal(signal.SIGKILL)
            prepare.wait()
        (left,) = uploads() - {theirs}
        res = gdsbench("prepare", "s3://bucket/killed.dat", "--size", "1M")
        assert res.code == 0, res.err
        assert uploads() == {theirs}  # the killed one's aborted; the other's kept
    finally:
        s3.abort_multipart_upload(Bucket="bucket", Key="killed.dat", UploadId=theirs)
