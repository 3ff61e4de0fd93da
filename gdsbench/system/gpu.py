"""GPUs, CUDA, cuFile and GPUDirect Storage on this machine: loading the
libraries (from the nvidia-* wheels too), what sysfs, procfs and the loaded
libraries say is here, and whether a job's mode can run. (The path a GPU
job's bytes really took is told by system/data_path.py.)

Nothing here needs a GPU to import or run: each fact is read from sysfs,
procfs or the run-time loaded libraries and reported as missing, with the
reason, where it is absent.
"""

from __future__ import annotations

import glob
import json
import os
import re
import site
import sys
from pathlib import Path

from gdsbench import _native
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import JobSpec
from gdsbench.system.environment import distribution_version
from gdsbench.system.storage import pci_placement, read_sysfs

NO_GPU = "no NVIDIA GPU on the PCI bus"  # why every GPU mode, check and test is skipped on a machine without one
PCI_DEVICES = Path("/sys/bus/pci/devices")
NVIDIA_VENDOR = "0x10de"

_configured = False


def _wheel_libraries(pattern: str) -> list[str]:
    """Copies of a library inside installed nvidia-* wheels (nvidia/*/lib/)."""
    roots = site.getsitepackages() + [site.getusersitepackages()] + sys.path
    found: list[str] = []
    for root in dict.fromkeys(roots):
        for path in sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib", pattern)), reverse=True):
            if path not in found:
                found.append(path)
    return found


def configure_libraries() -> None:
    """Let the native shim find libcudart and libcufile in the nvidia-* wheels too."""
    global _configured
    if not _configured:
        _native.set_library_candidates("cudart", _wheel_libraries("libcudart.so*"))
        _native.set_library_candidates("cufile", _wheel_libraries("libcufile.so*"))
        _configured = True


def pci_gpus() -> list[dict]:
    """NVIDIA GPUs on the PCI bus (with or without a working driver or CUDA)."""
    gpus = []
    for dev in sorted(PCI_DEVICES.glob("*")) if PCI_DEVICES.exists() else []:
        if read_sysfs(dev / "vendor") != NVIDIA_VENDOR or not (read_sysfs(dev / "class") or "").startswith("0x03"):
            continue
        info = read_sysfs(Path("/proc/driver/nvidia/gpus") / dev.name / "information") or ""
        model = re.search(r"^Model:\s*(.+)$", info, re.M)
        gpus.append({"model": model.group(1).strip() if model else None, **pci_placement(dev)})
    return gpus


def nvidia_driver_version() -> str | None:
    text = read_sysfs(Path("/proc/driver/nvidia/version")) or ""
    m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", text)
    return m.group(1) if m else None


def nvidia_fs() -> dict:
    """Whether the nvidia-fs kernel module (needed for GPUDirect Storage) is loaded."""
    loaded = Path("/sys/module/nvidia_fs").exists()
    version = read_sysfs(Path("/sys/module/nvidia_fs/version")) or read_sysfs(Path("/proc/driver/nvidia-fs/version"))
    return {"loaded": loaded, "version": version}


def cufile_config() -> dict:
    """cufile.json as cuFile will read it ($CUFILE_ENV_PATH_JSON or /etc/cufile.json):
    its compat-mode settings, whether it asks for PCI P2PDMA (GPUDirect through the kernel's
    peer-to-peer DMA, which needs no nvidia-fs: properties.use_pci_p2pdma, and NVMe's own
    block.nvme.use_pci_p2pdma), the line each is set on, and any parse error."""
    path = os.environ.get("CUFILE_ENV_PATH_JSON", "/etc/cufile.json")
    text = read_sysfs(Path(path))
    config = {"path": path, "found": text is not None, "allow_compat_mode": None, "force_compat": None,
              "use_pci_p2pdma": None, "nvme_p2pdma": None, "error": None, "lines": {}}
    if text is None:
        return config
    # cufile.json allows // comments; blank them out, keeping the line numbers
    text = re.sub(r"(?m)^\s*//.*$|\s//[^\"\n]*$", "", text)
    try:
        whole = json.loads(text)
        properties = whole.get("properties", {})
        config["nvme_p2pdma"] = whole.get("block", {}).get("nvme", {}).get("use_pci_p2pdma")
    except (json.JSONDecodeError, AttributeError) as e:
        config["error"] = f"not valid JSON: {e}"
        return config
    for key, field in (("allow_compat_mode", "allow_compat_mode"), ("force_compat_mode", "force_compat"),
                       ("use_pci_p2pdma", "use_pci_p2pdma")):
        config[field] = properties.get(key)
        for number, line in enumerate(text.splitlines(), start=1):
            if f'"{key}"' in line:
                config["lines"].setdefault(key, number)  # the first: properties, before block.nvme
    return config


def status() -> dict:
    """Everything gdsbench knows about GPUs here, for `gdsbench info` and results."""
    configure_libraries()
    native = _native.gpu_status()
    cuda_by_bus = {d["pci_bus_id"].lower(): d for d in native["devices"]}
    gpus = pci_gpus()
    for g in gpus:
        cuda = cuda_by_bus.get((g["pci_address"] or "").lower())
        g["cuda_index"] = cuda["index"] if cuda else None
        g["memory_bytes"] = cuda["total_bytes"] if cuda else None
    return {
        "gpus": gpus,
        "driver_version": nvidia_driver_version(),
        "cuda": native,
        "nvidia_fs": nvidia_fs(),
        "cufile_json": cufile_config(),
        "cupy": distribution_version("cupy-cuda13x", "cupy-cuda12x", "cupy"),
        "kvikio": distribution_version("kvikio-cu13", "kvikio-cu12", "kvikio"),
    }


def why_no_gpu() -> str | None:
    """Why CUDA cannot be used here, in one line, or None where it can: on a machine with no
    NVIDIA device on the PCI bus, that plain fact, not the CUDA runtime's error about drivers."""
    configure_libraries()
    error = _native.gpu_status()["cudart_error"]
    if error and not pci_gpus():
        return NO_GPU
    return error or None


def require(spec: JobSpec) -> None:
    """UsageError, one line naming what is missing, unless spec's mode can run here."""
    mode = spec.mode_declaration
    if not mode.gpu:
        return
    if spec.simulated:  # job/spec.py refuses modes the simulation cannot stand in for
        return
    missing = why_no_gpu()
    if missing:
        raise UsageError(f"--mode {spec.mode} needs a GPU: {missing}")
    count = len(_native.gpu_status()["devices"])
    for index in spec.gpu:
        if index >= count:
            raise UsageError(f"--gpu {','.join(map(str, spec.gpu))}: this machine has {count} GPU(s), "
                             f"numbered 0 to {count - 1}")
    for module, package in mode.requires:
        if not importable(module):
            raise UsageError(f"--mode {spec.mode} needs {module}: pip install gdsbench[cu13] (or {package})")
    if spec.verify and not importable("cupy"):
        raise UsageError(f"--verify in --mode {spec.mode} checks GPU memory with cupy: pip install cupy-cuda13x")


def importable(module: str) -> bool:
    """Whether module imports here (a missing optional dependency is not an error until it is used)."""
    try:
        __import__(module)
    except ImportError:
        return False
    return True
