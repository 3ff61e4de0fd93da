"""NFS targets (the native nfs engine: libnfs in user space, no kernel mount) against a real
nfs-ganesha (userspace), exporting a folder `gdsbench prepare` wrote into, stopped by its PID: reads
over NFSv4 on 127.0.0.1 (a free port, no portmapper), writes over NFSv3 on a namespaced host
(tests/hosts.py), where rpcbind can have port 111 and ganesha can register with it. Ganesha or libnfs
not installed skips these tests with the reason (scripts/setup --tests installs both); so does a
machine where namespaced hosts cannot be made, for the NFSv3 ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import CliResult
from hosts import Hosts, serve_nfs3, servers_module, why_not
from test_bad_input import assert_one_line_error
from test_remote import (
    assert_a_remote_dataset_trains_and_predicts,
    assert_a_sweep_records_the_server,
    assert_prepare_on_a_server,
    assert_streamed_past_the_cache,
    assert_the_pytest_plugin_measures,
    free_port,
    run_json,
    start,
    stop,
)

MiB = 1 << 20


def ganesha_binary() -> str:
    """ganesha.nfsd, where this machine has it and gdsbench its nfs engine (else the test skips, saying why)."""
    from gdsbench.job.spec import ENGINE_INFO

    exe = servers_module().ganesha_binary()
    if not os.path.exists(exe):
        pytest.skip("nfs-ganesha is not installed (scripts/setup --tests installs it: apt-get install nfs-ganesha "
                    "nfs-ganesha-vfs)")
    if ENGINE_INFO["nfs"]["unavailable"]:
        pytest.skip(f"the nfs engine: {ENGINE_INFO['nfs']['unavailable']}")
    return exe


def start_ganesha(work):
    """nfs-ganesha exporting folder work/exp (an 8 MiB pattern file, data.dat, in it) as /exp over NFSv4
    on a free port: (process, the URL of data.dat)."""
    from gdsbench.system.prepare import prepare

    exe = ganesha_binary()
    exported = work / "exp"
    exported.mkdir()
    prepare(str(exported / "data.dat"), 8 * MiB)
    port = free_port()
    conf = work / "ganesha.conf"
    servers_module().ganesha_config(str(conf), str(exported), version=4, pseudo="/exp", writable=False, port=port)
    with open(work / "out.log", "w") as log:
        proc = start([exe, "-F", "-f", str(conf), "-L", str(work / "ganesha.log"), "-p", str(work / "ganesha.pid"),
                      "-N", "NIV_WARN"], port, log)
    return proc, f"nfs://127.0.0.1/exp/data.dat?version=4&nfsport={port}"


@pytest.fixture(scope="module")
def nfs(tmp_path_factory):
    proc, url = start_ganesha(tmp_path_factory.mktemp("ganesha"))
    yield url
    stop(proc)


NO_HOSTS = why_not()


@pytest.fixture(scope="module")
def nfs3(tmp_path_factory):
    """nfs-ganesha serving NFSv3 on host h2 (tests/hosts.py's serve_nfs3), exporting folder exp: w.dat,
    8 MiB of gdsbench's pattern, and theirs.dat, a user's 1 MiB of other bytes. Yields (gdsbench run on
    h1, a function as the gdsbench fixture is; the URL of a file in exp by name; the folder)."""
    from gdsbench.system.prepare import prepare

    ganesha_binary()
    if NO_HOSTS:
        pytest.skip(f"NFSv3 needs a host of its own for rpcbind's port 111: {NO_HOSTS}")
    work = tmp_path_factory.mktemp("ganesha3")
    exported = work / "exp"
    exported.mkdir()
    prepare(str(exported / "w.dat"), 8 * MiB)
    (exported / "theirs.dat").write_bytes(os.urandom(MiB))
    with Hosts(2) as hosts:  # ganesha and rpcbind end with h2
        _, base = serve_nfs3(hosts, "h2", str(exported), str(work))

        def on_h1(*args) -> CliResult:
            res = subprocess.run(hosts.on("h1", sys.executable, "-m", "gdsbench", *map(str, args)),
                                 capture_output=True, text=True, timeout=120)
            return CliResult(res.returncode, res.stdout, res.stderr)

        yield on_h1, lambda name: f"{base}/{name}?version=3", exported


def test_nfs_reads_are_verified_with_requests_in_flight_on_each_thread(gdsbench, nfs):
    # 4 MiB requests go as 1 MiB RPCs together; two threads are two NFSv4 clients, neither taking the other's lease.
    # 32 MiB in flight on each thread: past half a last-level cache up to 32 MiB, so replies are copied with
    # streaming stores (copy.hpp)
    d = run_json(gdsbench, nfs, "--bs", "4M", "--qd", "8", "--threads", "2", "--pattern", "rand", "--io-size", "64M",
                 "--verify")
    assert d["spec"]["engine"] == "nfs" and d["bytes"] == 64 * MiB
    assert_streamed_past_the_cache(d, 8 * 4 * MiB, 2 * 8 * 4 * MiB)
    assert d["verified_blocks"] == 16384 and d["verify_mismatches"] == 0
    target = d["environment"]["target"]
    assert target["kind"] == "nfs" and target["size_bytes"] == 8 * MiB and target["export"] == "/exp"
    assert target["server_ip"] == "127.0.0.1" and target["libnfs"]
    assert d["connections"] == 2  # one per thread
    assert d["data_path"].startswith("NFS, nfs engine (libnfs "), d["data_path"]


def test_small_nfs_reads_to_the_end_of_the_file(gdsbench, nfs):
    d = run_json(gdsbench, nfs, "--bs", "4K", "--qd", "16", "--io-size", "8M", "--verify")
    assert d["bytes"] == 8 * MiB and d["verify_mismatches"] == 0


def test_a_sweep_over_nfs_records_the_server(gdsbench, nfs, tmp_path):
    assert_a_sweep_records_the_server(gdsbench, nfs, "nfs", tmp_path)


def test_the_pytest_plugin_measures_an_nfs_file(nfs, tmp_path):
    assert_the_pytest_plugin_measures(nfs, tmp_path, "NFS, nfs engine (libnfs")


def test_bounce_over_nfs_names_its_data_path_on_the_cpu_stand_in(gdsbench, nfs):
    """--mode cached-bounce over NFS, copied to the SIMULATED device (a CPU stand-in): logic only, untested on GPU."""
    d = run_json(gdsbench, nfs, "--mode", "cached-bounce", "--gpu-backend", "sim", "--bs", "1M", "--qd", "2",
                 "--io-size", "4M", "--verify")
    assert d["verify_mismatches"] == 0
    assert d["data_path"].startswith("NFS, nfs engine") and "pinned host memory" in d["data_path"], d["data_path"]
    assert "SIMULATED" in d["data_path"]


def test_validate_reads_an_nfs_file_and_says_how_it_looked(gdsbench, nfs):
    res = gdsbench("validate", nfs, "--quick", "--json")
    assert res.code == 0, res.err
    checks = {c["name"]: c for c in json.loads(res.out)["checks"]}
    fs = checks["platform.filesystem"]
    assert fs["status"] == "INFO" and "(NFS, libnfs " in fs["measured"] and fs["evidence"].startswith("GETATTR nfs://")
    assert checks["integrity.cpu"]["status"] == "PASS"


def test_nfs_refusals_are_one_line_before_the_run(gdsbench, nfs):
    from gdsbench import _native

    libnfs = _native.probe_target("nfs", nfs, {})["libnfs"]
    port = nfs.split("nfsport=")[1]
    missing = nfs.replace("data.dat", "nope.dat")
    assert_one_line_error(gdsbench("run", missing, "--io-size", "1M"), "cannot open /nope.dat", "NOENT")
    assert_one_line_error(gdsbench("run", f"nfs://127.0.0.1/exp/data.dat?version=4&nfsport={free_port()}",
                                   "--io-size", "1M"), "cannot reach export /exp", "nfsport=N")
    assert_one_line_error(gdsbench("run", f"nfs://127.0.0.1:{port}/exp/data.dat?version=4", "--io-size", "1M"),
                          "?nfsport=N, not SERVER:N", f"nfsport={port}")
    assert_one_line_error(gdsbench("run", "nfs://127.0.0.1", "--io-size", "1M"), "nfs://SERVER/EXPORT/FILE")
    assert_one_line_error(gdsbench("run", nfs, "--direct", "--io-size", "1M"), "--direct", "--buffered")
    assert_one_line_error(gdsbench("run", nfs, "--rw", "write", "--io-size", "1M"), "cannot send an NFSv4 WRITE",
                          "?version=3") if int(libnfs.split(".")[0]) < 5 else None
    assert_one_line_error(gdsbench("run", "gopher://x/y", "--io-size", "1M"), "ftps://, nfs:// or smb:// URL")
    assert_one_line_error(gdsbench("prepare", nfs.replace("data.dat", "new.dat"), "--size", "1M"),
                          "cannot send an NFSv4 WRITE") if int(libnfs.split(".")[0]) < 5 else None
    # listed over NFSv4 too: its one file, no manifest, is one sample, too few to train on
    assert_one_line_error(gdsbench("train", nfs.replace("data.dat", ""), "--workload", "unet3d"),
                          "1 samples give each of 1 accelerators", code=2)


def test_a_server_killed_mid_run_ends_it_in_one_line(tmp_path):
    proc, url = start_ganesha(tmp_path)
    try:
        run = subprocess.Popen([sys.executable, "-m", "gdsbench", "run", url, "--bs", "1M", "--qd", "4", "--runtime",
                                "30s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2)
    finally:
        stop(proc)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 3, err
    assert err.count("\n") == 1 and "the NFS connection to 127.0.0.1" in err and "Traceback" not in err, err


def test_nfs3_writes_go_into_a_file_gdsbench_made_committed_and_read_back_verified(nfs3):
    gdsbench, url, exported = nfs3
    w = run_json(gdsbench, url("w.dat"), "--rw", "write", "--bs", "1M", "--qd", "4", "--threads", "2",
                 "--io-size", "8M", "--fsync-end")
    assert w["bytes"] == 8 * MiB and w["spec"]["engine"] == "nfs" and w["fsyncs"] == 2  # a COMMIT per thread
    assert w["data_path"].startswith("NFS, nfs engine (libnfs"), w["data_path"]
    r = run_json(gdsbench, url("w.dat"), "--verify", "--bs", "4M", "--qd", "2", "--io-size", "8M")
    assert r["verified_blocks"] == 8 * MiB // 4096 and r["verify_mismatches"] == 0
    before = (exported / "theirs.dat").read_bytes()
    assert_one_line_error(gdsbench("run", url("theirs.dat"), "--rw", "write", "--io-size", "1M"),
                          "not a file gdsbench made")
    assert (exported / "theirs.dat").read_bytes() == before
    # AUTH_SYS as another user (libnfs's uid=, gid=): the file is root's, 0644, so reads go and writes do not
    other = url("w.dat") + "&uid=65534&gid=65534"
    assert_one_line_error(gdsbench("run", other, "--rw", "write", "--io-size", "1M"), "cannot open /w.dat",
                          "ACCESS denied")
    assert run_json(gdsbench, other, "--io-size", "1M")["bytes"] == MiB
    assert_one_line_error(gdsbench("run", url("nope.dat"), "--rw", "write", "--io-size", "1M"),
                          "cannot open /nope.dat", "NOENT")


def test_prepare_makes_a_new_nfs_file_and_keeps_or_refuses_what_is_there(nfs3):
    gdsbench, url, exported = nfs3
    assert_prepare_on_a_server(gdsbench, url("new.dat"), exported / "new.dat", url("theirs.dat"),
                               exported / "theirs.dat", "not a file gdsbench made")


def test_a_dataset_in_an_nfs_folder_is_trained_and_predicted(nfs3, tmp_path):
    gdsbench, url, exported = nfs3
    flags = ("--workload", "unet3d", "--files", "8", "--record-bytes", "256K", "--batch", "2", "--compute-time", "20ms")
    # prepared where the server exports it, as a dataset on a filer is (gdsbench writes none onto a server)
    subprocess.run([sys.executable, "-m", "gdsbench", "prepare", exported / "ds", *flags], check=True,
                   capture_output=True, timeout=120)
    assert_a_remote_dataset_trains_and_predicts(gdsbench, url("ds/"), flags, tmp_path, "NFS, nfs engine (libnfs")
    assert_one_line_error(gdsbench("prepare", url("new-ds/"), *flags), "not written onto an NFS server yet",
                          "in the exported folder")
    assert_one_line_error(gdsbench("train", url("nope/"), *flags), "cannot reach export", code=2)
