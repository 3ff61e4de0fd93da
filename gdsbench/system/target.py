"""What a target path is, whether gdsbench may read it the way a job asks, and
the storage beneath it (mount, block device, PCIe placement) for the record.

Checks here raise UsageError with the parameter and the fix; the native core
then opens the target read-only. Nothing in gdsbench ever writes to a target.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from gdsbench import _native
from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_size

SYS_BLOCK = Path("/sys/dev/block")
PCI_ADDRESS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")  # domain:bus:device.function


@dataclass(frozen=True)
class Mount:
    mount_point: str
    fs_type: str
    source: str
    options: str


@dataclass(frozen=True)
class Target:
    path: str
    kind: str  # "file" or "block"
    size: int  # bytes
    device: tuple[int, int] | None  # (major, minor) of the block device holding the data, if any
    mount: Mount | None  # for files

    @property
    def where(self) -> str:
        """'ext4 on /' or 'block device' for messages."""
        if self.mount:
            return f"{self.mount.fs_type} at {self.mount.mount_point}"
        return "block device"


def inspect(path: str) -> Target:
    """Look at `path` without writing anything; UsageError if it cannot be a target."""
    if not path:
        raise UsageError("PATH: no target given; name a file or block device, or create one with `gdsbench prepare FILE`")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UsageError(f"PATH {path}: does not exist; create a test file with `gdsbench prepare {path} --size 1G`") from None
    except PermissionError:
        raise UsageError(f"PATH {path}: permission denied; run as a user who may read it") from None
    except OSError as e:
        raise UsageError(f"PATH {path}: cannot stat: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"PATH {path}: is a directory; give a file inside it "
                         f"(e.g. `gdsbench prepare {path}/test.dat --size 1G`)")
    if stat.S_ISREG(st.st_mode):
        kind, size, dev = "file", st.st_size, st.st_dev
    elif stat.S_ISBLK(st.st_mode):
        kind, size, dev = "block", 0, st.st_rdev
    else:
        raise UsageError(f"PATH {path}: is not a regular file or block device")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except PermissionError:
        raise UsageError(f"PATH {path}: permission denied; run as a user who may read it") from None
    except OSError as e:
        raise UsageError(f"PATH {path}: cannot open for reading: {e.strerror}") from None
    try:
        if kind == "block":
            size = os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)
    device = (os.major(dev), os.minor(dev))
    has_sysfs = (SYS_BLOCK / f"{device[0]}:{device[1]}").exists()
    return Target(
        path=path,
        kind=kind,
        size=size,
        device=device if has_sysfs else None,
        mount=find_mount(path, st.st_dev) if kind == "file" else None,
    )


def direct_alignment(target: Target) -> int:
    """Byte alignment O_DIRECT needs for offsets and lengths on this target."""
    _, offset_align = _native.dio_alignment(target.path)
    if offset_align:
        return offset_align
    lbs = _sysfs_queue(target.device, "logical_block_size")
    return int(lbs) if lbs else 512


def check_direct(target: Target, bs: int, offset: int) -> None:
    """UsageError unless O_DIRECT reads of `bs` at `offset` can work on target."""
    try:
        fd = os.open(target.path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.EINVAL:
            raise UsageError(f"--direct: {target.where} refuses O_DIRECT for {target.path}; use --buffered") from None
        raise UsageError(f"--direct: cannot open {target.path} with O_DIRECT: {e.strerror}") from None
    os.close(fd)
    align = direct_alignment(target)
    for flag, value in (("--bs", bs), ("--offset", offset)):
        if value % align:
            raise UsageError(
                f"{flag} {value}: O_DIRECT on {target.path} needs multiples of its logical block size "
                f"({format_size(align)}); use a multiple of {align} or --buffered"
            )


# ---- the storage beneath a target, for results and placement checks ----


def find_mount(path: str, st_dev: int) -> Mount | None:
    """The mount holding `path`: same device number, longest mount-point prefix."""
    want = f"{os.major(st_dev)}:{os.minor(st_dev)}"
    real = os.path.realpath(path)
    best: Mount | None = None
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or len(tail) < 2 or fields[2] != want:
            continue
        point = fields[4].replace("\\040", " ")
        if not (real == point or real.startswith(point.rstrip("/") + "/")):
            continue
        if best is None or len(point) > len(best.mount_point):
            options = fields[5] + ("," + tail[2] if len(tail) > 2 else "")
            best = Mount(mount_point=point, fs_type=tail[0], source=tail[1], options=options)
    return best


def read_sysfs(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def disk_dir(device: tuple[int, int] | None) -> Path | None:
    """sysfs directory of the whole disk holding `device` (a partition's parent)."""
    if device is None:
        return None
    d = (SYS_BLOCK / f"{device[0]}:{device[1]}").resolve()
    if (d / "partition").exists():
        d = d.parent
    return d if d.exists() else None


def _sysfs_queue(device: tuple[int, int] | None, name: str) -> str | None:
    d = disk_dir(device)
    return read_sysfs(d / "queue" / name) if d else None


def pci_placement(sysfs_device: Path) -> dict:
    """NUMA node, PCI address and PCIe link of the PCI device at or above a sysfs path."""
    d = sysfs_device.resolve()
    while d != d.parent:
        if (d / "subsystem").resolve().name == "pci":
            numa = read_sysfs(d / "numa_node")
            return {
                "pci_address": d.name,
                "numa_node": int(numa) if numa not in (None, "") else None,
                "pcie_link_speed": read_sysfs(d / "current_link_speed"),
                "pcie_link_width": read_sysfs(d / "current_link_width"),
                "pcie_max_link_speed": read_sysfs(d / "max_link_speed"),
                "pcie_max_link_width": read_sysfs(d / "max_link_width"),
            }
        d = d.parent
    return {"pci_address": None, "numa_node": None, "pcie_link_speed": None, "pcie_link_width": None,
            "pcie_max_link_speed": None, "pcie_max_link_width": None}


def describe(target: Target) -> dict:
    """Everything known about the storage under a target, for the result record."""
    info: dict = {"path": target.path, "kind": target.kind, "size_bytes": target.size}
    if target.mount:
        m = target.mount
        info.update(fs_type=m.fs_type, mount_point=m.mount_point, mount_source=m.source, mount_options=m.options)
    disk = disk_dir(target.device)
    info["block_device"] = disk.name if disk else None
    if disk is None:
        return info
    dev = disk / "device"
    for key, path in (
        ("model", dev / "model"),
        ("vendor", dev / "vendor"),
        ("rotational", disk / "queue" / "rotational"),
        ("scheduler", disk / "queue" / "scheduler"),
        ("nr_requests", disk / "queue" / "nr_requests"),
        ("read_ahead_kb", disk / "queue" / "read_ahead_kb"),
        ("max_sectors_kb", disk / "queue" / "max_sectors_kb"),
        ("logical_block_size", disk / "queue" / "logical_block_size"),
        ("physical_block_size", disk / "queue" / "physical_block_size"),
    ):
        info[key] = read_sysfs(path)
    if info["scheduler"] and "[" in info["scheduler"]:
        info["scheduler"] = info["scheduler"].split("[", 1)[1].split("]", 1)[0]
    if info["rotational"] is not None:
        info["rotational"] = info["rotational"] == "1"
    driver = (dev / "driver").resolve() if (dev / "driver").exists() else None
    info["driver"] = driver.name if driver else None
    if dev.exists():
        info.update(pci_placement(dev))
    return info
