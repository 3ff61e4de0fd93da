"""FTP targets (the curl engine's ftp:// and ftps:// protocol) against a real vsftpd on 127.0.0.1,
started here on a free port with anonymous reads of a folder `gdsbench prepare` wrote into (ftps: with
a self-signed certificate, TLS from the first byte), and stopped by its PID. vsftpd that is not
installed skips these tests with the reason (scripts/setup --tests installs it)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from test_bad_input import assert_one_line_error
from test_remote import (
    assert_a_sweep_records_the_server,
    assert_prepare_on_a_server,
    free_port,
    run_json,
    self_signed_certificate,
    start,
    stop,
)

MiB = 1 << 20


def start_vsftpd(work, tls: tuple | None = None, writable: bool = False):
    """vsftpd serving an 8 MiB pattern file, data.dat, to anonymous logins, from folder work: (process,
    base URL). tls, a (certificate, key) pair: implicit FTPS, control and data connections. writable:
    anonymous sessions may also store files in up/ (the ftp user's, as vsftpd wants: its root stays
    read-only), where gdsbench's w.dat (8 MiB) and a stranger's theirs.dat lie."""
    from gdsbench.system.prepare import prepare

    exe = shutil.which("vsftpd") or "/usr/sbin/vsftpd"
    if not os.path.exists(exe):
        pytest.skip("vsftpd is not installed (scripts/setup --tests installs it: apt-get install vsftpd)")
    root, empty = work / "root", work / "empty"
    root.mkdir()
    empty.mkdir()
    prepare(str(root / "data.dat"), 8 * MiB)
    for path in (work, root, root / "data.dat"):  # anonymous sessions run as the ftp user: they must read it
        path.chmod(0o755)
    port = free_port()
    settings = {"listen": "YES", "listen_address": "127.0.0.1", "listen_port": port, "background": "NO",
                "anonymous_enable": "YES", "no_anon_password": "YES", "anon_root": root, "local_enable": "NO",
                "write_enable": "NO", "pasv_enable": "YES", "secure_chroot_dir": empty, "seccomp_sandbox": "NO",
                "xferlog_enable": "NO", "max_clients": 200, "max_per_ip": 200}
    if writable:
        settings.update({"write_enable": "YES", "anon_upload_enable": "YES", "anon_other_write_enable": "YES",
                         "anon_umask": "022"})  # a file stored anonymously is readable (anon_world_readable_only)
        up = root / "up"
        up.mkdir()
        prepare(str(up / "w.dat"), 8 * MiB)
        (up / "theirs.dat").write_bytes(b"not gdsbench's!!" * 1024)
        for path in (up, up / "w.dat", up / "theirs.dat"):
            shutil.chown(path, "ftp", "ftp")
    if tls:
        settings.update({"ssl_enable": "YES", "implicit_ssl": "YES", "rsa_cert_file": tls[0],
                         "rsa_private_key_file": tls[1], "allow_anon_ssl": "YES", "force_anon_data_ssl": "YES",
                         "force_anon_logins_ssl": "YES", "require_ssl_reuse": "NO"})
    conf = work / "vsftpd.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    with open(work / "out.log", "w") as log:
        proc = start([exe, str(conf)], port, log)
    return proc, f"{'ftps' if tls else 'ftp'}://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def ftp(tmp_path_factory):
    proc, url = start_vsftpd(tmp_path_factory.mktemp("vsftpd"))
    yield url
    stop(proc)


def test_ftp_ranges_are_read_and_verified_each_its_own_connection(gdsbench, ftp):
    d = run_json(gdsbench, f"{ftp}/data.dat", "--bs", "256K", "--qd", "4", "--io-size", "4M", "--verify")
    assert d["spec"]["engine"] == "curl" and d["bytes"] == 4 * MiB
    assert d["verified_blocks"] == 1024 and d["verify_mismatches"] == 0
    target = d["environment"]["target"]
    assert target["kind"] == "ftp" and target["size_bytes"] == 8 * MiB and target["probe"] == "SIZE"
    assert "http_version" not in target  # not HTTP: no version to claim
    assert "vsFTPd" in target["server"]  # as its greeting names it
    # a range cut before the file's end closes its control connection (vsftpd answers 426): FTP's cost, counted
    assert d["connections"] >= 4
    assert 0 < d["first_byte_p50_ns"] <= d["lat_p50_ns"]


def test_ftp_reads_to_the_end_of_the_file(gdsbench, ftp):
    d = run_json(gdsbench, f"{ftp}/data.dat", "--bs", "1M", "--qd", "2", "--threads", "2", "--pattern", "rand",
                 "--verify", "--io-size", "16M")
    assert d["bytes"] == 16 * MiB and d["verify_mismatches"] == 0


def test_ftp_refusals_are_one_line_before_the_run(gdsbench, ftp):
    assert_one_line_error(gdsbench("run", f"{ftp}/nope.dat", "--io-size", "1M"), "no such file on the server",
                          "(SIZE, 1 try)")
    host = ftp.removeprefix("ftp://")
    assert_one_line_error(gdsbench("run", f"ftp://nosuchuser@{host}/data.dat", "--io-size", "1M"),
                          "refused the login", "~/.netrc")
    res = gdsbench("run", f"ftp://someone:hunter2@{host}/data.dat", "--io-size", "1M")
    assert_one_line_error(res, "a password in the URL", "~/.netrc")
    assert "hunter2" not in res.err
    assert_one_line_error(gdsbench("run", f"{ftp}/", "--io-size", "1M"), "ftp://[USER@]HOST[:PORT]/PATH")
    assert_one_line_error(gdsbench("run", f"ftp://127.0.0.1:{free_port()}/data.dat", "--io-size", "1M"), "onnect")


def test_ftp_has_no_o_direct(gdsbench, ftp):
    assert_one_line_error(gdsbench("run", f"{ftp}/data.dat", "--direct", "--io-size", "1M"), "--direct", "--buffered")


def test_ftp_writes_store_a_gdsbench_file_whole_and_refuse_anything_else(gdsbench, tmp_path):
    proc, ftp = start_vsftpd(tmp_path, writable=True)
    try:
        url, up = f"{ftp}/up/w.dat", tmp_path / "root" / "up"
        before = (up / "w.dat").stat().st_mtime_ns
        w = run_json(gdsbench, url, "--rw", "write", "--bs", "8M", "--io-size", "16M")
        assert w["bytes"] == 16 * MiB and w["ops"] == 2 and w["spec"]["engine"] == "curl"
        assert w["data_path"].startswith("FTP, curl engine STORs (the file whole)"), w["data_path"]
        assert (up / "w.dat").stat().st_mtime_ns > before and (up / "w.dat").stat().st_size == 8 * MiB
        r = run_json(gdsbench, url, "--verify", "--io-size", "8M")
        assert r["verified_blocks"] == 8 * MiB // 4096 and r["verify_mismatches"] == 0
        # from GPU memory by way of pinned host memory, on the CPU stand-in: logic only, untested on GPU
        b = run_json(gdsbench, url, "--rw", "write", "--bs", "8M", "--io-size", "8M", "--mode", "bounce", "--gpu-backend",
                     "sim")
        assert b["data_path"].startswith("FTP, curl engine STORs (the file whole) from GPU memory"), b["data_path"]
        assert "SIMULATED" in b["data_path"]
        assert run_json(gdsbench, url, "--verify", "--io-size", "8M")["verify_mismatches"] == 0
        for args, words in (((f"{ftp}/up/theirs.dat", "--bs", "16K"), ("not a file gdsbench made",)),
                            ((url, "--bs", "1M"), ("written whole, in one STOR", "--bs 8M")),
                            ((url, "--bs", "8M", "--qd", "2"), ("by one writer",)),
                            ((url, "--bs", "8M", "--verify"), ("--verify/--fsync",))):
            assert_one_line_error(gdsbench("run", *args, "--rw", "write", "--io-size", "8M"), *words)
        assert (up / "theirs.dat").read_bytes() == b"not gdsbench's!!" * 1024
        # where the server refuses the STOR (data.dat: vsftpd's root is not the ftp user's), one line, code 3
        assert_one_line_error(gdsbench("run", f"{ftp}/data.dat", "--rw", "write", "--bs", "8M", "--io-size", "8M"),
                              "the server refused to store it", code=3)
    finally:
        stop(proc)


def test_prepare_stores_a_new_ftp_file_and_keeps_or_refuses_what_is_there(gdsbench, tmp_path):
    proc, ftp = start_vsftpd(tmp_path, writable=True)
    try:
        up = tmp_path / "root" / "up"
        assert_prepare_on_a_server(gdsbench, f"{ftp}/up/new.dat", up / "new.dat", f"{ftp}/up/theirs.dat",
                                   up / "theirs.dat", "not a file gdsbench made")
        # --files: every name looked at before the first is written (set.1 is a stranger's: nothing made)
        (up / "set.1").write_bytes(b"theirs!!" * 512)
        shutil.chown(up / "set.1", "ftp", "ftp")
        assert_one_line_error(gdsbench("prepare", f"{ftp}/up/set", "--size", "1M", "--files", "2"),
                              "set.1: not a file gdsbench made")
        assert not (up / "set.0").exists()
        made = gdsbench("prepare", f"{ftp}/up/two", "--size", "1M", "--files", "2")
        assert made.code == 0 and made.out.count("wrote") == 2, made.err
        again = gdsbench("prepare", f"{ftp}/up/two", "--size", "1M", "--files", "2")  # looked at once, then kept
        assert again.code == 0 and again.out.count("kept existing") == 2, again.err
        assert_one_line_error(gdsbench("prepare", f"{ftp}/new.dat", "--size", "1M"), "refused to store it", code=3)
    finally:
        stop(proc)


def test_a_sweep_over_ftp_records_the_server(gdsbench, ftp, tmp_path):
    assert_a_sweep_records_the_server(gdsbench, f"{ftp}/data.dat", "ftp", tmp_path)


def test_bounce_over_ftp_names_its_data_path_on_the_cpu_stand_in(gdsbench, ftp):
    """--mode bounce over FTP, copied to the SIMULATED device (a CPU stand-in): logic only, untested on GPU."""
    d = run_json(gdsbench, f"{ftp}/data.dat", "--mode", "bounce", "--gpu-backend", "sim", "--bs", "1M", "--qd", "2",
                 "--io-size", "4M", "--verify")
    assert d["verify_mismatches"] == 0
    assert d["data_path"].startswith("FTP, curl engine ranged reads into pinned host memory"), d["data_path"]
    assert "SIMULATED" in d["data_path"]


def test_validate_reads_an_ftp_file_and_says_how_it_looked(gdsbench, ftp):
    res = gdsbench("validate", f"{ftp}/data.dat", "--quick", "--json")
    assert res.code == 0, res.err
    checks = {c["name"]: c for c in json.loads(res.out)["checks"]}
    fs = checks["platform.filesystem"]
    assert fs["status"] == "INFO" and "(FTP, server (vsFTPd" in fs["measured"] and fs["evidence"].startswith("SIZE ftp://")
    assert checks["integrity.cpu"]["status"] == "PASS"


def test_ftp_is_named_where_urls_are_listed(gdsbench):
    assert_one_line_error(gdsbench("run", "gopher://x/y", "--io-size", "1M"), "s3://, ftp://, ftps://")


def test_ftps_is_read_over_tls_and_a_private_ca_is_taken_from_aws_ca_bundle(gdsbench, tmp_path, monkeypatch):
    cert, key = self_signed_certificate(tmp_path)
    proc, url = start_vsftpd(tmp_path, tls=(str(cert), str(key)))
    try:
        assert_one_line_error(gdsbench("run", f"{url}/data.dat", "--io-size", "1M"), "TLS failed", "AWS_CA_BUNDLE")
        monkeypatch.setenv("AWS_CA_BUNDLE", str(cert))
        d = run_json(gdsbench, f"{url}/data.dat", "--bs", "1M", "--qd", "2", "--io-size", "4M", "--verify")
    finally:
        stop(proc)
    assert d["bytes"] == 4 * MiB and d["verify_mismatches"] == 0 and d["environment"]["target"]["kind"] == "ftp"
