"""Where a job's bytes go: every transfer mode, declared once.

Everything else asks these declarations; no other module compares mode
names. Adding a mode means one entry here, plus one engine file under
native/engines/ if it reads with an engine of its own (docs/architecture.md
has the checklist).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mode:
    name: str
    about: str  # for --mode's help
    engines: tuple[str, ...]  # what it reads with; --engine auto takes the first one available here
    direct: bool  # O_DIRECT unless --direct/--buffered says otherwise
    cache_choice: bool  # whether --direct/--buffered may change that
    other_cache_mode: str | None  # the mode to use for the other choice, when this one has none
    gpu: bool  # reads land in GPU memory: needs a GPU, or the simulation
    staged: bool  # through pinned host memory, then copied to the GPU (native: Job::staged())
    native_loop: bool  # run by the native transfer loop (benchmark workers; train's native SampleReader)
    own_open_flags: bool  # opens files its own way (kvikio picks O_DIRECT itself): gdsbench checks no alignment
    many_processes: bool  # may run as several processes (--procs) or MPI ranks
    simulated: bool  # --gpu-backend sim can stand in for its GPU
    worker_threads: bool  # --threads gives it more worker threads
    requires: tuple[tuple[str, str], ...]  # Python modules it needs, and the package providing each
    landing: str  # where the engine's bytes go, for its data path ("" where the path is found at run time)
    write_source: str  # where a write's bytes come from, for its data path ("" where it does not write yet)
    path_from: str  # who says what path the bytes took: "engine", "cufile-platform" or "kvikio-statistics"
    stand_ins: tuple[str, ...] = ()  # under --gpu-backend sim, the host engines that stand in for its own
    # (stand_in_for says which: a synchronous engine for the synchronous ones, one with a queue for the others)

    def stand_in_for(self, engine: str, info: dict) -> str:
        """The stand-in for one of its engines: the first of stand_ins with a queue as that one has or has not."""
        queued = info[engine]["max_depth"] > 1
        return next(e for e in self.stand_ins if (info[e]["max_depth"] > 1) == queued)

    def stood_in_by(self, stand_in: str, info: dict) -> list[str]:
        """Its engines a stand-in stands in for."""
        return [e for e in self.engines if self.stand_in_for(e, info) == stand_in]


_HOST_ENGINES = ("io_uring", "psync", "curl", "nfs", "smb", "null")  # auto: the first that is here and opens the target's kind

_NATIVE = dict(native_loop=True, own_open_flags=False, many_processes=True)  # what the native core's modes share
_STAGED_WRITE = ("from GPU memory, copied first by cudaMemcpyAsync to pinned host memory (where each 4 KiB block's "
                 "offset words and checksum are set, 24 of its bytes, so the file keeps the pattern)")

MODES: dict[str, Mode] = {m.name: m for m in (
    Mode("cpu", "host memory", _HOST_ENGINES, direct=True, cache_choice=True, other_cache_mode=None, gpu=False,
         staged=False, **_NATIVE, simulated=False, worker_threads=True, requires=(),
         landing="into host memory", write_source="from host memory", path_from="engine"),
    Mode("bounce", "O_DIRECT into pinned memory, then copied to the GPU", _HOST_ENGINES, direct=True,
         cache_choice=False, other_cache_mode="cached-bounce", gpu=True, staged=True, **_NATIVE, simulated=True,
         worker_threads=True, requires=(),
         landing="into pinned host memory, then cudaMemcpyAsync to GPU memory", write_source=_STAGED_WRITE,
         path_from="engine"),
    Mode("cached-bounce", "page-cache reads, then copied", _HOST_ENGINES, direct=False, cache_choice=False,
         other_cache_mode="bounce", gpu=True, staged=True, **_NATIVE, simulated=True, worker_threads=True,
         requires=(), landing="into pinned host memory, then cudaMemcpyAsync to GPU memory",
         write_source=_STAGED_WRITE, path_from="engine"),
    # cuFile's three APIs, as gdsio's transfer types: synchronous (-x 0; depth from --threads), batch (-x 6)
    # and stream (-x 5), the last two with a queue (--qd).
    Mode("gds", "cuFile into GPU memory", ("cufile", "cufile_batch", "cufile_async"), direct=True, cache_choice=False,
         other_cache_mode="cached-bounce", gpu=True, staged=False, **_NATIVE, simulated=True, worker_threads=True,
         requires=(), landing="", write_source="", path_from="cufile-platform",
         # The stand-in's "device memory" is host memory, which pread and pwrite reach as cuFile reaches a GPU's:
         # what this tests is gdsbench's side (slots, stamping writes in device memory, checks), not cuFile.
         # psync stands in for the synchronous API, io_uring (a queue) for the batch and stream APIs.
         stand_ins=("psync", "io_uring")),
    Mode("kvikio", "kvikio's own reads", ("kvikio",), direct=True, cache_choice=True, other_cache_mode=None, gpu=True,
         staged=False, native_loop=False, own_open_flags=True, many_processes=False, simulated=False,
         worker_threads=False, requires=(("kvikio", "kvikio-cu13"), ("cupy", "cupy-cuda13x")),
         landing="", write_source="", path_from="kvikio-statistics"),
)}

# Engines no native engine file provides, described as the native registry describes its own
# (native/engines/registry.cpp): kvikio's reads are driven from Python (execution/kvikio_mode/).
PYTHON_ENGINES = {
    "kvikio": {"name": "kvikio", "about": "kvikio's CuFile.pread and thread pool (--mode kvikio)", "max_depth": 1024,
               "opens": ("local file", "url"), "supports_direct": True, "directions": ("read", "write"), "gpu_buffers": True,
               "registers_gpu_buffers": False, "lists_folders": False, "unavailable": "",
               "options": [  # declared as a native engine declares its own (native/engine.hpp's EngineOption)
                   {"name": "kvikio_threads", "kind": "int", "help": "kvikio's thread pool size (kvikio; 0: kvikio's "
                    "default)", "default": 0, "low": 0, "high": 1024},
                   {"name": "kvikio_task_size", "kind": "size", "help": "size of the tasks kvikio splits a read into "
                    "(kvikio; 0: kvikio's default)", "default": 0, "low": 0, "high": 1 << 30},
                   {"name": "kvikio_remote_backend", "kind": "choice", "choices": ("default", "easy", "multi-poll"),
                    "help": "how kvikio's RemoteFile drives libcurl for a URL: easy (a thread per request in flight, "
                    "kvikio's EASY_THREADPOOL) or multi-poll (MULTI_POLL); default: kvikio's own (kvikio >= 26.10 "
                    "to set it)", "default": "default"},
                   {"name": "kvikio_max_requests", "kind": "int", "help": "most HTTP requests kvikio keeps in flight "
                    "for a URL with multi-poll (kvikio; 0: kvikio's default)", "default": 0, "low": 0, "high": 4096}]},
}


def mode_help() -> str:
    return "where the bytes go: " + ", ".join(f"{m.name} ({m.about})" for m in MODES.values())
