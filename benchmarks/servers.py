"""Real servers on loopback for the benchmark scripts: nginx (HTTP, ranges
answered 206, sendfile) and rclone's S3 server (SigV4 checked, ranges
answered 200 + Content-Range), each on a free port over a folder, and a
process's CPU time from /proc. (tests/test_remote.py starts its own, as the
tests and the benchmarks do not import each other.)"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

KEY, SECRET = "gdsbench-bench-key", "gdsbench-bench-secret"
S3_ENV = {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv: list[str], port: int, log: str) -> subprocess.Popen:
    """A server process, once it accepts connections on port."""
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                sys.exit(f"{argv[0]} exited; see {log}")
            time.sleep(0.05)
    sys.exit(f"{argv[0]} did not listen on {port}")


def nginx(folder: str, work: str) -> tuple[subprocess.Popen, str]:
    """nginx serving folder: (process, base URL)."""
    port = free_port()
    temp = " ".join(f"{k}_temp_path {work}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"daemon off; master_process off; error_log {work}/error.log; pid {work}/nginx.pid;\n"
                "events { worker_connections 1024; }\n"
                f"http {{ access_log off; sendfile on; keepalive_requests 1000000; {temp}\n"
                f"  server {{ listen 127.0.0.1:{port}; root {folder}; }} }}\n")
    return start([shutil.which("nginx") or "/usr/sbin/nginx", "-p", work, "-c", conf], port,
                 os.path.join(work, "nginx.log")), f"http://127.0.0.1:{port}"


def rclone(folder: str, work: str) -> tuple[subprocess.Popen, str]:
    """rclone's S3 server over folder (its top-level folders are buckets): (process, endpoint)."""
    port = free_port()
    exe = shutil.which("rclone") or os.path.join(os.path.dirname(sys.executable), "rclone")
    return start([exe, "serve", "s3", "--config", "/dev/null", "--auth-key", f"{KEY},{SECRET}", "--addr",
                  f"127.0.0.1:{port}", folder], port, os.path.join(work, "rclone.log")), f"http://127.0.0.1:{port}"


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
