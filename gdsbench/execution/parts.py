"""One job, several processes: the part each process (a local process or an
MPI rank) reads: its own region of a shared file, the whole shared region,
or its own file (IOR's layouts)."""

from __future__ import annotations

from dataclasses import dataclass

from gdsbench.job.errors import UsageError
from gdsbench.job.spec import JobSpec
from gdsbench.job.units import format_size
from gdsbench.system.targets import Target, job_target, target_for


@dataclass(frozen=True)
class Part:
    index: int  # process or rank
    spec: JobSpec  # resolved, procs=1: what this process runs
    target: Target | None


def part_specs(spec: JobSpec, nparts: int, shift: int = 1) -> list[JobSpec]:
    """The job each of nparts processes runs. `shift` is whose data a part
    reads with --reorder: the part `shift` further on (IOR's -C uses the
    number of tasks per node, so each reads what another host wrote)."""
    out = []
    for p in range(nparts):
        source = (p + shift) % nparts if spec.reorder else p
        path, offset, seed = spec.path, spec.offset, spec.seed
        if spec.layout == "shared":
            offset = spec.offset + source * spec.size
        elif spec.layout == "per-proc":
            path = f"{spec.path}.{source}"
        if spec.layout == "shared-all":
            seed = spec.seed + p  # the same blocks, in a different order per process
        gpu = (spec.gpu[p % len(spec.gpu)],) if spec.on_gpu else spec.gpu  # processes take GPUs round-robin
        out.append(spec.replace(path=path, offset=offset, seed=seed, gpu=gpu, procs=1))
    return out


def part_size(spec: JobSpec, target: Target, nparts: int) -> int:
    """Each part's region length: --size, or the target shared out (layout shared)."""
    room = target.size - spec.offset
    if spec.layout != "shared":
        return spec.size or room
    share = spec.size or room // nparts  # each process's, before whole blocks
    size = spec.size or share // spec.bs * spec.bs
    if spec.offset + size * nparts > target.size:
        raise UsageError(
            f"--size {format_size(size)} x --procs {nparts}: the parts run past the end of {spec.path} "
            f"({format_size(target.size)}); lower --size or --procs, or use --layout shared-all"
        )
    if size < spec.bs * spec.threads:
        raise UsageError(
            f"--procs {nparts}: each process's share of {spec.path} ({format_size(share)}) holds less than one "
            f"--bs {format_size(spec.bs)} block per thread ({spec.threads}); use fewer processes, a smaller --bs or "
            "a larger file"
        )
    return size


def check_cache_choice(spec: JobSpec, target: Target) -> None:
    """UsageError, in the target's words, where the job's way past the page cache cannot work there:
    O_DIRECT for its --bs and --offset, or --uncached on its filesystem. Every job run plans asks it,
    train of its dataset, and checkpoint and kvcache before they write."""
    if spec.checks_direct:
        target.check_direct(spec.bs, spec.offset)
    if spec.uncached:
        target.check_uncached()


def check_cache_choice_in(spec: JobSpec, path: str, directory: str) -> None:
    """check_cache_choice asked of a file gdsbench holds in DIR (checkpoint's lock, kvcache's probe)
    before it writes its own files there: refused naming DIR, as the user gave it, not that file."""
    try:
        check_cache_choice(spec.replace(offset=0), target_for(path))
    except UsageError as e:
        raise UsageError(str(e).replace(path, f"DIR {directory}")) from None


def plan_parts(spec: JobSpec, nparts: int, shift: int, check_region, own: int | None = None) -> list[Part]:
    """Plan every part against its own target, before anything runs. Under MPI
    a rank checks only its `own` part: another rank's file may be on another
    host, and a missing one is reported by the rank that reads it."""
    parts = []
    may_write: set[str] = set()  # the files asked already (a served file's answer is a read of all of it)
    for p, s in enumerate(part_specs(spec, nparts, shift)):
        target = None
        if s.path and s.opens_target and own in (None, p):
            target = job_target(s)
            if s.direction == "write" and s.path not in may_write:
                target.check_may_write(s)
                may_write.add(s.path)
            check_region(s, target)
            check_cache_choice(s, target)
        parts.append(Part(p, s, target))
    return parts


def regions(parts: list[Part]) -> list[tuple[Target, int, int]]:
    """(target, offset, length) of every part that reads one."""
    return [(p.target, p.spec.offset, p.spec.size) for p in parts if p.target is not None]
