"""Pinning a process to CPUs: its own share of them, or the NUMA node of its
GPU or of the storage."""

from __future__ import annotations

import os

from gdsbench.job.spec import JobSpec
from gdsbench.system import gpu
from gdsbench.system.storage import disk_dir, pci_placement
from gdsbench.system.targets import Target


def pin_cpus(how: str, index: int, nparts: int, spec: JobSpec, target: Target | None) -> list[int] | None:
    """Restrict this process to CPUs: its own share of them (cores: disjoint
    sets while there are enough CPUs, else one each, round-robin), or the NUMA
    node of its GPU or, failing that, of the storage (numa). Returns the CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    if how == "cores":
        chosen = cpus[index::nparts] if nparts <= len(cpus) else [cpus[index % len(cpus)]]
    elif how == "numa":
        node = None
        if spec.real_gpu:
            for g in gpu.status()["gpus"]:
                if g["cuda_index"] == spec.gpu[0]:
                    node = g["numa_node"]
        if node is None and target is not None and target.device:
            disk = disk_dir(target.device)
            node = pci_placement(disk / "device")["numa_node"] if disk else None
        if node is None or node < 0:
            return None
        listed = _read_cpulist(f"/sys/devices/system/node/node{node}/cpulist")
        chosen = [c for c in cpus if c in listed] or cpus
    else:
        return None
    os.sched_setaffinity(0, chosen)
    return chosen


def _read_cpulist(path: str) -> set[int]:
    out: set[int] = set()
    try:
        text = open(path).read().strip()
    except OSError:
        return out
    for item in text.split(","):
        lo, _, hi = item.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out
