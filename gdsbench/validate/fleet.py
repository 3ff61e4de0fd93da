"""`mpirun ... gdsbench validate PATH`: a fleet validated at once, as
provisioning tools check many nodes. The first rank on each host validates
that host (its own PATH, its own GPUs; a shared folder holds a file per host);
the other ranks on it wait. Rank 0 gathers one Validation per host and reports
them together: a verdict per host, the exit code of the worst, one JUnit
testsuite per host."""

from __future__ import annotations

import dataclasses
import socket

from gdsbench.execution import mpi
from gdsbench.validate.session import Validation


@dataclasses.dataclass
class HostValidation:
    host: str
    rank: int
    validation: Validation
    record: dict  # validation.to_dict(), made on the host (its environment is the host's)


def validate_fleet(comm, run) -> list[HostValidation] | None:
    """run(host) -> Validation, called on the first rank of each host; rank 0 gets every host's,
    in rank order, the others None."""
    rank, host = comm.Get_rank(), socket.gethostname()
    hosts = comm.allgather(host)
    mine = None
    if hosts.index(host) == rank:  # this host's first rank
        with mpi.alone():  # its measurements are its own: no other rank joins them
            v = run(host)
        mine = HostValidation(host, rank, v, v.to_dict())
    gathered = comm.gather(mine, root=0)
    return [g for g in gathered if g is not None] if rank == 0 else None


def worst_exit(fleet: list[HostValidation]) -> int:
    """The fleet's exit code: the worst host's (0 pass, 1 a FAIL, 2 not ready, 130 interrupted)."""
    return max(h.validation.exit_code for h in fleet)


def to_dict(fleet: list[HostValidation]) -> dict:
    return {"fleet": True, "exit_code": worst_exit(fleet), "hosts": [h.host for h in fleet],
            "per_host": [dict(h.record, rank=h.rank, exit_code=h.validation.exit_code, notes=h.validation.notes)
                         for h in fleet]}  # as they end: a report rank 0 could not write counts on every host
