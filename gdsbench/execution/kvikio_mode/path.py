"""How kvikio really read, in words: through cuFile, or POSIX with a bounce
buffer (its compatibility mode, reads under its gds_threshold, a file cuFile
could not take), from kvikio's own statistics where it keeps them."""

from __future__ import annotations

from gdsbench.execution.kvikio_mode.settings import configure, configure_remote, import_kvikio, modules, setting
from gdsbench.job.spec import JobSpec
from gdsbench.system import gpu, gpu_path
from gdsbench.system.targets import protocol_of


def _compat_preferred(kvikio, defaults, driver) -> bool:
    """Whether kvikio will use its own POSIX compatibility mode (AUTO resolved)."""
    if hasattr(defaults, "is_compat_mode_preferred"):
        return bool(defaults.is_compat_mode_preferred())
    mode = setting(defaults, "compat_mode")
    compat = getattr(kvikio, "CompatMode", None)
    if compat is None or isinstance(mode, bool):
        return bool(mode)
    if mode == compat.AUTO:  # AUTO falls back to POSIX where cuFile cannot load
        return driver is None
    return mode == compat.ON


def _gds_available(driver) -> bool | None:
    """kvikio's own answer (nvidia-fs loaded), None where this kvikio cannot say."""
    try:
        return bool(driver.get("is_gds_available"))
    except Exception:  # noqa: BLE001 - older kvikio, or no driver module
        return None


def backend_shares(summary) -> dict[str, float]:
    """Share of bytes each kvikio backend carried ("posix", "gds"), from a
    kvikio.Summary; {} when nothing was counted."""
    totals = {str(name).lower(): int(t["bytes_transferred"]) for name, t in summary.by_backend.items()}
    moved = sum(totals.values())
    return {name: n / moved for name, n in totals.items() if n} if moved else {}


def compat_description(kvikio, bs: int, direct_posix: bool = False, backends: dict[str, float] | None = None,
                       verb: str = "reads") -> str:
    """How kvikio read this run: through cuFile, or POSIX (its compatibility
    mode, reads under its gds_threshold, or a file for which cuFile's
    registration failed). `backends` is what kvikio's own statistics saw
    (share of bytes per backend); without it (kvikio < 26.10) the answer is
    inferred from kvikio's settings."""
    defaults, driver = modules()
    # kvikio's O_DIRECT is opportunistic: aligned parts only, buffered for the rest
    posix = f"POSIX {'O_DIRECT (where aligned)' if direct_posix else 'page-cache'} {verb} and a bounce buffer"
    try:
        threshold = int(setting(defaults, "gds_threshold"))
    except Exception:  # noqa: BLE001 - older kvikio has no threshold
        threshold = 0
    if _compat_preferred(kvikio, defaults, driver):
        why = "kvikio compatibility mode"
    elif bs < threshold:
        why = (f"{bs} B {verb} are under kvikio's gds_threshold ({threshold} B), which it does synchronously "
               "inside pread()")
    else:
        why = "cuFile could not take this file (kvikio fell back to POSIX for it)"
    no_nvfs = _gds_available(driver) is False
    if no_nvfs and gpu_path.p2pdma_possible(gpu.status()):
        cufile = ("kvikio through cuFile without nvidia-fs here (kvikio: is_gds_available false), which may read "
                  "by PCI P2PDMA (cufile.json asks, cuFile reports it supported)")
    elif no_nvfs:
        cufile = ("kvikio through cuFile, which has no nvidia-fs here (kvikio: is_gds_available false): cuFile "
                  "compatibility mode, NOT GPUDirect")
    else:
        cufile = "kvikio through cuFile (GPUDirect unless cuFile itself runs in its compatibility mode)"
    if backends:
        gds_share = backends.get("gds", 0.0)
        seen = ", ".join(f"{share:.0%} {name}" for name, share in sorted(backends.items()))
        if gds_share >= 0.999:
            return f"{cufile} [kvikio statistics: {seen} of bytes]"
        if gds_share <= 0.001:
            return f"kvikio {posix}, NOT GPUDirect: {why} [kvikio statistics: {seen} of bytes]"
        return (f"MIXED: part through cuFile, part kvikio {posix} ({why}), so NOT all GPUDirect "
                f"[kvikio statistics: {seen} of bytes]")
    if _compat_preferred(kvikio, defaults, driver):
        return f"kvikio compatibility mode: {posix}, NOT GPUDirect"
    if bs < threshold:
        return f"kvikio {posix}, NOT GPUDirect: {why}"
    return cufile


def remote_description(url: str, gpu: int, settings: dict, backends: dict[str, float] | None = None) -> str:
    """How kvikio read an object behind a URL: its RemoteFile (libcurl) into host memory, then to
    the GPU, with the settings kvikio said it would use (configure_remote)."""
    what = "S3" if url.startswith("s3://") else "HTTPS" if url.startswith("https://") else "HTTP"
    told = [f"{settings['num_threads']} threads" if "num_threads" in settings else "",
            f"{settings['task_size'] >> 10} KiB tasks" if "task_size" in settings else "",
            f"backend {str(settings['remote_io_backend']).rsplit('.', 1)[-1]}" if "remote_io_backend" in settings else "",
            f"at most {settings['remote_io_max_concurrent_requests']} requests in flight"
            if "remote_io_max_concurrent_requests" in settings else "",
            f"{settings['http_max_attempts']} try per request" if "http_max_attempts" in settings else ""]
    seen = f" [kvikio statistics: {', '.join(f'{s:.0%} {n}' for n, s in sorted(backends.items()))} of bytes]" \
        if backends else ""
    return (f"{what} through kvikio's RemoteFile (libcurl; {', '.join(t for t in told if t)}) into kvikio's pinned "
            f"bounce buffers, then copied to GPU {gpu}{seen}")


def sample_data_path(spec: JobSpec, typical_read: int) -> str:
    """How kvikio reads samples of about this size, from its settings (train's
    readers run in other processes, so its statistics are not at hand here)."""
    _, kvikio = import_kvikio()
    defaults, _ = modules()
    if protocol_of(spec.path) is not None:  # an object behind a URL
        return remote_description(spec.path, spec.gpu[0], configure_remote(kvikio, defaults, spec))
    return compat_description(kvikio, typical_read, configure(defaults, spec))
