"""NFS targets (the native nfs engine: libnfs in user space, no kernel mount) against a real
nfs-ganesha (NFSv4, userspace) on 127.0.0.1, started here on a free port exporting a folder `gdsbench
prepare` wrote into, and stopped by its PID. Ganesha or libnfs not installed skips these tests with the
reason (scripts/setup --tests installs both)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from test_bad_input import assert_one_line_error
from test_remote import assert_a_sweep_records_the_server, free_port, run_json, start, stop

MiB = 1 << 20


def start_ganesha(work):
    """nfs-ganesha exporting folder work/exp (an 8 MiB pattern file, data.dat, in it) as /exp over NFSv4
    on a free port: (process, the URL of data.dat)."""
    from gdsbench.job.spec import ENGINE_INFO
    from gdsbench.system.prepare import prepare

    exe = shutil.which("ganesha.nfsd") or "/usr/bin/ganesha.nfsd"
    if not os.path.exists(exe):
        pytest.skip("nfs-ganesha is not installed (scripts/setup --tests installs it: apt-get install nfs-ganesha "
                    "nfs-ganesha-vfs)")
    if ENGINE_INFO["nfs"]["unavailable"]:
        pytest.skip(f"the nfs engine: {ENGINE_INFO['nfs']['unavailable']}")
    exported = work / "exp"
    exported.mkdir()
    prepare(str(exported / "data.dat"), 8 * MiB)
    port = free_port()
    conf = work / "ganesha.conf"
    conf.write_text(
        f"NFS_CORE_PARAM {{ Protocols = 4; NFS_Port = {port}; Bind_addr = 127.0.0.1; Enable_NLM = false; "
        "Enable_RQUOTA = false; }\n"
        "NFSv4 { Graceless = true; }\n"
        f"EXPORT {{ Export_Id = 1; Path = {exported}; Pseudo = /exp; Access_Type = RO; Squash = No_Root_Squash; "
        "Protocols = 4; Transports = TCP; SecType = sys; FSAL { Name = VFS; } }\n"
        "LOG { Default_Log_Level = WARN; }\n")
    with open(work / "out.log", "w") as log:
        proc = start([exe, "-F", "-f", str(conf), "-L", str(work / "ganesha.log"), "-p", str(work / "ganesha.pid"),
                      "-N", "NIV_WARN"], port, log)
    return proc, f"nfs://127.0.0.1/exp/data.dat?version=4&nfsport={port}"


@pytest.fixture(scope="module")
def nfs(tmp_path_factory):
    proc, url = start_ganesha(tmp_path_factory.mktemp("ganesha"))
    yield url
    stop(proc)


def test_nfs_reads_are_verified_with_requests_in_flight_on_each_thread(gdsbench, nfs):
    # 4 MiB requests go as 1 MiB RPCs together; two threads are two NFSv4 clients, neither taking the other's lease
    d = run_json(gdsbench, nfs, "--bs", "4M", "--qd", "4", "--threads", "2", "--pattern", "rand", "--io-size", "32M",
                 "--verify")
    assert d["spec"]["engine"] == "nfs" and d["bytes"] == 32 * MiB
    assert d["verified_blocks"] == 8192 and d["verify_mismatches"] == 0
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
    port = nfs.split("nfsport=")[1]
    missing = nfs.replace("data.dat", "nope.dat")
    assert_one_line_error(gdsbench("run", missing, "--io-size", "1M"), "cannot open /nope.dat", "NOENT")
    assert_one_line_error(gdsbench("run", f"nfs://127.0.0.1/exp/data.dat?version=4&nfsport={free_port()}",
                                   "--io-size", "1M"), "cannot reach export /exp", "nfsport=N")
    assert_one_line_error(gdsbench("run", f"nfs://127.0.0.1:{port}/exp/data.dat?version=4", "--io-size", "1M"),
                          "?nfsport=N, not SERVER:N", f"nfsport={port}")
    assert_one_line_error(gdsbench("run", "nfs://127.0.0.1", "--io-size", "1M"), "nfs://SERVER/EXPORT/FILE")
    assert_one_line_error(gdsbench("run", nfs, "--direct", "--io-size", "1M"), "--direct", "--buffered")
    assert_one_line_error(gdsbench("run", nfs, "--rw", "write", "--io-size", "1M"), "cannot write", "yet", code=2)
    assert_one_line_error(gdsbench("run", "gopher://x/y", "--io-size", "1M"), "ftps://, nfs:// or smb:// URL")
    assert_one_line_error(gdsbench("prepare", nfs.replace("data.dat", "new.dat"), "--size", "1M"),
                          "an NFS server cannot be written to yet", code=2)
    assert_one_line_error(gdsbench("train", nfs.replace("data.dat", ""), "--workload", "unet3d"),
                          "an NFS server cannot be listed yet", code=2)


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
