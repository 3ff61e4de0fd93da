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


REMOTE_BACKENDS = {"easy": "EASY_THREADPOOL", "multi-poll": "MULTI_POLL"}  # --kvikio-remote-backend: kvikio's names
REMOTE_SETTINGS = ("num_threads", "task_size", "http_max_attempts", "http_timeout", "remote_io_backend",
                   "remote_io_max_concurrent_requests")  # what a remote run records, where this kvikio has it


def _set(defaults, key: str, value) -> None:
    try:
        defaults.set(key, value)  # kvikio >= 25.04; its remote_io_* keys take only this form
    except TypeError:
        defaults.set({key: value})


def configure_remote(kvikio, defaults, spec: JobSpec) -> dict:
    """kvikio's settings for reading URLs: one try per request (a failed request fails the run, as
    the curl engine's does without --retries; kvikio would retry 429 and 5xx silently), and its
    remote I/O backend and cap on requests in flight where asked (kvikio >= 26.10 sets them from
    Python, before its first remote read; older ones read KVIKIO_REMOTE_IO_BACKEND at import).
    Returns what kvikio says it will use, for the data path's words."""
    try:
        _set(defaults, "http_max_attempts", 1)
    except (KeyError, ValueError, AttributeError):
        pass  # kvikio < 25.04 has no retries to turn off
    asked = {}
    if spec.kvikio_remote_backend != "default":
        backend = getattr(getattr(kvikio, "RemoteIOBackend", None), REMOTE_BACKENDS[spec.kvikio_remote_backend], None)
        asked["remote_io_backend"] = (backend, "--kvikio-remote-backend")
    if spec.kvikio_max_requests:
        asked["remote_io_max_concurrent_requests"] = (spec.kvikio_max_requests, "--kvikio-max-requests")
    for key, (value, flag) in asked.items():
        try:
            if value is None:
                raise KeyError(key)
            _set(defaults, key, value)
        except (KeyError, ValueError, AttributeError):
            raise UsageError(f"{flag}: this kvikio cannot set {key} from Python (kvikio >= 26.10 can); set "
                             f"KVIKIO_{key.upper()} before starting gdsbench instead") from None
    effective = {}
    for key in REMOTE_SETTINGS:
        try:
            effective[key] = setting(defaults, key)
        except Exception:  # noqa: BLE001 - a setting this kvikio does not have
            pass
    return effective


def import_kvikio():
    try:
        import cupy
        import kvikio
    except ImportError as e:
        raise UsageError(f"--mode kvikio needs {e.name}: pip install gdsbench[cu13]") from None
    return cupy, kvikio


