"""Run one job in this process: check it against the target, set the page
cache as asked, hand it to the native core, and build the Result."""

from __future__ import annotations

from dataclasses import dataclass

from . import _native, gpu, kvikio_mode, mpi, pagecache, parallel, pattern
from .environment import host_environment, meminfo
from .errors import UsageError
from .result import Result
from .spec import DEFAULT_RUNTIME_NS, MODE_ENGINES, GiB, JobSpec, job_options
from .pattern import has_pattern
from .target import Target, check_direct, describe, inspect
from .units import format_size

NULL_REGION = GiB  # region the null engine pretends to read when no --size is given


# kvikio is driven from Python (kvikio_mode.py), not by a native engine.
KVIKIO_ENGINE = {"name": "kvikio", "max_depth": 1024, "reads_file": True, "unavailable": ""}


def engine_info(name: str) -> dict:
    if name == "kvikio":
        return KVIKIO_ENGINE
    for e in _native.engines():
        if e["name"] == name:
            return e
    raise UsageError(f"--engine {name}: unknown engine")


def resolve_engine(spec: JobSpec) -> str:
    """'auto' becomes the mode's engine: for host and bounce modes io_uring
    where the kernel allows it, else psync; cufile for gds; kvikio for kvikio."""
    if spec.engine != "auto":
        reason = engine_info(spec.engine)["unavailable"]
        if reason and spec.mode not in ("gds",):  # gds reports what is missing in gpu.require
            raise UsageError(f"--engine {spec.engine}: not available here: {reason}")
        return spec.engine
    first = MODE_ENGINES[spec.mode][0]
    if first != "io_uring":
        return first
    reason = engine_info("io_uring")["unavailable"]
    if not reason:
        return "io_uring"
    if spec.qd > 1:
        raise UsageError(f"--qd {spec.qd}: io_uring is not available here ({reason}) and psync has queue depth 1; use --threads")
    return "psync"


def resolve_region(spec: JobSpec, target: Target) -> int:
    """The region's length in bytes, checked to hold a block per thread."""
    if spec.offset >= target.size:
        raise UsageError(
            f"--offset {format_size(spec.offset)}: at or past the end of {target.path} ({format_size(target.size)})"
        )
    size = spec.size or target.size - spec.offset
    if spec.offset + size > target.size:
        raise UsageError(
            f"--size {format_size(spec.size)}: the region runs past the end of {target.path} "
            f"({format_size(target.size)}); lower --size or --offset"
        )
    if size < spec.bs:
        raise UsageError(
            f"--bs {format_size(spec.bs)}: larger than the region of {target.path} ({format_size(size)}); "
            f"use a smaller --bs or a larger file (`gdsbench prepare {target.path} --size 1G`)"
        )
    if size // spec.bs < spec.threads:
        raise UsageError(
            f"--threads {spec.threads}: the region holds only {size // spec.bs} blocks of {format_size(spec.bs)}; "
            "use fewer threads, a smaller --bs or a larger region"
        )
    return size


def check_queue_depth(spec: JobSpec, engine: str) -> None:
    limit = engine_info(engine)["max_depth"]
    if spec.qd > limit:
        raise UsageError(f"--qd {spec.qd}: the {engine} engine takes a queue depth from 1 to {limit}")


def check_memory(spec: JobSpec) -> None:
    need = spec.threads * spec.qd * spec.bs
    available = meminfo("MemAvailable")
    if available is not None and need > available:
        raise UsageError(
            f"--threads x --qd x --bs = {format_size(need)} of buffers, more than the memory available "
            f"({format_size(available)}); lower one of them"
        )


MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")


def cache_warnings(spec: JobSpec, target: Target, cached: float) -> list[str]:
    """What a reader of this result must know about the page cache."""
    if target.mount and target.mount.fs_type in MEMORY_FILESYSTEMS:
        return [f"{target.path} is on {target.mount.fs_type}: its data lives in RAM, so this measures memory, not storage"]
    notes = []
    if spec.warm and cached < 0.99:
        notes.append(
            f"--warm: only {cached:.0%} of the region is in the page cache; the first pass reads "
            "from storage (add --ramp, or read the region once first)"
        )
    if not spec.warm and cached > 0.01:
        notes.append(
            f"{cached:.0%} of the region stayed in the page cache after dropping it (dirty or mapped pages); "
            "some reads may be served from RAM"
        )
    available = meminfo("MemAvailable") or 0
    may_loop = spec.runtime_ns is not None or spec.io_size > spec.size
    if not spec.direct and not spec.warm and may_loop and spec.size < available:
        notes.append(
            f"buffered reads of a region ({format_size(spec.size)}) that fits in RAM "
            f"({format_size(available)} available): after the first pass reads come from the page cache, "
            "not storage; use --direct, or a region larger than RAM"
        )
    return notes


def to_native(spec: JobSpec) -> _native.Job:
    """The resolved spec as the native Job struct (same field names)."""
    job = _native.Job()
    for name, opt in job_options().items():
        if opt.native:
            value = getattr(spec, name)
            setattr(job, name, 0 if value is None else value)
    return job


@dataclass(frozen=True)
class Plan:
    """A job checked against its target and resolved, ready to run."""

    spec: JobSpec  # engine, region (per process) and runtime resolved
    target: Target | None  # None for engines that read nothing
    parts: tuple = ()  # parallel.Part per process or MPI rank, when there are several


def check_memory_for(spec: JobSpec, processes: int) -> None:
    check_memory(spec.replace(threads=spec.threads * processes))


def _check_part(spec: JobSpec, target: Target) -> None:
    resolve_region(spec, target)
    _check_pattern(spec)


def _check_pattern(spec: JobSpec) -> None:
    if spec.verify and not has_pattern(spec.path, spec.offset):
        raise UsageError(
            f"--verify: {spec.path} holds no gdsbench pattern at offset {spec.offset}; "
            f"write one with `gdsbench prepare {spec.path} --size ...` or drop --verify"
        )


def plan(spec: JobSpec) -> Plan:
    """Check everything that can be checked without reading: options, target,
    O_DIRECT, memory. Raises UsageError; a sweep calls this for every point first."""
    spec.validate()
    engine = resolve_engine(spec)
    check_queue_depth(spec, engine)
    comm = mpi.world()
    if comm is not None and spec.mode == "kvikio":
        raise UsageError("--mode kvikio under mpirun: kvikio runs in one process; run it without mpirun")
    if comm is not None and spec.procs > 1:
        raise UsageError(f"--procs {spec.procs} under mpirun: each rank is one process; start more with mpirun -n")
    nparts = comm.Get_size() if comm is not None else spec.procs
    check_memory_for(spec, 1 if comm is not None else nparts)
    gpu.require(spec)
    runtime = spec.runtime_ns if spec.runtime_ns is not None else (None if spec.io_size else DEFAULT_RUNTIME_NS)
    target = None
    if engine_info(engine)["reads_file"]:
        if nparts > 1:
            target = inspect(spec.path + ".0" if spec.layout == "per-proc" else spec.path)
            size = parallel.part_size(spec, target, nparts)
        else:
            target = inspect(spec.path)
            size = resolve_region(spec, target)
            if spec.is_direct and spec.mode != "kvikio":  # kvikio chooses its own flags
                check_direct(target, spec.bs, spec.offset)
            _check_pattern(spec)
    else:
        if spec.verify:
            raise UsageError(f"--verify: the {engine} engine reads nothing to verify; use psync or io_uring")
        size = spec.size or NULL_REGION
    resolved = spec.replace(engine=engine, size=size, runtime_ns=runtime, direct=spec.is_direct)
    parts: tuple = ()
    if nparts > 1:
        shift = mpi.ranks_per_host(comm) if comm is not None else 1
        parts = tuple(parallel.plan_parts(resolved, nparts, shift, _check_part))
    return Plan(resolved, target, parts)


def progress_poll(progress, period_ns: int = 200_000_000):
    """A native poll callback that reports progress at most every period_ns."""
    if progress is None:
        return None
    last = [0]

    def poll(nbytes: int, elapsed_ns: int, worker_done: bool) -> int:
        if elapsed_ns >= last[0] + period_ns:
            last[0] = elapsed_ns
            progress(nbytes, elapsed_ns)
        return parallel.POLL_CONTINUE

    return poll


def execute(p: Plan, *, record_environment: bool = True, progress=None) -> Result | None:
    """Set the page cache as asked, run, and build the Result. Under MPI every
    rank must call this; rank 0 gets the aggregate and the others None."""
    spec, target = p.spec, p.target
    comm = mpi.world()
    parts = list(p.parts) or [parallel.Part(0, spec, target)]
    mine = [parts[comm.Get_rank()]] if comm is not None else parts
    warnings: list[str] = []
    parallel.evict(mine)
    cached_before = parallel.cached_fraction(mine)
    if target is not None and cached_before is not None:
        warnings += cache_warnings(spec, target, cached_before)

    kvikio_compat = None
    if spec.mode == "kvikio":
        raw, kvikio_compat = kvikio_mode.run(spec, progress)
        warnings.append(kvikio_mode.TIMING_NOTE)
    elif comm is not None:
        raw = mpi.run_rank(p, progress, warnings)
        if raw is None:
            return None
        warnings = [f"rank {q['rank']}: {w}" if q["rank"] else w for q in raw["procs"] for w in q.get("warnings", [])]
    elif p.parts:
        raw = parallel.run_local(parts, progress)
    else:
        raw = parallel.run_part(spec, progress_poll(progress), None)

    cached_after = parallel.cached_fraction(mine)
    environment = {}
    gpus = gpu.status()["gpus"] if spec.mode != "cpu" and not spec.simulated else []
    # sysfs is read only where something uses it: the record, or GPU placement
    storage = describe(target) if target and (record_environment or gpus) else None
    warnings += gpu.placement_warnings(spec, storage, gpus)
    if record_environment:
        environment = {"host": host_environment(), "target": storage, "gpus": gpus}
    return Result.from_native(
        spec,
        raw,
        cached_fraction=cached_before,
        cached_fraction_after=cached_after,
        data_path=gpu.data_path(spec, target, kvikio_compat),
        warnings=warnings,
        environment=environment,
    )


def run(spec: JobSpec, *, record_environment: bool = True, progress=None) -> Result:
    """Measure one job. Ctrl-C ends it within a fraction of a second and
    returns what was measured so far, with interrupted=True.

    progress(bytes, elapsed_ns), if given, is called a few times a second."""
    return execute(plan(spec), record_environment=record_environment, progress=progress)
