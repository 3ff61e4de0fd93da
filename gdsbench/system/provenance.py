"""Who made a figure: gdsbench's version and the commit it ran from, and every other tool's
version as that tool reports itself. Every record gdsbench writes and every benchmark table
carries this, so a number can be traced to the code and tools behind it.

    provenance.gdsbench()        {"version", "commit", "dirty"}; commit None and a "checkout" note
                                 where gdsbench does not run from a git checkout
    provenance.label()           "gdsbench 0.1.0 at 6463bf9e1c2d" (", sources changed" when dirty)
    provenance.tool_versions(n)  {"fio": "fio-3.33", ...} for the tools named, None for one absent

"dirty" means gdsbench's own sources (the package, native/, benchmarks/, scripts/, the build
files) differ from the commit; results written beside them do not count.

Where gdsbench runs from an unpacked copy without git (a GPU machine's copy of a checkout),
GDSBENCH_COMMIT names the commit and the record says the commit was given, not read.
"""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import sys

from gdsbench import __version__
from gdsbench.system.environment import distribution_version

RUN_TOOLS = ("python", "libcurl")  # beside gdsbench in every run: its interpreter, the curl engine's library
GPU_TOOLS = ("cuda", "cufile", "kvikio", "cupy")  # and in a run on a GPU
SOURCES = ("gdsbench", "native", "benchmarks", "scripts", "pyproject.toml", "CMakeLists.txt")
COMMIT_VARIABLE = "GDSBENCH_COMMIT"


def _git(root: str, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def gdsbench() -> dict:
    """gdsbench's version, the commit of the checkout it runs from, and whether its sources differ."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    root = os.path.dirname(package)
    top = _git(package, "rev-parse", "--show-toplevel")
    if top is not None and os.path.realpath(top.strip()) == os.path.realpath(root):
        commit = (_git(root, "rev-parse", "HEAD") or "").strip() or None
        changed = _git(root, "status", "--porcelain", "--", *SOURCES)
        return {"version": __version__, "commit": commit, "dirty": None if changed is None else bool(changed.strip())}
    given = os.environ.get(COMMIT_VARIABLE, "").strip()
    if given:
        return {"version": __version__, "commit": given, "dirty": None, "checkout": f"not a checkout; {COMMIT_VARIABLE}"}
    return {"version": __version__, "commit": None, "dirty": None, "checkout": "not a checkout"}


def label(made: dict | None = None) -> str:
    """One line for a page or a table: 'gdsbench 0.1.0 at 6463bf9e1c2d' and how it is known."""
    made = made or gdsbench()
    if not made.get("commit"):
        return f"gdsbench {made.get('version', '?')} ({made.get('checkout', 'commit unknown')})"
    text = f"gdsbench {made.get('version', '?')} at {made['commit'][:12]}"
    if made.get("dirty"):
        text += " with its sources changed"
    elif made.get("checkout"):
        text += f" ({made['checkout']})"
    if made.get("changed_during_run"):
        text += f", then {label(made['changed_during_run'])} before it ended (not all of it ran the first)"
    return text


# ---- other tools, each as it reports itself ----

def _first_line(command: list[str]) -> str | None:
    """The first line a command prints of itself; found beside this Python first (a venv's rclone, mpirun)."""
    beside = os.path.join(os.path.dirname(sys.executable), command[0])
    if os.access(beside, os.X_OK):
        command = [beside, *command[1:]]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (out.stdout.strip() or out.stderr.strip()).splitlines()
    return text[0].strip() if out.returncode == 0 and text else None


def _libcurl() -> str | None:
    """The libcurl gdsbench's curl engine links, as curl_version() says it."""
    try:
        lib = ctypes.CDLL("libcurl.so.4")
    except OSError:
        return None
    lib.curl_version.restype = ctypes.c_char_p
    return lib.curl_version().decode()


def _cuda() -> str | None:
    """The NVIDIA driver and the CUDA runtime and driver API gdsbench loads; None where none loads."""
    from gdsbench.system import gpu  # loads the native module: only when a GPU version is asked for

    driver = gpu.nvidia_driver_version()
    native = gpu.status()["cuda"]
    if not driver and native.get("cudart_error"):
        return None
    return (f"driver {driver or '?'}, CUDA runtime {native.get('runtime_version')}, "
            f"driver API {native.get('driver_version')}")


def _cufile() -> str | None:
    from gdsbench.system import gpu

    native = gpu.status()["cuda"]
    path = native.get("cufile_path")
    if not path:
        return None
    return f"{os.path.realpath(path)} (nvidia-fs as cuFile sees it: {native.get('nvfs_version')})"


# name -> how to ask it. A tool a benchmark runs from elsewhere (DLIO in a side venv) passes
# its own command to tool_versions.
TOOLS = {
    "python": lambda: f"Python {sys.version.split()[0]}",
    "fio": lambda: _first_line(["fio", "--version"]),
    "curl": lambda: _first_line(["curl", "--version"]),
    "libcurl": _libcurl,
    "nginx": lambda: _first_line(["nginx", "-v"]),
    "rclone": lambda: _first_line(["rclone", "version"]),
    "vsftpd": lambda: _first_line(["dpkg-query", "-W", "-f=vsftpd ${Version}", "vsftpd"]),  # -v writes to stdin
    "nfs-ganesha": lambda: _first_line(["dpkg-query", "-W", "-f=nfs-ganesha ${Version}", "nfs-ganesha"]),
    "libnfs": lambda: _first_line(["dpkg-query", "-W", "-f=libnfs ${Version}", "libnfs13"]),  # also nfs-cat's
    "samba": lambda: _first_line(["dpkg-query", "-W", "-f=samba ${Version}", "samba"]),  # smbd, smbclient's
    "seaweedfs": lambda: _first_line(["weed", "version"]),
    "s5cmd": lambda: _first_line(["s5cmd", "version"]),
    "obstore": lambda: distribution_version("obstore"),
    "s3torchconnector": lambda: distribution_version("s3torchconnectorclient"),
    "boto3": lambda: distribution_version("boto3"),
    "dlio": lambda: distribution_version("dlio-benchmark", "dlio_benchmark"),
    "kvikio": lambda: distribution_version("kvikio-cu13", "kvikio-cu12", "kvikio"),
    "cupy": lambda: distribution_version("cupy-cuda13x", "cupy-cuda12x", "cupy"),
    "pytest-benchmark": lambda: distribution_version("pytest-benchmark"),
    "mpi": lambda: _first_line(["mpirun", "--version"]),
    "slurm": lambda: _first_line(["srun", "--version"]),
    "cuda": _cuda,
    "cufile": _cufile,
}


def tool_versions(names, commands: dict[str, list[str]] | None = None) -> dict[str, str | None]:
    """Each named tool's version as it reports itself, None where it is not here. `commands`
    gives a tool's own command where it runs from elsewhere (["/side/venv/bin/dlio", "--version"])."""
    commands = commands or {}
    out = {}
    for name in names:
        if name in commands:
            out[name] = _first_line(commands[name])
        elif name in TOOLS:
            try:
                out[name] = TOOLS[name]()
            except Exception as e:  # a version that cannot be read is recorded as such, never fatal
                out[name] = f"unreadable: {e}"
        else:
            raise KeyError(f"provenance: no way known to ask {name!r} its version; pass its command")
    return out


def record(tools=(), commands: dict[str, list[str]] | None = None) -> dict:
    """The provenance block of a record: gdsbench's and the named tools'."""
    return {"gdsbench": gdsbench(), "tools": tool_versions(tools, commands)}
