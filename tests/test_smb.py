"""SMB targets (the native smb engine: libsmbclient in user space, no cifs mount) against a real Samba
smbd on 127.0.0.1, started here on a free port with its own private state, sharing a folder `gdsbench
prepare` wrote into, its one user root with a password of the test's (in that private state only), and
stopped by its PID. smbd not installed skips these tests with the reason (scripts/setup --tests installs
it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from test_bad_input import assert_one_line_error
from test_remote import assert_prepare_on_a_server, free_port, run_json, start, stop

MiB = 1 << 20
PASSWORD = "gdsbench-smb-pw"


def start_smbd(work):
    """smbd sharing folder work/share (8 MiB pattern files data.dat and w.dat, the writes', and
    theirs.dat, a user's 1 MiB of other bytes) as [share], read and write, on a free port: (process,
    the URL of data.dat)."""
    from gdsbench.job.spec import ENGINE_INFO
    from gdsbench.system.prepare import prepare

    exe = shutil.which("smbd") or "/usr/sbin/smbd"
    if not os.path.exists(exe):
        pytest.skip("Samba's smbd is not installed (scripts/setup --tests installs it: apt-get install samba)")
    if ENGINE_INFO["smb"]["unavailable"]:
        pytest.skip(f"the smb engine: {ENGINE_INFO['smb']['unavailable']}")
    share = work / "share"
    share.mkdir()
    prepare(str(share / "data.dat"), 8 * MiB)
    prepare(str(share / "w.dat"), 8 * MiB)
    (share / "theirs.dat").write_bytes(os.urandom(MiB))
    port = free_port()
    state = {name: work / name for name in ("state", "lock", "pid", "cache", "private")}
    for folder in state.values():
        folder.mkdir()
    conf = work / "smb.conf"
    conf.write_text("[global]\n" + "".join(f"{k} = {v}\n" for k, v in {
        "smb ports": port, "interfaces": "127.0.0.1", "bind interfaces only": "yes", "disable netbios": "yes",
        "server role": "standalone server", "state directory": state["state"], "lock directory": state["lock"],
        "pid directory": state["pid"], "cache directory": state["cache"], "private dir": state["private"],
        "log file": work / "log.%m"}.items()) + f"[share]\npath = {share}\nread only = no\n")
    subprocess.run(["smbpasswd", "-c", str(conf), "-s", "-a", "root"], input=f"{PASSWORD}\n{PASSWORD}\n", text=True,
                   check=True, capture_output=True)
    with open(work / "out.log", "w") as log:
        proc = start([exe, "--foreground", "--no-process-group", "-s", str(conf)], port, log, own_group=True)
    return proc, f"smb://127.0.0.1:{port}/share/data.dat"


@pytest.fixture(scope="module")
def smb(tmp_path_factory):
    proc, url = start_smbd(tmp_path_factory.mktemp("smbd"))
    yield url
    stop(proc)


@pytest.fixture
def login(monkeypatch):
    """The share's login, as smbclient takes it: $USER as user%password."""
    monkeypatch.setenv("USER", f"root%{PASSWORD}")
    monkeypatch.delenv("PASSWD", raising=False)


def test_smb_reads_are_verified_and_name_the_share(gdsbench, smb, login):
    d = run_json(gdsbench, smb, "--bs", "4M", "--pattern", "rand", "--io-size", "16M", "--verify")
    assert d["spec"]["engine"] == "smb" and d["bytes"] == 16 * MiB
    assert d["verified_blocks"] == 4096 and d["verify_mismatches"] == 0
    target = d["environment"]["target"]
    assert target["kind"] == "smb" and target["size_bytes"] == 8 * MiB and target["share"] == "share"
    assert target["server_ip"] == "127.0.0.1" and target["libsmbclient"]
    assert d["data_path"].startswith("SMB, smb engine (libsmbclient "), d["data_path"]
    assert d["connections"] == 1
    assert os.environ["USER"] == f"root%{PASSWORD}"  # Samba's client blanked it once read: put back


def test_smb_reads_from_several_processes_each_its_own_client(gdsbench, smb, login):
    d = run_json(gdsbench, smb, "--bs", "64K", "--procs", "2", "--io-size", "8M", "--verify")
    assert d["bytes"] == 2 * 8 * MiB and d["verify_mismatches"] == 0 and d["connections"] == 2  # --io-size each


def test_smb_reads_are_one_thread_per_process(gdsbench, smb, login):
    assert_one_line_error(gdsbench("run", smb, "--threads", "2", "--io-size", "4M"), "--threads", "--procs N")


def test_a_sweep_over_smb_records_the_share(gdsbench, smb, login, tmp_path):
    res = gdsbench("sweep", smb, "--bs", "64K,1M", "--io-size", "2M", "--results", tmp_path, "--name", "smb")
    assert res.code == 0, res.err
    (run,) = list(tmp_path.iterdir())
    (target,) = json.loads((run / "run.json").read_text())["environment"]["targets"].values()
    assert target["kind"] == "smb" and target["server_ip"] == "127.0.0.1"
    points = [json.loads(line) for line in (run / "points.jsonl").read_text().splitlines()]
    assert len(points) == 2 and all(p["bytes"] == 2 * MiB for p in points)


def test_smb_refusals_are_one_line_before_the_run(gdsbench, smb, monkeypatch):
    monkeypatch.delenv("PASSWD", raising=False)
    monkeypatch.setenv("USER", "root%wrong")
    assert_one_line_error(gdsbench("run", smb, "--io-size", "1M"), "access denied", "as user root", "$PASSWD")
    monkeypatch.setenv("USER", f"root%{PASSWORD}")
    assert_one_line_error(gdsbench("run", smb.replace("data.dat", "nope.dat"), "--io-size", "1M"),
                          "no such file on share share")
    assert_one_line_error(gdsbench("run", f"smb://127.0.0.1:{free_port()}/share/data.dat", "--io-size", "1M"),
                          "cannot connect", "connection refused")
    res = gdsbench("run", smb.replace("smb://", "smb://root:hunter2@"), "--io-size", "1M")
    assert_one_line_error(res, "a password in the URL", "$PASSWD")
    assert "hunter2" not in res.err
    assert_one_line_error(gdsbench("run", "smb://127.0.0.1/share", "--io-size", "1M"), "smb://SERVER[:PORT]/SHARE/PATH")
    assert_one_line_error(gdsbench("run", smb, "--direct", "--io-size", "1M"), "--direct", "--buffered")
    theirs = smb.replace("data.dat", "theirs.dat")
    assert_one_line_error(gdsbench("run", theirs, "--rw", "write", "--io-size", "1M"), "not a file gdsbench made",
                          "gdsbench prepare")
    assert_one_line_error(gdsbench("run", smb, "--rw", "write", "--fsync-end", "--io-size", "1M"), "no flush call")
    assert_one_line_error(gdsbench("train", smb.replace("data.dat", ""), "--workload", "unet3d"),
                          "an SMB server cannot be listed yet", code=2)


def test_smb_writes_go_into_a_file_gdsbench_made_and_read_back_verified(gdsbench, smb, login):
    written = smb.replace("data.dat", "w.dat")
    w = run_json(gdsbench, written, "--rw", "write", "--bs", "1M", "--procs", "2", "--io-size", "4M")
    assert w["bytes"] == 8 * MiB and w["spec"]["engine"] == "smb"
    assert w["data_path"].startswith("SMB, smb engine (libsmbclient"), w["data_path"]
    r = run_json(gdsbench, written, "--verify", "--io-size", "8M")
    assert r["verified_blocks"] == 8 * MiB // 4096 and r["verify_mismatches"] == 0


def test_prepare_makes_a_new_smb_file_and_keeps_or_refuses_what_is_there(gdsbench, tmp_path, login):
    proc, data = start_smbd(tmp_path)
    try:
        share = tmp_path / "share"
        assert_prepare_on_a_server(gdsbench, data.replace("data.dat", "new.dat"), share / "new.dat",
                                   data.replace("data.dat", "theirs.dat"), share / "theirs.dat", "not a file gdsbench made")
    finally:
        stop(proc)


def test_a_server_killed_mid_run_ends_it_in_one_line(tmp_path, monkeypatch):
    proc, url = start_smbd(tmp_path)
    env = {**os.environ, "USER": f"root%{PASSWORD}"}
    try:
        run = subprocess.Popen([sys.executable, "-m", "gdsbench", "run", url, "--bs", "1M", "--runtime", "30s"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        time.sleep(2)
    finally:
        stop(proc)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 3, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
