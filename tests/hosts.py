"""Several hosts on one machine, for the tests that cross hosts: each host a
network namespace with its own hostname (a UTS namespace per command), joined
by veth pairs to a bridge in a namespace of its own, at 10.203.0.1..N. Traffic
between them crosses veth and a real TCP stack; every host shares this
machine's kernel, disk and clock. After ../shared/hosts (hosts.sh, on, nsrsh).

Names are this process's own (gdsbench-PID-h1, ...), so two test runs on one
machine never meet; inside, the hosts are called h1..hN and resolve each
other through /etc/netns/NS/hosts, which `ip netns exec` binds over /etc/hosts.
Only root can make them; where it cannot, `why_not()` says why and the tests
that need hosts skip.

Hosts(n, read_bps=B) also gives each host a link of its own to the disk: a
blkio cgroup per host (gdsbench.system.Throttle) that every process started
on it joins, each reading the disk at B bytes/s at most, as a host whose NIC,
not the storage, is the limit.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

from gdsbench.system.throttle import Throttle

SUBNET = "10.203.0"
PREFIX_VARIABLE = "GDSBENCH_TEST_HOSTS"  # the namespaces' prefix, for the ssh stand-in


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def why_not() -> str | None:
    """Why hosts cannot be made here (None where they can)."""
    if os.geteuid() != 0:
        return "namespaced hosts need root"
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "namespaced hosts need ip (iproute2) and unshare (util-linux)"
    probe = f"gdsbench-probe-{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot make a network namespace here: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    for kind in ("--uts", "--mount"):  # each host's own hostname; Slurm's daemons' own /tmp
        tried = subprocess.run(["unshare", kind, "true"], capture_output=True, text=True, timeout=30)
        if tried.returncode != 0:
            return f"cannot make a namespace (unshare {kind}) here: {tried.stderr.strip()}"
    return None


class Hosts:
    """h1..hN, made by up() and removed by down() (also after a failed test: use as a context)."""

    def __init__(self, n: int = 3, read_bps: int | None = None):
        self.n, self.read_bps, self.throttles = n, read_bps, {}
        self.prefix = f"gdsbench-{os.getpid()}-"
        self.names = [f"h{i}" for i in range(1, n + 1)]
        self.folder = tempfile.mkdtemp(prefix="gdsbench-hosts-")
        self.nsrsh = os.path.join(self.folder, "nsrsh")

    def namespace(self, host: str) -> str:
        return self.prefix + host

    def address(self, host: str) -> str:
        return f"{SUBNET}.{self.names.index(host) + 1}"

    def __enter__(self) -> Hosts:
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> None:
        bridge = self.namespace("sw")
        _ip("netns", "add", bridge)
        _ip("-n", bridge, "link", "add", "br0", "type", "bridge")
        _ip("-n", bridge, "link", "set", "br0", "up")
        table = "127.0.0.1 localhost\n" + "".join(f"{self.address(h)} {h}\n" for h in self.names)
        for i, host in enumerate(self.names, 1):
            ns, veth = self.namespace(host), f"gv{os.getpid() % 100000}h{i}"  # a link name has 15 characters at most
            _ip("netns", "add", ns)
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth, "netns", bridge)
            _ip("-n", bridge, "link", "set", veth, "master", "br0")
            _ip("-n", bridge, "link", "set", veth, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            os.makedirs(f"/etc/netns/{ns}", exist_ok=True)
            with open(f"/etc/netns/{ns}/hosts", "w") as f:
                f.write(table)
            if self.read_bps:
                self.throttles[host] = Throttle(self.folder, self.read_bps, f"host-{host}")  # the disk under /tmp
        join = ""  # with read_bps: the command joins its host's blkio cgroup first (its children follow)
        if self.throttles:
            group = self.throttles[self.names[0]].group.replace(f"-{self.names[0]}-", "-$host-")
            # from the test process's mounts: `ip netns exec` (which runs this stand-in on h1) remounts /sys without cgroups
            join = f'nsenter --mount=/proc/{os.getpid()}/ns/mnt sh -c "echo $$ > {group}/cgroup.procs"'
        with open(self.nsrsh, "w") as f:  # Open MPI's launcher calls it as it would call ssh: [options] HOST COMMAND
            f.write(textwrap.dedent(f"""\
                #!/bin/sh
                # ssh stand-in for mpirun across the test's hosts (tests/hosts.py)
                while [ "${{1#-}}" != "$1" ]; do shift; done
                host=$1; shift
                {join}
                exec ip netns exec "${{{PREFIX_VARIABLE}}}$host" unshare --uts /bin/sh -c "hostname $host; $*"
                """))
        os.chmod(self.nsrsh, 0o755)

    def down(self) -> None:
        """Every process left in the hosts ended, then the hosts removed."""
        listed = _ip("netns", "list", check=False).stdout.split()
        ours = [ns for ns in listed if ns.startswith(self.prefix)]
        for ns in ours:
            for pid in _ip("netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        for ns in ours:
            _ip("netns", "del", ns, check=False)
            shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)
        for throttle in self.throttles.values():
            throttle.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def on(self, host: str, *command: str) -> list[str]:
        """The command line that runs `command` on host, under its own hostname."""
        line = ["ip", "netns", "exec", self.namespace(host), "unshare", "--uts", "/bin/sh", "-c",
                'hostname "$0"; exec "$@"', host, *command]
        return self.throttles[host].wrap(line) if host in self.throttles else line

    def env(self) -> dict:
        """The environment mpirun across these hosts needs: the ssh stand-in's prefix, this
        Python's bin first on PATH (the launcher starts its daemons by name on each host),
        Open MPI's consent to root and to more ranks than cores, and yielding waits."""
        return dict(os.environ, **{PREFIX_VARIABLE: self.prefix},
                    PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
                    OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                    OMPI_MCA_rmaps_base_oversubscribe="1",
                    # the hosts share this machine's cores, which no rank can see: wait by yielding, not spinning
                    OMPI_MCA_mpi_yield_when_idle="1")

    def only(self, *names: str) -> Hosts:
        """These hosts, with mpirun placing ranks on the named ones only (the others keep running)."""
        some = Hosts.__new__(Hosts)
        some.__dict__.update(self.__dict__, n=len(names), names=list(names))
        return some

    def mpirun(self, ranks_per_host: int, *command: str) -> list[str]:
        """mpirun, started on h1, placing ranks_per_host ranks on each host through the ssh stand-in."""
        hostfile = os.path.join(self.folder, "hostfile")
        with open(hostfile, "w") as f:
            f.write("".join(f"{h} slots={ranks_per_host}\n" for h in self.names))
        mpirun = os.path.join(os.path.dirname(sys.executable), "mpirun")
        return self.on(self.names[0], mpirun, "--hostfile", hostfile, "-np", str(ranks_per_host * self.n),
                       "--map-by", f"ppr:{ranks_per_host}:node", "--prtemca", "plm_ssh_agent", self.nsrsh,
                       "--mca", "btl_tcp_if_include", f"{SUBNET}.0/24", *command)


def servers_module():
    """benchmarks/servers.py, the real servers' one home (the tests start them as the benchmarks do)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
    import servers

    return servers


def serve_nfs3(hosts: Hosts, host: str, folder: str, work: str, timeout: float = 30) -> tuple[subprocess.Popen, str]:
    """nfs-ganesha on `host`, exporting folder read-write over NFSv3 with rpcbind beside it: NFSv3 finds
    its ports through the portmapper, which takes port 111 (of the host's own network) and a socket
    under /run (a /run of its own, in a mount namespace of its own). Both are in a process group of
    their own (stop_group ends them; so does the hosts' end). Returns (ganesha's process, the folder's
    URL, nfs://ADDRESS/FOLDER: a file's is that + /NAME?version=3)."""
    servers = servers_module()
    conf = os.path.join(work, "ganesha.conf")
    servers.ganesha_config(conf, folder, version=3, pseudo=folder, writable=True, loopback=False)
    exe = servers.ganesha_binary()
    serve = (f"mount -t tmpfs none /run && (rpcbind -w -f &) && while [ ! -S /run/rpcbind.sock ]; do sleep 0.05; "
             f"done && exec {exe} -F -f {conf} -L {work}/ganesha.log -p {work}/ganesha.pid -N NIV_WARN")
    with open(os.path.join(work, "ganesha-out.log"), "w") as log:
        server = subprocess.Popen(hosts.on(host, "unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
                                           serve), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    address = hosts.address(host)
    deadline = time.monotonic() + timeout
    while subprocess.run(hosts.on(host, "rpcinfo", "-t", address, "mountd", "3"), capture_output=True).returncode:
        if time.monotonic() > deadline:
            stop_group(server)
            raise RuntimeError(f"nfs-ganesha on {host} did not answer NFSv3 within {timeout:.0f} s; see {work}")
        time.sleep(0.1)
    return server, f"nfs://{address}{folder}"


def stop_group(server: subprocess.Popen) -> None:
    """A server started in a process group of its own, ended with everything it started."""
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.wait()


class Slurm:
    """Slurm on the hosts, as ../shared/hosts/README.md runs it: slurmctld on h1 and a slurmd on
    every host, without munge (auth/none), PMIx as the MPI plugin. Each daemon runs in its host's
    network namespace by nsenter (ip netns exec would remount /sys and hide the cgroups slurmd
    looks for) with a private /tmp (PMIx makes per-job folders there, which hosts sharing /tmp
    would collide on), `keep` (the test's folder) still visible."""

    def __init__(self, hosts: Hosts, keep: str):
        # what jobs must still see under their private /tmp: the tests' folder, this checkout and its
        # Python (either may itself live under /tmp, as a CI checkout does)
        self.hosts = hosts
        self.keep = [keep, os.path.dirname(os.path.dirname(os.path.abspath(__file__))), sys.prefix]
        self.folder = os.path.join(keep, "slurm")
        self.conf = os.path.join(self.folder, "slurm.conf")
        self.daemons: list[subprocess.Popen] = []

    @staticmethod
    def why_not() -> str | None:
        missing = [exe for exe in ("slurmctld", "slurmd", "srun", "sinfo", "nsenter") if shutil.which(exe) is None]
        return f"Slurm is not installed ({', '.join(missing)} missing; apt-get install slurmd slurmctld " \
               "slurm-client libpmix-dev)" if missing else None

    def node(self, host: str, *command: str) -> list[str]:
        """The command line that runs `command` on host as Slurm's daemons and jobs see it."""
        private = os.path.join(self.folder, "nodes", host, "tmp")
        os.makedirs(private, exist_ok=True)
        old = "/mnt/gdsbench-oldtmp"
        again = "".join(f"mkdir -p {path}; mount --bind {os.path.join(old, os.path.relpath(path, '/tmp'))} {path}; "
                        for path in sorted(set(self.keep)) if path.startswith("/tmp/"))
        script = (f'set -e; hostname "$0"; mkdir -p {old}; mount --bind /tmp {old}; mount --bind {private} /tmp; '
                  + again + 'exec "$@"')
        return ["nsenter", f"--net=/run/netns/{self.hosts.namespace(host)}", "unshare", "--uts", "--mount",
                "/bin/sh", "-c", script, host, *command]

    def env(self) -> dict:
        return dict(self.hosts.env(), SLURM_CONF=self.conf)

    def __enter__(self) -> Slurm:
        os.makedirs(os.path.join(self.folder, "log"), exist_ok=True)
        nodes = "".join(f"NodeName={h} NodeAddr={self.hosts.address(h)} CPUs=2 RealMemory=2000 State=UNKNOWN\n"
                        for h in self.hosts.names)
        d = self.folder
        with open(self.conf, "w") as f:
            f.write(textwrap.dedent(f"""\
                ClusterName=gdsbench
                SlurmctldHost={self.hosts.names[0]}({self.hosts.address(self.hosts.names[0])})
                SlurmctldPort=39817
                SlurmdPort=39818
                SlurmUser=root
                AuthType=auth/none
                CredType=cred/none
                StateSaveLocation={d}/state
                SlurmdSpoolDir={d}/spool-%n
                SlurmctldPidFile={d}/slurmctld.pid
                SlurmdPidFile={d}/slurmd-%n.pid
                SlurmctldLogFile={d}/log/slurmctld.log
                SlurmdLogFile={d}/log/slurmd-%n.log
                ProctrackType=proctrack/linuxproc
                TaskPlugin=task/none
                SelectType=select/cons_tres
                SelectTypeParameters=CR_Core
                MpiDefault=pmix
                ReturnToService=2
                JobAcctGatherType=jobacct_gather/none
                AccountingStorageType=accounting_storage/none
                SlurmdParameters=config_overrides
                """) + nodes + f"PartitionName=all Nodes={','.join(self.hosts.names)} Default=YES MaxTime=INFINITE "
                "State=UP\n")
        try:
            self._start(self.hosts.names[0], "slurmctld", "-D", "-i")
            for host in self.hosts.names:
                self._start(host, "slurmd", "-D", "-N", host)
            for _ in range(120):  # until every node is idle (a few seconds)
                out = subprocess.run(self.node(self.hosts.names[0], "sinfo", "-h", "-o", "%T %D"), env=self.env(),
                                     capture_output=True, text=True, timeout=30).stdout.split()
                if out == ["idle", str(self.hosts.n)]:
                    return self
                time.sleep(0.5)
            raise RuntimeError(f"Slurm's nodes did not become idle; see {d}/log")
        except BaseException:
            self.__exit__()
            raise

    def _start(self, host: str, *command: str) -> None:
        with open(os.path.join(self.folder, "log", f"{command[0]}-{host}.err"), "w") as err:
            self.daemons.append(subprocess.Popen(self.node(host, *command), env=self.env(),
                                                 stdout=subprocess.DEVNULL, stderr=err))

    def __exit__(self, *exc) -> None:
        for daemon in self.daemons:
            daemon.terminate()
        for daemon in self.daemons:
            try:
                daemon.wait(15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()

    def srun(self, nodes: int, tasks: int, *command: str) -> list[str]:
        """srun from the first host: tasks spread over nodes, started through PMIx."""
        return self.node(self.hosts.names[0], "srun", "-N", str(nodes), "-n", str(tasks), "--mpi=pmix", *command)


class SeaweedCluster:
    """SeaweedFS spread over the hosts as a cluster runs it: its master, filer and S3 gateway on the
    last host and a volume server on every host, each a process of its own stopped by its PID, so an
    object's chunks sit on whichever volume servers the master picked and a reader on any host
    fetches them across the hosts' links. S3 at `endpoint` (a host's address: reachable from the
    hosts, not from outside them) with benchmarks/servers.py's key, one empty bucket. Each host's
    volume server has a port of its own: SeaweedFS names its gRPC sockets in the shared /tmp by port."""

    MASTER, FILER, S3, VOLUME = 9333, 8888, 8333, 8081

    def __init__(self, hosts: Hosts, folder: str, bucket: str = "bucket"):
        self.hosts, self.folder, self.bucket = hosts, folder, bucket
        self.gateway = hosts.names[-1]
        self.endpoint = f"http://{hosts.address(self.gateway)}:{self.S3}"
        self.servers: list[subprocess.Popen] = []

    servers_module = staticmethod(servers_module)

    def __enter__(self) -> SeaweedCluster:
        servers = self.servers_module()
        weed, d, ip = servers.weed_binary(), self.folder, self.hosts.address(self.gateway)
        config = os.path.join(d, "s3.json")
        servers.seaweedfs_identities(config)
        try:
            self._start(self.gateway, "master", [("master", self.MASTER)], weed, "master", f"-ip={ip}", f"-ip.bind={ip}",
                        f"-port={self.MASTER}", f"-mdir={d}/master", "-volumeSizeLimitMB=64",
                        "-defaultReplication=000")
            for i, host in enumerate(self.hosts.names):
                address, port = self.hosts.address(host), self.VOLUME + i
                os.makedirs(f"{d}/volume-{host}", exist_ok=True)
                self._start(host, f"volume-{host}", [("volume", port)], weed, "volume", f"-ip={address}",
                            f"-ip.bind={address}", f"-port={port}", f"-dir={d}/volume-{host}", "-max=20",
                            f"-mserver={ip}:{self.MASTER}", "-preStopSeconds=1")
            self._until(f"every volume server registered with the master ({len(self.hosts.names)})",
                        lambda: self.volume_servers() == len(self.hosts.names))
            self._start(self.gateway, "filer", [("filer", self.FILER), ("s3", self.S3)], weed, "filer", f"-ip={ip}",
                        f"-ip.bind={ip}", f"-port={self.FILER}", f"-master={ip}:{self.MASTER}", f"-defaultStoreDir={d}",
                        "-s3", f"-s3.port={self.S3}", f"-s3.config={config}", f"-localSocket={d}/filer.sock",
                        f"-s3.localSocket={d}/s3.sock")
            # the S3 port answers before the filer behind it is ready: a signed bucket PUT is retried until it is
            self._until("the S3 gateway made the bucket",
                        lambda: self._on_gateway(*servers.make_bucket_argv(self.endpoint, self.bucket)) == "200")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        servers = self.servers_module()
        for proc in reversed(self.servers):
            servers.stop(proc, 5)

    def env(self) -> dict:
        """What a client on the hosts needs to reach the store: the key and the endpoint."""
        return dict(self.servers_module().S3_ENV, AWS_ENDPOINT_URL=self.endpoint)

    def volume_servers(self) -> int:
        """How many volume servers the master knows (its /dir/status topology)."""
        import json

        answer = self._on_gateway("curl", "-sS", "--max-time", "10",
                                  f"http://{self.hosts.address(self.gateway)}:{self.MASTER}/dir/status")
        try:
            topology = json.loads(answer)["Topology"]
        except (ValueError, KeyError):
            return 0
        return sum(len(rack.get("DataNodes") or []) for dc in topology.get("DataCenters") or []
                   for rack in dc.get("Racks") or [])

    def bytes_held(self) -> dict[str, int]:
        """Bytes of volume files each host's volume server keeps (its folder's .dat files)."""
        held = {}
        for host in self.hosts.names:
            folder = os.path.join(self.folder, f"volume-{host}")
            held[host] = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder) if f.endswith(".dat"))
        return held

    def _on_gateway(self, *command: str) -> str:
        return subprocess.run(self.hosts.on(self.gateway, *command), capture_output=True, text=True,
                              timeout=30).stdout.strip()

    def _start(self, host: str, name: str, grpc: list[tuple[str, int]], weed: str, *args: str) -> None:
        log = os.path.join(self.folder, f"{name}.log")
        with open(log, "w") as out:
            # in its folder: what a server keeps at a relative path (the filer's store) stays there
            proc = subprocess.Popen(self.hosts.on(host, weed, f"-logdir={self.folder}", *args), stdout=out,
                                    stderr=subprocess.STDOUT, cwd=self.folder)
        proc.name = name
        # each gRPC server's unix socket goes to /tmp, named by its kind and port + 10000: removed at its stop
        proc.leftovers = [f"/tmp/seaweedfs-{kind}-grpc-{port + 10000}.sock" for kind, port in grpc]
        self.servers.append(proc)

    def _until(self, what: str, done, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while not done():
            for proc in self.servers:
                if proc.poll() is not None:
                    raise RuntimeError(f"SeaweedFS's {proc.name} ended before {what}; see {self.folder}/{proc.name}.log")
            if time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS: not {what} within {seconds:.0f} s; see {self.folder}/*.log")
            time.sleep(0.5)
