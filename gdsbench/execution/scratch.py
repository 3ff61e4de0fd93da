"""The default target: a scratch file gdsbench creates itself under results/,
so the quick start needs no path."""

from __future__ import annotations

import os
import sys

from gdsbench.execution import mpi
from gdsbench.execution.progress import progress_printer
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import GiB
from gdsbench.job.units import format_size
from gdsbench.system import writable
from gdsbench.system.prepare import prepare

SCRATCH_PATH = os.path.join("results", "scratch", "gdsbench-scratch.dat")
SCRATCH_SIZE = GiB


def ensure_scratch(path: str = SCRATCH_PATH, size: int | None = None) -> None:
    """Create the scratch file if needed (under MPI: rank 0 writes, the others wait)."""
    size = size or SCRATCH_SIZE

    if mpi.is_root():
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError as e:
            raise UsageError(f"no PATH given, so gdsbench reads its scratch file {path} in the working directory "
                             f"({os.getcwd()}), and cannot make its folder there: {writable.why_not(path, e)}; give a "
                             "PATH, or start gdsbench in a directory it may write in") from None
        if not os.path.exists(path) or os.path.getsize(path) != size:  # said on a log too, not only by a bar
            print(f"gdsbench: writing a {format_size(size)} scratch file to read, {path} (once; later runs reuse it)",
                  file=sys.stderr, flush=True)
        prepare(path, size, progress=progress_printer("preparing scratch target " + path),
                size_flag="gdsbench's scratch file of")  # a size no flag gave: not named as --size
    mpi.barrier()

