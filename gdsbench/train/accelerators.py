"""N emulated accelerators: spawned processes on this host, started together
and held in step by a barrier in shared memory; or, under mpirun, one per MPI
rank, held by MPI's barrier. Either way every accelerator's record reaches
the caller (rank 0)."""

from __future__ import annotations

import errno
import mmap
import os
import resource
import socket
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from gdsbench import _native
from gdsbench.execution import mpi
from gdsbench.execution.loops import sample_readers
from gdsbench.execution.processes import Cancelled, Children, ParentLink
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import JobSpec
from gdsbench.train import parquet
from gdsbench.train.dataset import Dataset
from gdsbench.train.pipeline import Accelerator, AcceleratorRecord, MpiBarrier, RowGroupLoader, SoloBarrier, shared_barrier
from gdsbench.train.workloads import Workload

CACHE_SAMPLE_FILES = 256  # files looked at to estimate how much of a dataset is in the page cache


@dataclass(frozen=True)
class TrainConfig:
    workload: Workload
    dataset: Dataset
    spec: JobSpec  # resolved: mode, engine, bs (the transfer size), qd (chunks in flight per reader), direct, verify, gpu
    accelerators: int
    epochs: int = 1
    max_steps: int = 0  # 0: DLIO's steps per epoch


def make_readers(config: TrainConfig, rank: int) -> list:
    """One sample reader per read thread (parquet's: per read a worker keeps in flight), its buffers
    on this accelerator's GPU in GPU modes."""
    spec, w = config.spec, config.workload
    count = w.read_threads
    if w.file_format.row_groups:
        count *= RowGroupLoader.readers_per_worker(config.dataset, w.read_threads, parquet.WINDOW)
    return sample_readers(spec, spec.gpu[rank % len(spec.gpu)], count)


def run_accelerator(config: TrainConfig, rank: int, barrier, readers=None, should_stop=lambda: False,
                    on_arrival=None) -> AcceleratorRecord:
    """Every epoch of one accelerator, in this process."""
    readers = readers if readers is not None else make_readers(config, rank)
    ranks = config.accelerators
    accelerator = Accelerator(rank, ranks, config.workload, config.dataset, readers, barrier, config.max_steps,
                              should_stop, on_arrival)
    out = AcceleratorRecord(rank=rank, host=socket.gethostname())
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    for epoch in range(config.epochs):
        record, nbytes, samples = accelerator.run_epoch(epoch)
        out.epochs.append(record)
        out.bytes_read += nbytes
        out.samples_read += samples
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    out.cpu_s = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    out.latency = _native.LatencyHistogram()
    for r in readers:
        out.latency.merge(r.latency)
        out.verified_blocks += r.verified_blocks
        out.verify_mismatches += r.verify_mismatches
        if r.verify_mismatches and out.first_mismatch is None:
            out.first_mismatch = f"{r.first_mismatch_path} at offset {r.first_mismatch_offset}"
    return out


def _child(rank: int, config: TrainConfig, barrier_path: str, control, report, parent_pid: int) -> None:
    """Body of one accelerator process (spawned)."""
    link = ParentLink(control, report, parent_pid)
    info = {"host": socket.gethostname(), "pid": os.getpid(), "rank": rank}

    def body() -> AcceleratorRecord:
        with open(barrier_path, "r+b") as f:
            memory = mmap.mmap(f.fileno(), _native.BARRIER_BYTES)
        barrier = shared_barrier(memory)
        readers = make_readers(config, rank)
        try:
            link.ready_then_wait()
        except Cancelled:
            raise KeyboardInterrupt from None
        return run_accelerator(config, rank, barrier, readers, link.cancel_asked,
                               lambda epoch, step: link.send(("arrived", epoch, step)))

    link.report_failures(body, info)


BARRIER_PREFIX = "gdsbench-barrier-"
SHARED_MEMORY = "/dev/shm"  # where the step barrier's file is made, where writable (else the temporary directory)


def _barrier_folder() -> str:
    writable = os.path.isdir(SHARED_MEMORY) and os.access(SHARED_MEMORY, os.W_OK)
    return SHARED_MEMORY if writable else tempfile.gettempdir()


def _new_barrier_file(folder: str) -> tuple[str, int]:
    """A new file for the barrier, its page allocated now: on a full filesystem a mapping of a page
    with nothing behind it is a SIGBUS at its first touch, with no message; here it is one line."""
    fd, path = None, None
    try:
        fd, path = tempfile.mkstemp(prefix=f"{BARRIER_PREFIX}{os.getpid()}-", dir=folder)
        os.posix_fallocate(fd, 0, mmap.PAGESIZE)
    except OSError as e:
        if fd is not None:
            os.close(fd)
            _unlink(path)
        full = e.errno in (errno.ENOSPC, errno.EDQUOT)
        raise UsageError(f"{folder}: {'full' if full else 'unusable'} ({e.strerror}): the accelerators' step barrier "
                         f"needs a {mmap.PAGESIZE}-byte file there; free some space in {folder}, or emulate one "
                         "accelerator (--accelerators 1 needs none)") from None
    return path, fd


def check_barrier_room() -> None:
    """UsageError where the barrier's file cannot be made (a full /dev/shm): before anything runs."""
    path, fd = _new_barrier_file(_barrier_folder())
    os.close(fd)
    _unlink(path)


def _barrier_file(parties: int) -> tuple[str, mmap.mmap, object]:
    """A fresh file in /dev/shm (else the temporary directory), mapped, holding an initialised
    barrier. Its name carries this process's id, so that one a killed run left is removed."""
    folder = _barrier_folder()
    for name in os.listdir(folder):  # left by a run killed while its accelerators started
        owner = name[len(BARRIER_PREFIX):].split("-")[0]
        if name.startswith(BARRIER_PREFIX) and owner.isdigit() and not _alive(int(owner)):
            _unlink(os.path.join(folder, name))
    path, fd = _new_barrier_file(folder)
    try:
        memory = mmap.mmap(fd, mmap.PAGESIZE)
    finally:
        os.close(fd)
    return path, memory, shared_barrier(memory, parties)


def evict(dataset: Dataset) -> None:
    """Drop the dataset's pages from the page cache (a cold start, as DLIO's drop_caches)."""
    for path, size in zip(dataset.paths, dataset.file_sizes):
        dataset.folder.evict(path, int(size))


def cached_fraction(dataset: Dataset) -> float | None:
    """The fraction of the dataset in the page cache, from up to 256 of its files spread over it
    (None for a remote dataset: no page cache here, and the server's cannot be seen)."""
    if dataset.folder.remote:
        return None
    picks = np.unique(np.linspace(0, len(dataset.paths) - 1, min(CACHE_SAMPLE_FILES, len(dataset.paths))).astype(int))
    sizes = [int(dataset.file_sizes[i]) for i in picks]
    cached = [dataset.folder.cached_fraction(dataset.paths[i], s) * s for i, s in zip(picks, sizes) if s]
    return sum(cached) / max(1, sum(sizes))


def run(config: TrainConfig) -> list[AcceleratorRecord] | None:
    """Every accelerator's record (rank 0 under MPI; the other ranks get None).
    A failed accelerator ends the run within seconds, naming it."""
    comm = mpi.world()
    if comm is not None:
        if comm.Get_size() != config.accelerators:
            raise UsageError(f"--accelerators {config.accelerators}: under mpirun each rank is one accelerator; "
                             f"this job has {comm.Get_size()} ranks (leave --accelerators out)")
        readers = make_readers(config, comm.Get_rank())
        comm.Barrier()
        record = run_accelerator(config, comm.Get_rank(), MpiBarrier(comm), readers)
        records = comm.gather(record, root=0)
        return records if comm.Get_rank() == 0 else None
    if config.accelerators == 1:  # nothing to wait for: in this process
        return [run_accelerator(config, 0, SoloBarrier())]
    path, memory, barrier = _barrier_file(config.accelerators)
    try:
        children = Children(_child, [(rank, config, path) for rank in range(config.accelerators)])
        watch = StallWatch(config.accelerators, lambda rank: children.procs[rank].pid)

        def on_message(rank: int, message: tuple) -> None:
            if message[0] == "arrived":
                watch.arrived(rank, message[1], message[2])

        def tick() -> None:
            if len(children.ready) == config.accelerators:
                _unlink(path)  # every accelerator has it mapped: a killed run leaves no file behind
            watch.check()

        ended = children.supervise(on_message, tick, on_stop=barrier.abort)
    finally:
        memory.close()
        _unlink(path)
    return [message[1] for message in ended]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class StallWatch:
    """Names the accelerators holding a step up. Each says when it reaches a step's barrier;
    where some have waited there far longer than steps have taken (STALL_FACTOR times the
    median, and STALL_MIN_S at least), it says once which have not arrived: stopped, or in a
    read that does not return. Ctrl-C then ends the run."""

    STALL_FACTOR = 10
    STALL_MIN_S = 5.0
    FIRST_STEP_S = 60.0  # before any step has completed there is nothing to compare with

    def __init__(self, parties: int, pid_of, say=None, clock=time.monotonic):
        self.parties, self.pid_of, self.clock = parties, pid_of, clock
        self.say = say or (lambda text: print(f"gdsbench: warning: {text}", file=sys.stderr, flush=True))
        self.arrivals: dict[tuple[int, int], dict[int, float]] = {}
        self.completed: list[float] = []  # when each step's last accelerator arrived
        self.reported: set[tuple[int, int]] = set()

    def arrived(self, rank: int, epoch: int, step: int) -> None:
        key = (epoch, step)
        at = self.arrivals.setdefault(key, {})
        at[rank] = self.clock()
        if len(at) == self.parties:
            self.completed.append(max(at.values()))
            del self.arrivals[key]

    def check(self) -> None:
        if not self.arrivals:
            return
        key = min(self.arrivals)
        if key in self.reported:
            return
        waited = self.clock() - min(self.arrivals[key].values())
        gaps = np.diff(self.completed)
        typical = float(np.median(gaps)) if len(gaps) else None
        limit = max(self.STALL_MIN_S, self.STALL_FACTOR * typical) if typical is not None else self.FIRST_STEP_S
        if waited < limit:
            return
        self.reported.add(key)
        missing = [r for r in range(self.parties) if r not in self.arrivals[key]]
        names = ", ".join(f"{r} (pid {self.pid_of(r)})" for r in missing)
        took = f"steps so far took {typical:.3g} s (median)" if typical is not None else "no step has completed yet"
        self.say(f"accelerator {names} has not reached the barrier of epoch {key[0] + 1} step {key[1] + 1}: the others "
                 f"have waited {waited:.0f} s there, and {took}. It is stalled (stopped, or in a read that does not "
                 "return); Ctrl-C ends the run")
