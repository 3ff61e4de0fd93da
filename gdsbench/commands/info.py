from __future__ import annotations

import argparse
import json

from gdsbench.commands.options import add_asking_arguments, asking_from_args


def _o_direct(target) -> str:
    from gdsbench.job.errors import UsageError

    path = target.path
    try:
        target.check_direct(0, 0)
        return f"supported on {path} ({target.where}; offsets and sizes in multiples of {target.direct_alignment()} B)"
    except UsageError as e:
        return f"not usable on {path}: {e}"


class InfoCommand:
    name = "info"
    help = "what this machine can do: GPUs, CUDA, cuFile, nvidia-fs, kvikio, cupy, io_uring, O_DIRECT"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--path", help="also check O_DIRECT and describe the storage under this file or device")
        parser.add_argument("--json", action="store_true", help="print everything as JSON")
        from gdsbench.system.targets import url_schemes

        add_asking_arguments(parser, f"a URL --path ({url_schemes()})", 0)

    def run(self, args: argparse.Namespace) -> int:
        from gdsbench import _native
        from gdsbench.job.errors import UsageError
        from gdsbench.job.units import format_size
        from gdsbench.system import gpu, gpu_path, provenance
        from gdsbench.system.targets import protocol_of, target_for, url_schemes
        from gdsbench.system.targets.remote_object import asking_of

        if args.path is not None and not args.path:
            raise UsageError("--path '': give a file or block device to check, or leave --path out")
        asking = asking_from_args(args, protocol_of(args.path) is not None, f"a URL --path ({url_schemes()})",
                                  asking_of())
        target = target_for(args.path, asking=asking) if args.path else None  # looked at once, as run would
        s = gpu.status()
        engines = {e["name"]: e["unavailable"] for e in _native.engines()}
        storage = target.describe() if target else None
        if args.json:
            print(json.dumps({**s, "engines": engines, "storage": storage,
                              "provenance": provenance.record(provenance.RUN_TOOLS + provenance.GPU_TOOLS),
                              "o_direct": _o_direct(target) if target else None}, indent=1, default=str))
            return 0
        cuda, fs = s["cuda"], s["nvidia_fs"]
        lines = ["GPUs"]
        for g in s["gpus"]:
            mem = format_size(g["memory_bytes"]) if g["memory_bytes"] else "memory unknown"
            index = f"cuda:{g['cuda_index']}" if g["cuda_index"] is not None else "not visible to CUDA"
            lines.append(f"  {g['pci_address']}  {g['model'] or 'NVIDIA GPU'}  {index}  {mem}  NUMA {g['numa_node']}  "
                         f"PCIe {g['pcie_link_speed']} x{g['pcie_link_width']} (max {g['pcie_max_link_speed']} "
                         f"x{g['pcie_max_link_width']})")
        if not s["gpus"]:
            lines.append("  none on the PCI bus")
        direct_ok, why = gpu_path.gds_is_direct(s, target)
        lines += [
            f"NVIDIA driver   {s['driver_version'] or 'not loaded'}",
            "libcudart       " + (f"{cuda['cudart_path']} (runtime {cuda['runtime_version']}, driver API "
                                  f"{cuda['driver_version']})" if not cuda["cudart_error"]
                                  else f"not usable: {cuda['cudart_error']}"),
            "libcufile       " + (f"{cuda['cufile_path']} (nvidia-fs as cuFile sees it: {cuda['nvfs_version']})"
                                  if not cuda["cufile_error"] else f"not usable: {cuda['cufile_error']}"),
            f"nvidia-fs       {'loaded' if fs['loaded'] else 'not loaded'}{' ' + fs['version'] if fs['version'] else ''}",
            "GDS             " + (("native: " if direct_ok else "compat: ") + why if not cuda["cufile_error"]
                                  else "unavailable (no usable cuFile)"),
            "cufile.json     " + (f"{s['cufile_json']['path']} (allow_compat_mode: {s['cufile_json']['allow_compat_mode']}, "
                                  f"use_pci_p2pdma: {s['cufile_json']['use_pci_p2pdma']})"
                                  if s["cufile_json"]["found"] else f"{s['cufile_json']['path']} not found"),
            f"cupy            {s['cupy'] or 'not installed'}",
            f"kvikio          {s['kvikio'] or 'not installed'}",
            "engines         " + ", ".join(f"{n}: {'ok' if not why_not else why_not}" for n, why_not in engines.items()),
        ]
        if args.path:
            lines.append(f"O_DIRECT        {_o_direct(target)}")
            keys = ("fs_type", "block_device", "model", "driver", "rotational", "scheduler", "numa_node", "pci_address",
                    "pcie_link_speed", "pcie_link_width")
            lines.append("storage         " + ", ".join(f"{k}={storage.get(k)}" for k in keys if storage.get(k) is not None))
        print("\n".join(lines))
        return 0
