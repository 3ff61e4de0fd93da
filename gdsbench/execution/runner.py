"""Run one job in this process: check it against the target, set the page
cache as asked, run it in its mode's loop (loops.run_part) here, or in
several processes or MPI ranks, and build the Result."""

from __future__ import annotations

from dataclasses import dataclass

from gdsbench.execution import mpi
from gdsbench.execution.loops import run_part
from gdsbench.execution.parts import Part, check_cache_choice, part_size, plan_parts, regions
from gdsbench.execution.processes import run_local
from gdsbench.execution.scratch import SCRATCH_PATH, ensure_scratch
from gdsbench.job.errors import GdsbenchError, IncompatibleOptions, UsageError, VerifyFailure
from gdsbench.job.result import Result
from gdsbench.job.spec import DEFAULT_RUNTIME_NS, ENGINE_INFO, GiB, JobSpec, opens_target
from gdsbench.job.units import format_duration, format_size
from gdsbench.system import cufile_stats, gpu, gpu_path, nvfs, provenance
from gdsbench.system.environment import host_environment, meminfo
from gdsbench.system.pattern import check_written
from gdsbench.system.targets import HeldRegions, Target, engines_for, is_local, job_target, kind_of, size_to_prepare

NULL_REGION = GiB  # region the null engine pretends to read when no --size is given


def with_target(spec: JobSpec) -> JobSpec:
    """The job with the target it reads: its PATH, or, with none given, the scratch file (made here once) where
    its engine reads a target at all (the null engine reads none)."""
    if spec.path:
        return spec
    engine = resolve_engine(spec)
    if opens_target(engine):
        ensure_scratch()
    return spec.replace(path=SCRATCH_PATH)


def resolve_engine(spec: JobSpec) -> str:
    """'auto' becomes the mode's engine: the first of the mode's engines
    available here that opens the target's kind (io_uring, else psync, for a
    local file in host and bounce modes; curl for a URL): the mode's engines
    and the target's (targets.engines_for) intersected."""
    if spec.engine not in ENGINE_INFO and spec.engine != "auto":
        raise UsageError(f"--engine {spec.engine}: unknown engine; choose one of auto, {', '.join(ENGINE_INFO)}")
    mode = spec.mode_declaration
    target_kind = kind_of(spec.path or SCRATCH_PATH)  # no PATH: the scratch file
    kind, reads_it = target_kind.OPENED_AS, engines_for(target_kind)  # its word in messages; the engines opening it
    if spec.engine != "auto":
        opens = ENGINE_INFO[spec.engine]["opens"]
        if spec.engine not in reads_it and opens_target(spec.engine):
            raise UsageError(f"--engine {spec.engine}: it reads a {' or a '.join(opens)}, and PATH {spec.path} is a "
                             f"{kind}; use --engine auto")
        # a GPU engine asked by name under the simulation: the host engine standing in for it
        engine = mode.stand_in_for(spec.engine, ENGINE_INFO) if spec.simulated and spec.engine in mode.engines \
            and mode.stand_ins else spec.engine
        reason = ENGINE_INFO[engine]["unavailable"]
        if reason and engine != spec.engine:
            raise UsageError(f"--engine {spec.engine} with --gpu-backend sim: its stand-in, {engine}, is not "
                             f"available here: {reason}")
        if reason:
            raise UsageError(f"--mode {spec.mode} needs the {spec.engine} engine, not available here: {reason}"
                             if spec.on_gpu else f"--engine {spec.engine}: not available here: {reason}")
        refuse_foreign_option(spec, engine, kind, reads_it)  # a stand-in would ignore its GPU engine's own
        spec.refuse_buffered_flags(engine)
        return engine
    engines = mode.stand_ins if spec.simulated and mode.stand_ins else mode.engines
    readers = [e for e in engines if e in reads_it]
    if not readers:
        raise UsageError(f"--mode {spec.mode} cannot read a {kind} yet (PATH {spec.path}): its engines "
                         f"({', '.join(mode.engines)}) read a {' or a '.join(ENGINE_INFO[mode.engines[0]]['opens'])}")
    if spec.direction == "write":
        readers = [e for e in readers if "write" in ENGINE_INFO[e]["directions"]]
        if not readers:
            raise UsageError(f"--rw {spec.rw}: --mode {spec.mode} cannot write a {kind} yet; write a local file "
                             "(gdsbench prepare makes one)")
    usable = [e for e in readers if not ENGINE_INFO[e]["unavailable"]]
    if not usable:
        first = readers[0]
        raise UsageError(f"--mode {spec.mode} needs the {first} engine, not available here: "
                         f"{ENGINE_INFO[first]['unavailable']}")
    engine = usable[0]
    refuse_foreign_option(spec, engine, kind, reads_it)
    spec.refuse_buffered_flags(engine)
    depth = ENGINE_INFO[engine]["max_depth"]
    if spec.qd > depth and engine == readers[0]:
        raise UsageError(f"--qd {spec.qd}: the {engine} engine takes a queue depth from 1 to {depth}")
    if spec.qd > depth:
        why = ENGINE_INFO[readers[0]]["unavailable"]
        raise UsageError(f"--qd {spec.qd}: {readers[0]} is not available here ({why}) and {engine} has queue "
                         f"depth {depth}; use --threads")
    return engine


def refuse_foreign_option(spec: JobSpec, engine: str, kind: str, reads_it) -> None:
    """IncompatibleOptions where the job sets another engine's option than the one it resolved to (which would
    ignore it while the record said it was set): a GPU engine's under the simulation, or one auto did not pick."""
    foreign = spec.foreign_option((engine,))
    if not foreign:
        return
    opens = ENGINE_INFO[foreign.engine]["opens"]
    fix = "drop it under --gpu-backend sim (the CPU stand-in has no such setting)" \
        if spec.simulated and foreign.engine in spec.mode_declaration.engines else \
        f"use --engine {foreign.engine}" if foreign.engine in reads_it else \
        f"drop it (the {foreign.engine} engine reads a {' or a '.join(opens)})"
    raise IncompatibleOptions(f"{foreign.flag} is an option of the {foreign.engine} engine, and this job reads "
                              f"its {kind} with {engine}; {fix}")


def resolve_direct(spec: JobSpec, target: Target | None) -> bool:
    """O_DIRECT as the job will run on this target: never on a remote object (O_DIRECT is a
    local file's), and asking for it there is refused in the target's words."""
    if target is not None and not is_local(target):
        if spec.direct:
            target.check_direct(spec.bs, spec.offset)
        return False
    return spec.uses_o_direct


def runnable_here(spec: JobSpec) -> JobSpec:
    """Whether this job can run on this machine, decided here once for run,
    sweep, train, validate and the pytest plugin: the spec validated (every
    rule between options), the GPU and libraries its mode needs present (first:
    a GPU mode on a machine without one says that, not which engine is
    missing), and its engine resolved. UsageError names what is missing."""
    spec = spec.validate()
    gpu.require(spec)
    return spec.replace(engine=resolve_engine(spec))


def _larger_file_hint(target: Target, need: int) -> str:
    """How to get a target large enough, where prepare could make one."""
    if target.kind != "file":
        return "a larger device"
    size = size_to_prepare(need, least=1 << 20)
    return f"a larger file (`gdsbench prepare {target.path if target.created_by_gdsbench() else 'NEW.dat'} --size {size}`)"


def resolve_region(spec: JobSpec, target: Target) -> int:
    """The region's length in bytes, checked to hold a block per thread."""
    if target.size == 0:
        raise UsageError(f"PATH {target.path}: is empty; nothing to read. Use {_larger_file_hint(target, spec.bs)}")
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
            f"use a smaller --bs or {_larger_file_hint(target, spec.offset + spec.bs * spec.threads)}"
        )
    if size // spec.bs < spec.threads:
        raise UsageError(
            f"--threads {spec.threads}: the region holds only {size // spec.bs} blocks of {format_size(spec.bs)}; "
            "use fewer threads, a smaller --bs or a larger region"
        )
    return size


def check_memory(spec: JobSpec) -> None:
    need = spec.threads * spec.qd * spec.bs
    available = meminfo("MemAvailable")
    if available is not None and need > available:
        raise UsageError(
            f"--threads x --qd x --bs = {format_size(need)} of buffers, more than the memory available "
            f"({format_size(available)}); lower one of them"
        )


MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")


def cache_warnings(spec: JobSpec, target: Target, cached: float | None) -> list[str]:
    """What a reader of this result must know about the page cache (cached None: the target has none here)."""
    if cached is None:
        held = ("what it acknowledged may be in its memory yet" if spec.direction == "write"
                else "a region read again may come from its memory")
        return [f"{target.path} is {target.where}: there is no page cache here to drop, and the server's own cache "
                f"cannot be seen; {held}"]
    if target.mount and target.mount.fs_type in MEMORY_FILESYSTEMS:
        return [f"{target.path} is on {target.mount.fs_type}: its data lives in RAM, so this measures memory, not storage"]
    if spec.direction == "write":
        if spec.direct:
            return []
        if not (spec.fsync_end or spec.fsync_every):
            return [f"buffered writes without --fsync-end or --fsync-every end in the page cache: this measures "
                    f"memory, not {target.where}; add --fsync-end (fio's end_fsync), or write with O_DIRECT"]
        if spec.fsync_end and not spec.fsync_every and (spec.runtime_ns or spec.io_size > spec.size):
            return [f"buffered writes may pass over the region ({format_size(spec.size)}) many times: the page cache "
                    "takes each rewrite, and the fsync at the end flushes only the last copy of each page, so this "
                    "measures memory more than storage; write with O_DIRECT, --io-size the region's size, or "
                    "--fsync-every"]
        return []
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
    if not spec.direct and not spec.uncached and not spec.warm and may_loop and spec.size < available:
        notes.append(
            f"buffered reads of a region ({format_size(spec.size)}) that fits in RAM "
            f"({format_size(available)} available): after the first pass reads come from the page cache, "
            "not storage; use --direct, or a region larger than RAM"
        )
    return notes


@dataclass(frozen=True)
class Plan:
    """A job checked against its target and resolved, ready to run."""

    spec: JobSpec  # engine, region (per process) and runtime resolved
    target: Target | None  # None for engines that read nothing
    parts: tuple = ()  # a Part per process or MPI rank, when there are several


def check_memory_for(spec: JobSpec, processes: int) -> None:
    check_memory(spec.replace(threads=spec.threads * processes))


def _check_pattern(reads: list[tuple[Target, int]]) -> None:
    """--verify needs pattern files: each (target, offset) read must be one. A
    target counts as one if the first block of any region read from it, or its
    first block, carries the pattern: a region that starts at a corrupt block is
    what --verify is for (exit 4, naming it)."""
    by_path: dict[str, tuple[Target, set[int]]] = {}
    for target, offset in reads:
        by_path.setdefault(target.path, (target, {0}))[1].add(offset)
    for path, (target, offsets) in by_path.items():
        if not any(target.has_pattern(offset) for offset in sorted(offsets)):
            raise UsageError(
                f"--verify: {path} holds no gdsbench pattern (checked offsets {', '.join(map(str, sorted(offsets)))}); "
                "write a pattern file with `gdsbench prepare NEW.dat --size 1G` or drop --verify"
            )


def plan(spec: JobSpec) -> Plan:
    """Check everything that can be checked without reading: options, target,
    O_DIRECT, memory. Raises UsageError; a sweep calls this for every point first."""
    spec = runnable_here(spec)
    comm = mpi.world()
    if comm is not None and not spec.mode_declaration.many_processes:
        raise UsageError(f"--mode {spec.mode} under mpirun: it runs in one process; run it without mpirun")
    if comm is not None and spec.procs > 1:
        raise UsageError(f"--procs {spec.procs} under mpirun: each rank is one process; start more with mpirun -n")
    if comm is not None and spec.direction == "write" and spec.verify:
        raise UsageError(f"--verify with --rw {spec.rw} under mpirun: reading writes back is not done across ranks yet; "
                         "verify with a run of --rw read --verify after it")
    nparts = comm.Get_size() if comm is not None else spec.procs
    own = comm.Get_rank() if comm is not None else None  # the part this process checks: under MPI, its rank's only
    check_memory_for(spec, 1 if comm is not None else nparts)
    # a run with no time limit has runtime 0, here and in the native core; None only means "not given"
    runtime = spec.runtime_ns if spec.runtime_ns is not None else (0 if spec.io_size else DEFAULT_RUNTIME_NS)
    target = None
    need = spec.offset + (spec.size or 0)  # what a file made to run this must hold, for a hint to make one
    if spec.opens_target:
        if nparts > 1:
            # per-proc: sized from this process's own file (rank 0's locally; under MPI, the rank's)
            target = job_target(spec, f"{spec.path}.{own or 0}" if spec.layout == "per-proc" else None,
                                need)
            size = part_size(spec, target, nparts)
        else:
            target = job_target(spec, need=need)
            if spec.direction == "write":
                target.check_may_write(spec)
            size = resolve_region(spec, target)
            check_cache_choice(spec, target)
            if spec.verify:
                _check_pattern([(target, spec.offset)])
    else:  # (--verify with an engine that reads nothing is refused by validate())
        size = spec.size or NULL_REGION
    resolved = spec.replace(size=size, runtime_ns=runtime, direct=resolve_direct(spec, target))
    parts: tuple = ()
    if nparts > 1:
        shift = mpi.ranks_per_host(comm) if comm is not None else 1
        parts = tuple(plan_parts(resolved, nparts, shift, resolve_region, own))
        if spec.verify:
            _check_pattern([(part.target, part.spec.offset) for part in parts if part.target is not None])
    return Plan(resolved, target, parts)


def execute(p: Plan, *, record_environment: bool = True, progress=None) -> Result | None:
    """Set the page cache as asked, run, and build the Result. Under MPI every
    rank must call this; rank 0 gets the aggregate and the others None.

    The regions read are held open from before the run to after it, so the
    page cache is measured on the files that were read. A step after the run
    that fails (the target gone, sysfs unreadable) costs only its own field,
    marked unavailable in a warning: never the measurement."""
    spec, target = p.spec, p.target
    comm = mpi.world()
    parts = list(p.parts) or [Part(0, spec, target)]
    writing = spec.direction == "write"
    with HeldRegions(regions([parts[comm.Get_rank()]] if comm is not None else parts),
                     lock="write" if writing else "read") as held:
        warnings: list[str] = []
        if not spec.warm:
            held.evict()
        cached_before = held.cached_fraction()
        if target is not None:
            warnings += cache_warnings(spec, target, cached_before)

        kvikio_path = None
        watched = gpu_path.cufile_serves(spec)
        nvfs_before = nvfs.counters() if watched else None
        counts_here = gpu_path.cufile_counts_here(spec, comm is None and not p.parts)
        cufile_before = cufile_stats.snapshot() if counts_here else None
        if comm is not None:
            run = mpi.run_rank(parts, progress, warnings)
            if writing:  # once every rank has written (a shared file's mark would go stale under the others)
                comm.Barrier()
                _wrote([parts[comm.Get_rank()]], verify=False)
            if run is None:
                return None
            warnings = [f"rank {q['rank']}: {w}" if q["rank"] else w for q in run.procs for w in q.get("warnings", [])]
        elif p.parts:
            run = run_local(parts, progress)
        else:
            ran = run_part(spec, progress=progress)
            run, kvikio_path = ran.record, ran.data_path
            warnings += ran.notes
        cached_after = _after_run("cached_fraction_after", held.cached_fraction, None, warnings)
        seen = nvfs.observe(nvfs_before, sum(t.bytes for t in run.threads)) if watched else None
        counted = cufile_stats.observe(cufile_before, spec.direction) if counts_here else None
        written = _wrote(parts, spec.verify) if writing and comm is None else None

    environment = {}
    gpus = _after_run("environment.gpus", lambda: gpu.status()["gpus"], [], warnings) if spec.real_gpu else []
    # sysfs is read only where something uses it: the record, or GPU placement
    wanted = target is not None and (record_environment or gpus)
    storage = _after_run("environment.target", target.describe, None, warnings) if wanted else None
    warnings += gpu_path.placement_warnings(spec, storage, gpus)
    if record_environment:
        environment = {"host": _after_run("environment.host", host_environment, {}, warnings), "target": storage,
                       "gpus": gpus}
    if run.threads and not any(t.ops for t in run.threads) and not run.interrupted:
        warnings.insert(0, f"NOTHING MEASURED: no {spec.direction} completed in the measured window ({spec.describe()}); "
                           "give a longer --runtime or a larger --io-size")
    result = Result.from_run(
        spec,
        run,
        cached_fraction=cached_before,
        cached_fraction_after=cached_after,
        data_path=_after_run("data_path", lambda: gpu_path.data_path(spec, target, kvikio_path, seen, counted), "unavailable",
                            warnings),
        warnings=warnings,
        environment=environment,
        provenance=provenance.record(provenance.RUN_TOOLS + (provenance.GPU_TOOLS if spec.real_gpu else ())),
    )
    if written:  # --verify of a write: what the storage holds now, read back
        result.verified_blocks, result.verify_mismatches, result.first_mismatch_offset = written
    return result


def _wrote(parts: list[Part], verify: bool) -> tuple[int, int, int | None] | None:
    """After writing: each file's mark made true again (its modification time moved), and with
    --verify every block of every part read back from the storage and checked: (blocks, bad,
    the first bad one's offset)."""
    checked, bad, first = 0, 0, None
    for part in parts:
        if part.target is not None:
            part.target.wrote()
            if verify:
                n, found, where = check_written(part.target.path, part.spec.offset, part.spec.size)
                checked, bad, first = checked + n, bad + found, first if first is not None else where
    return (checked, bad, first) if verify else None


def _after_run(field: str, step, fallback, warnings: list[str]):
    """A step after the measurement: its value, or `fallback` and a warning naming the field."""
    try:
        return step()
    except (OSError, GdsbenchError) as e:
        warnings.append(f"{field} unavailable: {e}")
        return fallback


def check_verified(result: Result) -> Result:
    """The result, unless --verify found bad blocks: then VerifyFailure, which carries it."""
    if result.verify_mismatches:
        raise VerifyFailure(f"--verify: {result.verify_mismatches} blocks read did not match the pattern "
                            f"(first at offset {result.first_mismatch_offset} of {result.spec.path})", result)
    return result


def run(spec: JobSpec, *, record_environment: bool = True, progress=None) -> Result | None:
    """Measure one job. Ctrl-C ends it within a fraction of a second and
    returns what was measured so far, with interrupted=True. With --verify,
    bad blocks raise VerifyFailure, whose .result holds the measurement.
    Under MPI, ranks other than 0 get None.

    progress(bytes, elapsed_ns), if given, is called a few times a second."""
    result = execute(plan(spec), record_environment=record_environment, progress=progress)
    if result is not None and result.ops == 0 and not result.interrupted:
        raise UsageError(f"the run measured nothing: no read completed in the measured window "
                         f"({format_size(result.spec.bs)} reads"
                         + (f", --runtime {format_duration(result.spec.runtime_ns)}" if result.spec.runtime_ns else "")
                         + "); give a longer --runtime or a larger --io-size")
    return check_verified(result) if result is not None else None
