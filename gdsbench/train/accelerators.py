"""N emulated accelerators: spawned processes on this host, started together
and held in step by a barrier in shared memory; or, under mpirun, one per MPI
rank, held by MPI's barrier. Either way every accelerator's record reaches
the caller (rank 0)."""

from __future__ import annotations

import mmap
import os
import resource
import socket
import tempfile
from dataclasses import dataclass

import numpy as np

from gdsbench import _native
from gdsbench.execution import kvikio_mode, mpi
from gdsbench.execution.native import to_native
from gdsbench.execution.processes import Children, ParentLink, _Cancelled
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import JobSpec
from gdsbench.system import pagecache
from gdsbench.system.pattern import check_device
from gdsbench.train.dataset import Dataset
from gdsbench.train.pipeline import Accelerator, AcceleratorRecord, MpiBarrier, SoloBarrier, shared_barrier
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
    """One sample reader per read thread, its buffers on this accelerator's GPU in GPU modes."""
    spec = config.spec
    return sample_readers(spec, spec.gpu[rank % len(spec.gpu)], config.workload.read_threads)


def sample_readers(spec: JobSpec, gpu: int, count: int) -> list:
    """`count` readers of whole samples: native SampleReaders, or kvikio's in --mode kvikio."""
    if not spec.transfer.native:
        return [kvikio_mode.SampleReader(spec, gpu) for _ in range(count)]
    check = check_device if spec.real_gpu and spec.verify else None
    job = to_native(spec)
    return [_native.SampleReader(job, gpu, check) for _ in range(count)]


def run_accelerator(config: TrainConfig, rank: int, barrier, readers=None, should_stop=lambda: False
                    ) -> AcceleratorRecord:
    """Every epoch of one accelerator, in this process."""
    readers = readers if readers is not None else make_readers(config, rank)
    ranks = config.accelerators
    accelerator = Accelerator(rank, ranks, config.workload, config.dataset, readers, barrier, config.max_steps,
                              should_stop)
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
        except _Cancelled:
            raise KeyboardInterrupt from None
        return run_accelerator(config, rank, barrier, readers, link.cancel_asked)

    link.report_failures(body, info)


def _barrier_file(parties: int) -> tuple[str, mmap.mmap, object]:
    """A fresh file in /dev/shm (else the temporary directory), mapped, holding an initialised barrier."""
    folder = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    fd, path = tempfile.mkstemp(prefix="gdsbench-barrier-", dir=folder)
    try:
        os.ftruncate(fd, mmap.PAGESIZE)
        memory = mmap.mmap(fd, mmap.PAGESIZE)
    finally:
        os.close(fd)
    return path, memory, shared_barrier(memory, parties)


def evict(dataset: Dataset) -> None:
    """Drop the dataset's pages from the page cache (a cold start, as DLIO's drop_caches)."""
    for path in dataset.paths:
        pagecache.evict(path, 0, os.path.getsize(path))


def cached_fraction(dataset: Dataset) -> float:
    """The fraction of the dataset in the page cache, from up to 256 of its files spread over it."""
    picks = np.unique(np.linspace(0, len(dataset.paths) - 1, min(CACHE_SAMPLE_FILES, len(dataset.paths))).astype(int))
    sizes = [os.path.getsize(dataset.paths[i]) for i in picks]
    cached = [pagecache.cached_fraction(dataset.paths[i], 0, s) * s for i, s in zip(picks, sizes) if s]
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
        ended = children.supervise(on_failure=barrier.abort)
    finally:
        memory.close()
        os.unlink(path)
    return [message[1] for message in ended]
