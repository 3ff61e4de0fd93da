"""The path a GPU job's bytes really took, in words, with its evidence:
cuFile's own per-GPU counters (nvidia-fs, P2PDMA, POSIX) where this process
served the run, nvidia-fs's counters where they were read, kvikio's
per-backend counts, or the platform where only it can tell; and whether the GPU and the storage
sit on one NUMA node. The labels never call a read GPUDirect that did not
take that path."""

from __future__ import annotations

import os

from gdsbench.job.spec import ENGINE_INFO, JobSpec, caching
from gdsbench.system import cufile_stats, gpu, nvfs
from gdsbench.system.targets import Target, is_local

SIMULATED = "SIMULATED device (CPU stand-in, not a GPU)"

# How a local file's bytes met the page cache (spec.caching), as a data path says it
PATH_WORDS = {"O_DIRECT": "O_DIRECT", "buffered": "page-cache", "uncached": "uncached page-cache"}
GPU_MEMORY_WORDS = {"vmm": "from cuMemCreate, mapped by cuMemMap (VMM)"}


def cufile_serves(spec: JobSpec) -> bool:
    """Whether cuFile serves this job's reads on a real GPU: then nvidia-fs's counters,
    read around the run (system/nvfs.py), are the evidence of the path they took."""
    return spec.real_gpu and spec.mode_declaration.path_from != "engine"


def cufile_counts_here(spec: JobSpec, in_this_process: bool) -> bool:
    """Whether cuFile's own counters (system/cufile_stats.py), which count in the process that calls
    cuFile, can show this job's path: gdsbench's cuFile engines serving it in this process (not
    --procs workers, MPI ranks or kvikio, whose libcufile is its own)."""
    return in_this_process and cufile_serves(spec) and spec.mode_declaration.path_from == "cufile-platform"


def asks_p2pdma(info: dict) -> str | None:
    """The cufile.json setting that asks cuFile for PCI P2PDMA (GPUDirect by the kernel's peer-to-peer
    DMA, CUDA 12.8 on, no nvidia-fs needed), or None where none does."""
    config = info["cufile_json"]
    return next((key for key, field in (("properties.use_pci_p2pdma", "use_pci_p2pdma"),
                                        ("block.nvme.use_pci_p2pdma", "nvme_p2pdma")) if config.get(field) is True), None)


def p2pdma_possible(info: dict) -> bool:
    """Whether cuFile may read by PCI P2PDMA here: cufile.json asks for it and cuFile reports it
    supported (its driver properties). nvidia-fs's counters never show such reads."""
    return asks_p2pdma(info) is not None and bool(info.get("cuda", {}).get("p2pdma_supported"))


def compat_forced(info: dict) -> str | None:
    """Why cuFile cannot read GPUDirect here whatever the file (neither nvidia-fs nor PCI P2PDMA,
    compat mode forced), or None where it may."""
    if not info["nvidia_fs"]["loaded"] and not p2pdma_possible(info):
        asked = asks_p2pdma(info)
        p2pdma = (f"cuFile does not report PCI P2PDMA supported, though cufile.json asks for it ({asked})" if asked
                  else "cufile.json does not ask for PCI P2PDMA (use_pci_p2pdma)")
        return f"nvidia-fs is not loaded and {p2pdma}, so cuFile serves reads in its compatibility mode (POSIX + bounce)"
    if os.environ.get("CUFILE_FORCE_COMPAT_MODE", "").lower() in ("1", "true") or info["cufile_json"].get("force_compat"):
        return "cuFile's compatibility mode is forced (CUFILE_FORCE_COMPAT_MODE or cufile.json)"
    return None


def gds_is_direct(info: dict, target: Target | None) -> tuple[bool, str]:
    """Whether cuFile reads of target may go GPUDirect, inferred from the platform, and why
    (or why not): nvidia-fs loaded, no forced compatibility mode, ext4 or xfs on an NVMe
    device. Only nvidia-fs's counters (system/nvfs.py) show that a read did."""
    forced = compat_forced(info)
    if forced:
        return False, forced
    storage = target.describe() if target is not None else {}
    local = target is not None and target.mount is not None and target.mount.fs_type in ("ext4", "xfs")
    nvme = storage.get("driver") == "nvme" or str(storage.get("block_device") or "").startswith("nvme")
    if not (local and nvme):
        where = target.where if target else "this target"
        return False, (f"cuFile on {where} ({storage.get('block_device') or 'no block device'}) likely uses its "
                       "compatibility mode; GPUDirect is expected here only for ext4/xfs on NVMe")
    fs = info["nvidia_fs"]
    if not fs["loaded"]:  # p2pdma_possible: compat_forced said so
        return True, (f"PCI P2PDMA ({asks_p2pdma(info)} in cufile.json, supported as cuFile reports; nvidia-fs not "
                      f"loaded, so its counters cannot show the path), {target.where} on {storage.get('block_device')}")
    return True, f"nvidia-fs {fs['version'] or ''} loaded, {target.where} on {storage.get('block_device')}".strip()


def _through_cufile(info: dict, target: Target | None, seen: nvfs.Observation | None,
                    counted: cufile_stats.Observation | None = None) -> str:
    """How reads that cuFile served went: GPUDirect observed in cuFile's own counters or in
    nvidia-fs's, or its compatibility mode (certain, or observed), or GPUDirect inferred from the
    platform alone. Where cuFile's counters were read and did not decide, what they showed (or why
    they could not be read) follows whatever did."""
    if counted is not None and counted.direct:
        return f"{nvfs.OBSERVED}: {counted.evidence()}"
    if counted is not None and counted.direct is False:
        return f"in cuFile's COMPATIBILITY mode for some or all requests (not GPUDirect; observed: {counted.evidence()})"
    label = _through_cufile_platform(info, target, seen)
    return f"{label}; {counted.evidence()}" if counted is not None else label


def _through_cufile_platform(info: dict, target: Target | None, seen: nvfs.Observation | None) -> str:
    """How cuFile's reads went as nvidia-fs's counters and the platform tell, cuFile's own counters aside."""
    forced = compat_forced(info)
    if forced:
        return f"in cuFile's COMPATIBILITY mode (not GPUDirect: {forced})"
    if seen is not None and seen.direct:
        return f"{nvfs.OBSERVED}: {seen.evidence()}"
    if seen is not None and seen.direct is False and p2pdma_possible(info):  # P2PDMA's reads are not counted there
        return (f"not observed: PCI P2PDMA, which nvidia-fs does not count, or cuFile's compatibility mode "
                f"({seen.evidence()})")
    if seen is not None and seen.direct is False:
        return f"in cuFile's COMPATIBILITY mode for some or all reads (not GPUDirect; observed: {seen.evidence()})"
    direct, why = gds_is_direct(info, target)
    evidence = seen.evidence() if seen is not None else "nvidia-fs's counters were not read"
    if direct:
        return f"{nvfs.INFERRED}: {why}; {evidence}"
    return f"likely in cuFile's COMPATIBILITY mode (not GPUDirect, inferred: {why}; {evidence})"


def data_path(spec: JobSpec, target: Target | None, kvikio_path: str | None = None,
              seen: nvfs.Observation | None = None, counted: cufile_stats.Observation | None = None) -> str:
    """What the bytes of this (resolved) job really pass through, in words. `seen` is what
    nvidia-fs counted during the run, for the modes that read through cuFile; `counted`, what
    cuFile itself counted, where it served the run in this process."""
    # cuFile's side of the machine, read once, where cuFile (or kvikio through it) moves the bytes
    info = gpu.status() if spec.mode_declaration.path_from != "engine" and not spec.simulated else None
    path = _data_path(spec, target, kvikio_path, seen, info, counted)
    buffers = _gpu_buffers(spec, info)
    return f"{path}; GPU buffers {buffers}" if buffers else path


def _gpu_buffers(spec: JobSpec, info: dict | None) -> str:
    """How the GPU buffers were made (where not by cudaMalloc) and, where cuFile may move them
    GPUDirect, whether they were registered with it: unregistered, cuFile stages each request
    through registered buffers of its own (in its compatibility mode registering changes nothing)."""
    words = [GPU_MEMORY_WORDS[spec.gpu_memory]] if spec.gpu_memory != "cudamalloc" else []
    if spec.mode_declaration.path_from == "cufile-platform" and info is not None and not compat_forced(info):
        registered = ENGINE_INFO[spec.engine]["registers_gpu_buffers"] or getattr(spec, "gds_register", False)
        words.append("registered with cuFileBufRegister" if registered else
                     "not registered (cuFile stages each request through registered buffers of its own)")
    return ", ".join(words)


def _data_path(spec: JobSpec, target: Target | None, kvikio_path: str | None, seen: nvfs.Observation | None,
               info: dict | None, counted: cufile_stats.Observation | None) -> str:
    mode = spec.mode_declaration
    sim = f" [{SIMULATED}]" if spec.simulated and mode.gpu else ""
    moves = "writes from GPU memory" if spec.direction == "write" else "reads into GPU memory"
    if spec.simulated and mode.stand_ins:
        stood_in = " or ".join(mode.stood_in_by(spec.engine, ENGINE_INFO))
        return f"{spec.engine} {moves.replace('GPU', 'simulated device')}, standing in for {stood_in}{sim}"
    if mode.path_from == "cufile-platform":  # nvidia-fs, cufile.json and the storage decide
        return f"cuFile {moves}, {_through_cufile(info, target, seen, counted)}"
    if mode.path_from == "kvikio-statistics":  # what kvikio counted per backend, then what nvidia-fs counted
        if kvikio_path and ("NOT GPUDirect" in kvikio_path or kvikio_path.startswith("MIXED")):
            return f"kvikio {moves} ({kvikio_path})"
        return f"kvikio {moves} ({kvikio_path}), {_through_cufile(info, target, seen)}"
    if not spec.opens_target:
        read = f"{spec.engine} engine: no reads (the harness's own floor)"
        return f"{read}; copies from pinned host memory to GPU memory{sim}" if mode.staged else read
    if target is not None and not is_local(target):  # what the server answered over, from the target's record
        ends = mode.write_source if spec.direction == "write" else mode.landing
        return f"{target.requests(spec.engine, spec.direction)} {ends}{sim}"
    cache = PATH_WORDS[caching(spec.uses_o_direct, spec.uncached)]
    if spec.direction == "write":
        return f"{spec.engine} {cache} writes {mode.write_source}{sim}"
    return f"{spec.engine} {cache} reads {mode.landing}{sim}"


def placement_warnings(spec: JobSpec, storage: dict | None, gpus: list[dict]) -> list[str]:
    """Warn when a GPU the job uses and the storage device sit on different NUMA nodes."""
    storage_node = (storage or {}).get("numa_node")
    if storage_node is None or storage_node < 0:
        return []
    used = set(spec.gpu)
    return [
        f"GPU {g['cuda_index']} ({g['pci_address']}) is on NUMA node {g['numa_node']}, the storage "
        f"({storage.get('block_device')}) on node {storage_node}: cross-socket transfers can lose a large share of bandwidth"
        for g in gpus
        if g["cuda_index"] in used and g.get("numa_node") is not None and g["numa_node"] >= 0
        and g["numa_node"] != storage_node
    ]
