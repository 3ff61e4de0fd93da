"""kvikio's settings for a run: its pool size, task size and O_DIRECT for its
POSIX reads, which are global to the process; and importing kvikio and cupy
with the fix where they are missing."""

from __future__ import annotations

from gdsbench.job.errors import UsageError
from gdsbench.job.spec import JobSpec

_original: dict[str, int] = {}  # kvikio's own defaults, read once, restored for "0" (kvikio's default)


def modules():
    """kvikio's settings and cuFile-driver modules. They are submodules that
    `import kvikio` does not load, so they are imported by name."""
    import importlib

    defaults = importlib.import_module("kvikio.defaults")
    try:
        driver = importlib.import_module("kvikio.cufile_driver")
    except Exception:  # noqa: BLE001 - no cuFile driver module: kvikio runs POSIX only
        driver = None
    return defaults, driver


def setting(defaults, name: str):
    try:
        return defaults.get(name)  # kvikio >= 25.04
    except (AttributeError, TypeError, KeyError):
        return getattr(defaults, name if name != "num_threads" else "get_num_threads")()


def configure(defaults, spec: JobSpec) -> bool:
    """Set kvikio's pool size and task size for this run (0: kvikio's own
    default), and O_DIRECT for its POSIX reads when the job is direct. Returns
    whether kvikio's POSIX reads use O_DIRECT."""
    for name in ("num_threads", "task_size"):
        _original.setdefault(name, int(setting(defaults, name)))
    settings = {"num_threads": spec.kvikio_threads or _original["num_threads"],
                "task_size": spec.kvikio_task_size or _original["task_size"]}
    if not hasattr(defaults, "set"):  # kvikio < 25.02
        defaults.num_threads_reset(settings["num_threads"])
        defaults.task_size_reset(settings["task_size"])
        return False
    defaults.set(settings)
    try:  # kvikio's POSIX reads go through the page cache unless asked (kvikio >= 25.08)
        defaults.set({"auto_direct_io_read": spec.uses_o_direct})
        return spec.uses_o_direct
    except (KeyError, ValueError, TypeError):
        return False


def import_kvikio():
    try:
        import cupy
        import kvikio
    except ImportError as e:
        raise UsageError(f"--mode kvikio needs {e.name}: pip install gdsbench[cu13]") from None
    return cupy, kvikio


