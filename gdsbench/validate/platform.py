"""The platform checks `gdscheck -p` makes, read from sysfs, procfs and the
libraries themselves (never by parsing gdscheck): driver, CUDA, cuFile,
nvidia-fs, cufile.json, IOMMU, ACS, NUMA, PCIe links, the filesystem and
O_DIRECT. A check that needs a GPU is SKIP, with the reason, where there is none.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from gdsbench.job.errors import UsageError
from gdsbench.system import gpu_path
from gdsbench.system.gpu import NO_GPU
from gdsbench.system.storage import PCI_ADDRESS, read_sysfs
from gdsbench.system.targets import Target, is_local
from gdsbench.validate.checks import FAIL, INFO, PASS, WARN, Check, skip
from gdsbench.validate.profile import ANY_NODE, PCIE_GTS, Node

PCI_DEVICES = Path("/sys/bus/pci/devices")
# Filesystems cuFile reads GPUDirect (NVIDIA GDS documentation, "supported file systems")
GDS_FILESYSTEMS = ("ext4", "xfs", "lustre", "gpfs", "wekafs", "beegfs", "nfs", "nfs4", "exascaler", "ddnfs")
ACS_CAP_ID = 0x000D
ACS_REDIRECT = {2: "P2P Request Redirect", 3: "P2P Completion Redirect", 6: "Direct Translated P2P"}


class Facts:
    """What the platform checks read once: gpu.status() and the target's storage; and what
    the profile says the node must have."""

    def __init__(self, status: dict, target: Target | None, require_gds: bool, node: Node = ANY_NODE):
        self.status, self.target, self.require_gds, self.node = status, target, require_gds, node
        self.gpus = status["gpus"]
        self.cuda = status["cuda"]
        self.storage = target.describe() if target is not None else {}

    def gds_status(self) -> str:
        """Where a GDS shortfall is a FAIL (the profile requires GDS) and where a WARN."""
        return FAIL if self.require_gds else WARN


def checks(facts: Facts) -> list[Check]:
    """Every platform check but the GPU's PCIe link (read under load: see gpu_links)."""
    return [driver(facts), gpus_visible(facts), cuda_runtime(facts), cufile_library(facts), nvidia_fs(facts),
            cufile_json(facts),
            iommu(facts), acs(facts), numa(facts), storage_link(facts), filesystem(facts), o_direct(facts)]


def driver(f: Facts) -> Check:
    name = "platform.nvidia_driver"
    if not f.gpus:
        return skip(name, NO_GPU, evidence=f"{PCI_DEVICES}/*/vendor: none is {'0x10de'} with a display class")
    models = ", ".join(sorted({g["model"] or "NVIDIA GPU" for g in f.gpus}))
    version = f.status["driver_version"]
    if not version:
        return Check(name, FAIL, f"{len(f.gpus)} GPU(s) ({models}), no driver loaded",
                     evidence="/proc/driver/nvidia/version: missing", fix="install and load the NVIDIA driver (modprobe nvidia)")
    return Check(name, PASS, f"driver {version}; {len(f.gpus)} GPU(s): {models}", threshold="a driver loaded",
                 evidence="/proc/driver/nvidia/version")


def gpus_visible(f: Facts) -> Check:
    """Every NVIDIA GPU on the PCI bus must be visible to CUDA, and the node must have what the
    profile's [node] says: a GPU that fell off the bus is a FAIL, as gds-diag and DCGM have it."""
    name = "platform.gpus"
    need = f.node
    wants = [f"at least {need.gpus} visible to CUDA"] if need.gpus else []
    wants += [f"model {' or '.join(need.gpu_models)}"] if need.gpu_models else []
    threshold = "; ".join(["every GPU on the PCI bus visible to CUDA"] + wants)
    evidence = f"{PCI_DEVICES}/*/vendor (0x10de, display class) against the devices CUDA reports"
    if not f.gpus:
        if need.gpus:
            return Check(name, FAIL, f"{NO_GPU}; the profile requires {need.gpus}", threshold=threshold,
                         evidence=evidence, fix="check that the GPUs are seated and powered (lspci -d 10de:) and that "
                                                "this is the node the profile is for")
        return skip(name, NO_GPU, evidence=evidence)
    visible = [g for g in f.gpus if g.get("cuda_index") is not None]
    hidden = [g for g in f.gpus if g.get("cuda_index") is None]
    models = ", ".join(sorted({g["model"] or "NVIDIA GPU" for g in f.gpus}))
    measured = f"{len(visible)} of {len(f.gpus)} GPUs on the PCI bus visible to CUDA ({models})"
    cuda_error = f.cuda["cudart_error"]
    if cuda_error:
        evidence += f"; CUDA: {cuda_error}"
    masked = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden and masked is None:
        return Check(name, FAIL, f"{len(hidden)} of {len(f.gpus)} GPUs on the PCI bus are not visible to CUDA "
                                 f"({', '.join(g['pci_address'] for g in hidden)})", threshold=threshold,
                     evidence=evidence, fix="look for Xid errors and a GPU that fell off the bus (dmesg, nvidia-smi); "
                                            "a GPU reset (nvidia-smi -r) or a reboot brings back one that did")
    if need.gpus and len(visible) < need.gpus:
        return Check(name, FAIL, f"{measured}; the profile requires {need.gpus}", threshold=threshold, evidence=evidence,
                     fix="this node has fewer GPUs than its profile: check lspci -d 10de:, or use the profile for it")
    wrong = [g for g in visible if need.gpu_models
             and not any(m.lower() in (g["model"] or "").lower() for m in need.gpu_models)]
    if wrong:
        return Check(name, FAIL, f"{measured}; {', '.join(g['model'] or 'unknown model' for g in wrong)} is not "
                                 f"{' or '.join(need.gpu_models)}", threshold=threshold,
                     evidence=evidence + "; /proc/driver/nvidia/gpus/*/information",
                     fix="this node's GPUs are not the ones its profile is for: use the profile for them")
    if hidden:  # CUDA_VISIBLE_DEVICES hides them on purpose: said, not failed
        return Check(name, WARN, f"{measured}; CUDA_VISIBLE_DEVICES={masked} hides {len(hidden)}", threshold=threshold,
                     evidence=evidence, fix="unset CUDA_VISIBLE_DEVICES to validate every GPU of the node")
    return Check(name, PASS, measured, threshold=threshold, evidence=evidence)


def cuda_runtime(f: Facts) -> Check:
    name = "platform.cuda_runtime"
    if not f.gpus:
        return skip(name, NO_GPU)
    c = f.cuda
    if c["cudart_error"]:
        return Check(name, FAIL, "CUDA runtime not usable", evidence=c["cudart_error"],
                     fix="install the CUDA runtime (pip install nvidia-cuda-runtime, or the CUDA toolkit) matching the driver")
    return Check(name, PASS, f"runtime {_cuda_version(c['runtime_version'])}, driver API {_cuda_version(c['driver_version'])}, "
                             f"{len(c['devices'])} device(s)", threshold="libcudart loads", evidence=c["cudart_path"])


def cufile_library(f: Facts) -> Check:
    name = "platform.cufile"
    if not f.gpus:
        return skip(name, NO_GPU)
    c = f.cuda
    if c["cufile_error"]:
        return Check(name, f.gds_status(), "cuFile not usable: --mode gds cannot run", evidence=c["cufile_error"],
                     fix="install cuFile (pip install nvidia-cufile, or the nvidia-gds package)")
    return Check(name, PASS, f"cuFile loaded; nvidia-fs as cuFile sees it: {c['nvfs_version']}",
                 threshold="libcufile loads", evidence=c["cufile_path"])


def nvidia_fs(f: Facts) -> Check:
    name = "platform.nvidia_fs"
    if not f.gpus:
        return skip(name, NO_GPU)
    fs = f.status["nvidia_fs"]
    if not fs["loaded"] and gpu_path.p2pdma_possible(f.status):
        return Check(name, WARN, "nvidia-fs not loaded; cuFile may read by PCI P2PDMA instead, whose reads "
                     "nvidia-fs's counters cannot show, so no read here is observed as GPUDirect",
                     evidence=f"/sys/module/nvidia_fs: missing; {f.status['cufile_json']['path']}: "
                              f"{gpu_path.asks_p2pdma(f.status)} true; cuFile reports PCI P2PDMA supported",
                     fix="load nvidia-fs to observe GPUDirect reads, or take P2PDMA's path on trust")
    if not fs["loaded"]:
        return Check(name, f.gds_status(), "nvidia-fs not loaded: cuFile can only read in compatibility mode",
                     evidence="/sys/module/nvidia_fs: missing",
                     fix="install nvidia-fs (the nvidia-gds package) and modprobe nvidia-fs")
    return Check(name, PASS, f"loaded, version {fs['version'] or 'unknown'}", threshold="nvidia-fs loaded",
                 evidence="/sys/module/nvidia_fs/version")


def cufile_json(f: Facts) -> Check:
    """Needs no GPU: the file says what cuFile will do wherever it runs."""
    name = "platform.cufile_json"
    config = f.status["cufile_json"]
    path, lines = config["path"], config.get("lines", {})
    where = path + (" (from $CUFILE_ENV_PATH_JSON)" if os.environ.get("CUFILE_ENV_PATH_JSON") else "")
    if os.environ.get("CUFILE_FORCE_COMPAT_MODE", "").lower() in ("1", "true"):
        return Check(name, f.gds_status(), "compatibility mode forced by the environment",
                     threshold="GPUDirect required" if f.require_gds else "", evidence="CUFILE_FORCE_COMPAT_MODE=" +
                     os.environ["CUFILE_FORCE_COMPAT_MODE"], fix="unset CUFILE_FORCE_COMPAT_MODE")
    if not config["found"]:
        if not f.gpus:
            return skip(name, f"{NO_GPU}, and no cufile.json", evidence=f"{where}: not found")
        return Check(name, WARN if f.require_gds else PASS, "not found: cuFile uses its defaults (compat mode allowed)",
                     threshold="compatibility mode disallowed" if f.require_gds else "compatibility mode not forced",
                     evidence=f"{where}: not found",
                     fix="install cufile.json with allow_compat_mode false, so a read that cannot go GPUDirect fails "
                         "loudly instead of falling back")
    if config.get("error"):
        return Check(name, FAIL, "cuFile cannot read it", evidence=f"{path}: {config['error']}",
                     fix=f"fix the JSON in {path} (cuFile then uses its defaults)")
    if config["force_compat"]:
        return Check(name, f.gds_status(), "force_compat_mode: true (every cuFile read goes through host memory)",
                     threshold="GPUDirect required" if f.require_gds else "",
                     evidence=f"{path} line {lines.get('force_compat_mode', '?')}: \"force_compat_mode\": true",
                     fix=f"set \"force_compat_mode\": false in {path}")
    allowed = config["allow_compat_mode"] is not False  # absent: cuFile's default allows it
    evidence = (f"{path} line {lines['allow_compat_mode']}: \"allow_compat_mode\": {str(allowed).lower()}"
                if "allow_compat_mode" in lines else f"{path}: allow_compat_mode not set (default true)")
    if allowed and f.require_gds:
        return Check(name, WARN, "compatibility mode allowed: a read that cannot go GPUDirect falls back silently",
                     threshold="GPUDirect required", evidence=evidence,
                     fix=f"set \"allow_compat_mode\": false in {path} so a fallback fails loudly")
    return Check(name, PASS, "compatibility mode " + ("allowed as a fallback, not forced" if allowed else "disallowed"),
                 threshold="compatibility mode disallowed" if f.require_gds else "compatibility mode not forced",
                 evidence=evidence)


def iommu(f: Facts) -> Check:
    name = "platform.iommu"
    cmdline = (read_sysfs(Path("/proc/cmdline")) or "").split()
    flags = " ".join(w for w in cmdline if "iommu" in w) or "no iommu= flags"
    units = sorted(os.listdir("/sys/class/iommu")) if os.path.isdir("/sys/class/iommu") else []
    state = f"{'IOMMU units: ' + ', '.join(units) if units else 'no IOMMU enabled'}; kernel command line: {flags}"
    if not f.gpus:
        return skip(name, NO_GPU + ": the IOMMU matters here only to GPU peer-to-peer reads", measured=state,
                    evidence="/sys/class/iommu, /proc/cmdline")
    kinds = {}
    for g in f.gpus:
        group = PCI_DEVICES / g["pci_address"] / "iommu_group" / "type"
        kinds[g["pci_address"]] = read_sysfs(group) or "none"
    translated = {gpu: kind for gpu, kind in kinds.items() if kind.startswith("DMA")}
    measured = state + "; GPU groups: " + ", ".join(f"{gpu} {kind}" for gpu, kind in kinds.items())
    if translated:
        return Check(name, f.gds_status(), measured, threshold="off or passthrough (identity)",
                     evidence=f"{PCI_DEVICES}/<gpu>/iommu_group/type", fix="boot with iommu=pt (or the IOMMU off): "
                     "GPUDirect peer-to-peer reads need it off or in passthrough")
    return Check(name, PASS, measured, threshold="off or passthrough (identity)",
                 evidence=f"{PCI_DEVICES}/<gpu>/iommu_group/type, /proc/cmdline")


def acs_control(config: bytes) -> int | None:
    """The ACS Control register of a PCI config space, or None where it has no
    ACS capability (or the extended space is not readable: it needs root)."""
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(config) - 8 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(config[offset:offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == ACS_CAP_ID:
            return int.from_bytes(config[offset + 6:offset + 8], "little")
        offset = (header >> 20) & 0xFFC
    return None


def _upstream_chain(address: str) -> list[str]:
    """PCI addresses from the root port down to this device."""
    parts = (PCI_DEVICES / address).resolve().parts
    return [p for p in parts if PCI_ADDRESS.fullmatch(p)]


def bridges_between(a: str, b: str) -> list[str]:
    """The PCIe bridges a peer-to-peer transfer between two devices crosses."""
    up, down = _upstream_chain(a), _upstream_chain(b)
    shared = 0
    while shared < min(len(up), len(down)) - 1 and up[shared] == down[shared]:
        shared += 1
    meeting = [up[shared - 1]] if shared else []
    return list(dict.fromkeys(meeting + up[shared:-1] + down[shared:-1]))


def acs(f: Facts) -> Check:
    name = "platform.pcie_acs"
    storage_pci = f.storage.get("pci_address")
    if not f.gpus:
        return skip(name, NO_GPU)
    if not storage_pci:
        return skip(name, "the storage is not a local PCI device: no bridge lies between it and a GPU")
    found, unreadable, redirect = [], [], []
    for g in f.gpus:
        for bridge in bridges_between(g["pci_address"], storage_pci):
            try:
                control = acs_control((PCI_DEVICES / bridge / "config").read_bytes())
            except OSError:
                control = None
            if control is None:
                unreadable.append(bridge)
                continue
            found.append(f"{bridge} ACSCtl={control:#06x}")
            bits = [what for bit, what in ACS_REDIRECT.items() if control >> bit & 1]
            if bits:
                redirect.append(f"{bridge}: {', '.join(bits)}")
    evidence = f"{PCI_DEVICES}/<bridge>/config (ACS extended capability): " + "; ".join(found or ["none with ACS"])
    if not found:
        return skip(name, "no bridge between GPU and storage has a readable ACS capability"
                    + (" (reading it needs root)" if os.geteuid() else ""), evidence=evidence)
    if redirect:
        return Check(name, f.gds_status(), "ACS redirect on: " + "; ".join(redirect), threshold="redirect bits clear",
                     evidence=evidence, fix="disable ACS on the PCIe switch ports between GPU and NVMe (BIOS, or setpci): "
                     "with redirect on, peer-to-peer reads detour through the root complex")
    return Check(name, PASS, f"redirect bits clear on {len(found)} bridge(s)", threshold="redirect bits clear",
                 evidence=evidence)


def numa(f: Facts) -> Check:
    name = "platform.numa"
    node = f.storage.get("numa_node")
    storage = f"storage {f.storage.get('block_device') or f.storage.get('path', '?')} on node {_node(node)}"
    evidence = f"{PCI_DEVICES}/<device>/numa_node"
    if not f.gpus:
        return skip(name, NO_GPU, measured=storage, evidence=evidence)
    gpus = ", ".join(f"GPU {g['pci_address']} on node {_node(g['numa_node'])}" for g in f.gpus)
    far = [g for g in f.gpus if _known(g["numa_node"]) and _known(node) and g["numa_node"] != node]
    if far:
        return Check(name, WARN, f"{gpus}; {storage}", threshold="same node", evidence=evidence,
                     fix=f"read into a GPU on node {node} (--gpu), or pin with --pin numa: crossing sockets costs bandwidth")
    return Check(name, PASS, f"{gpus}; {storage}", threshold="same node (or one node)", evidence=evidence)


def link_check(name: str, who: str, device: dict, when: str = "", node: Node = ANY_NODE) -> Check:
    """A PCIe link trained below its maximum speed or width is a WARN; below what the profile's
    [node] requires (pcie_gen, pcie_width), a FAIL."""
    speed, width = device.get("pcie_link_speed"), device.get("pcie_link_width")
    top_speed, top_width = device.get("pcie_max_link_speed"), device.get("pcie_max_link_width")
    evidence = f"{PCI_DEVICES}/{device.get('pci_address')}/{{current,max}}_link_{{speed,width}}"
    required = (f"; at least Gen{node.pcie_gen} ({PCIE_GTS[node.pcie_gen]:g} GT/s)" if node.pcie_gen else "") + \
        (f"; at least x{node.pcie_width}" if node.pcie_width else "")
    threshold = "current = max" + required
    if not speed or not top_speed or "Unknown" in (speed + top_speed):
        if required:
            return Check(name, FAIL, f"{who} reports no PCIe link", threshold=threshold, evidence=evidence,
                         fix="the profile requires a PCIe link this device does not report: use the profile for it")
        return skip(name, f"{who} reports no PCIe link (a virtual or non-PCIe device)", evidence=evidence)
    measured = f"{who}: {speed} x{width}, max {top_speed} x{top_width}{when}"
    if (node.pcie_gen and _gts(speed) < PCIE_GTS[node.pcie_gen]) or (node.pcie_width and _int(width) < node.pcie_width):
        return Check(name, FAIL, measured, threshold=threshold, evidence=evidence,
                     fix="the link is slower than this node must have: reseat the card, check the slot, riser and BIOS "
                         "link settings")
    if _gts(speed) < _gts(top_speed) or _int(width) < _int(top_width):
        return Check(name, WARN, measured, threshold=threshold, evidence=evidence,
                     fix="reseat the card or check the slot and BIOS link settings: the link trained below its maximum")
    return Check(name, PASS, measured, threshold=threshold, evidence=evidence)


def storage_link(f: Facts) -> Check:
    if not f.storage.get("pci_address"):
        return skip("platform.pcie_link_storage", "the storage is not a local PCI device")
    return link_check("platform.pcie_link_storage", f"storage {f.storage.get('block_device')}", f.storage)


def gpu_links(f: Facts, under_load: dict[str, dict]) -> list[Check]:
    """Each GPU's link, as read while host-to-device copies ran where they could
    (a GPU lowers its link speed when idle, so an idle reading proves little)."""
    if not f.gpus:
        return [skip("platform.pcie_link_gpu", NO_GPU)]
    out = []
    for g in f.gpus:
        name = "platform.pcie_link_gpu" + (f".{g['pci_address']}" if len(f.gpus) > 1 else "")
        loaded = under_load.get(g["pci_address"])
        check = link_check(name, f"GPU {g['pci_address']}", {**g, **(loaded or {})},
                           " (read during host-to-device copies)" if loaded else " (read idle)", f.node)
        if check.status in (WARN, FAIL) and not loaded:  # an idle GPU lowers its link speed: no proof either way
            check.status = WARN
            check.fix = "read while idle, when GPUs lower their link speed: run again where the h2d point can run"
        out.append(check)
    return out


def sample_links(gpus: list[dict]) -> dict[str, dict]:
    """The current link of each GPU, for reading while it is busy."""
    return {g["pci_address"]: {"pcie_link_speed": read_sysfs(PCI_DEVICES / g["pci_address"] / "current_link_speed"),
                               "pcie_link_width": read_sysfs(PCI_DEVICES / g["pci_address"] / "current_link_width")}
            for g in gpus}


def filesystem(f: Facts) -> Check:
    name = "platform.filesystem"
    if f.target is None:
        return skip(name, "no target")
    if not is_local(f.target):
        facts = f.target.describe()
        over = f" over {facts['http_version']}" if facts.get("http_version") else ""
        over += f", server {facts['server']}" if facts.get("server") else ""
        client = next((f"{library} {facts[library]}" for library in ("libcurl", "libnfs", "libsmbclient")
                       if library in facts), "?")
        return Check(name, INFO, f"{f.target.where} ({facts.get('protocol', '?').upper()}{over}, {client}): no "
                                 "filesystem here; gdsbench reads it over the network into host memory, and to a GPU "
                                 "through it (RDMA transports are not measured)",
                     evidence=f"{facts.get('probe', 'HEAD')} {facts.get('url', f.target.path)}")
    if f.target.mount is None:
        return Check(name, INFO, f"block device {f.target.path} (read raw, no filesystem)",
                     evidence=f"stat {f.target.path}")
    m = f.target.mount
    measured = f"{m.fs_type} at {m.mount_point} from {m.source} ({m.options})"
    evidence = "/proc/self/mountinfo"
    if m.fs_type not in GDS_FILESYSTEMS:
        status = f.gds_status() if f.require_gds else PASS
        if status == PASS:
            return Check(name, INFO, measured + f"; cuFile reads {m.fs_type} in compatibility mode", evidence=evidence)
        return Check(name, status, measured, threshold="a filesystem GPUDirect Storage supports", evidence=evidence,
                     fix=f"put the data on {', '.join(GDS_FILESYSTEMS[:2])} on NVMe (or a GDS-enabled network filesystem)")
    if m.fs_type == "ext4" and "data=journal" in m.options:
        return Check(name, f.gds_status(), measured, threshold="data=ordered", evidence=evidence,
                     fix="mount ext4 with data=ordered (the default): cuFile reads data=journal in compatibility mode")
    return Check(name, PASS, measured, threshold="a filesystem GPUDirect Storage supports", evidence=evidence)


def o_direct(f: Facts) -> Check:
    name = "platform.o_direct"
    if f.target is None:
        return skip(name, "no target")
    if not is_local(f.target):
        return skip(name, f"{f.target.path} is {f.target.where}: O_DIRECT is a local file's")
    try:
        f.target.check_direct(0, 0)
    except UsageError as e:
        return Check(name, FAIL if f.require_gds else WARN, "refused", threshold="O_DIRECT opens and reads",
                     evidence=f"open({f.target.path}, O_DIRECT): {e}",
                     fix="the bounce and gds modes need O_DIRECT: put the data on a filesystem that allows it (ext4, xfs)")
    return Check(name, PASS, f"supported; offsets and sizes in multiples of {f.target.direct_alignment()} B",
                 threshold="O_DIRECT opens and reads", evidence=f"open({f.target.path}, O_DIRECT), statx DIO alignment")


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}" if v else "unknown"


def _known(node) -> bool:
    return node is not None and node >= 0


def _node(node) -> str:
    return str(node) if _known(node) else "unknown (one NUMA node, or not reported)"


def _gts(speed: str) -> float:
    m = re.match(r"([\d.]+)", speed or "")
    return float(m.group(1)) if m else 0.0


def _int(text) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0
