"""The storage beneath a local target: its mount, the block device under it
and that device's PCIe placement, read from /proc and sysfs for the result
record and for placement checks."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

SYS_BLOCK = Path("/sys/dev/block")
PCI_ADDRESS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")  # domain:bus:device.function


@dataclass(frozen=True)
class Mount:
    mount_point: str
    fs_type: str
    source: str
    options: str


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


def sysfs_queue(device: tuple[int, int] | None, name: str) -> str | None:
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


def describe_local(mount: Mount | None, device: tuple[int, int] | None) -> dict:
    """Everything known about the filesystem and block device under a local target, for the result record."""
    info: dict = {}
    if mount:
        info.update(fs_type=mount.fs_type, mount_point=mount.mount_point, mount_source=mount.source,
                    mount_options=mount.options)
    disk = disk_dir(device)
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
