"""The one place that says which loop moves a job's bytes: the native core's
(every mode whose declaration says native_loop) or kvikio's, driven from
Python (execution/kvikio_mode/). run, sweep, validate, checkpoint and the
processes and MPI ranks of one job run a part through run_part; train and its
probe read samples through sample_readers. Nothing else asks the mode which."""

from __future__ import annotations

from dataclasses import dataclass

from gdsbench import _native
from gdsbench.execution import kvikio_mode
from gdsbench.execution.native import POLL_CONTINUE, run_natively, to_native
from gdsbench.execution.record import RunRecord
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import JobSpec
from gdsbench.system.pattern import check_device


def progress_poll(progress, period_ns: int = 200_000_000):
    """A native poll callback that reports progress at most every period_ns."""
    if progress is None:
        return None
    last = [0]

    def poll(nbytes: int, elapsed_ns: int, worker_done: bool) -> int:
        if elapsed_ns >= last[0] + period_ns:
            last[0] = elapsed_ns
            progress(nbytes, elapsed_ns)
        return POLL_CONTINUE

    return poll


@dataclass(frozen=True)
class PartRun:
    record: RunRecord
    data_path: str | None = None  # kvikio's: the path its statistics saw (None: gpu_path tells it from the spec)
    notes: tuple[str, ...] = ()  # what a reader of the result must know of how this loop times


def run_part(spec: JobSpec, *, progress=None, poll=None, on_ready=None) -> PartRun:
    """Run one resolved part in this process, in its mode's loop.

    progress(bytes, elapsed_ns) is called a few times a second. poll and on_ready are the native
    loop's hooks for one of several processes or ranks (processes.py, mpi.py): kvikio's loop runs
    in one process alone (its mode is not many_processes), so it takes neither."""
    if spec.mode_declaration.native_loop:
        return PartRun(run_natively(spec, poll or progress_poll(progress), on_ready))
    if poll is not None or on_ready is not None:
        raise ValueError(f"--mode {spec.mode} runs in one process: no poll or start barrier to take")
    record, data_path = kvikio_mode.run(spec, progress)
    return PartRun(record, data_path, (kvikio_mode.TIMING_NOTE,))


def sample_readers(spec: JobSpec, gpu: int, count: int) -> list:
    """`count` readers of whole samples in the mode's loop: native SampleReaders, or kvikio's."""
    if not spec.mode_declaration.native_loop:
        return [kvikio_mode.SampleReader(spec, gpu) for _ in range(count)]
    check = check_device if spec.real_gpu and spec.verify else None
    job = to_native(spec)
    return [_native.SampleReader(job, gpu, check) for _ in range(count)]


def check_writes_regions(spec: JobSpec) -> None:
    """UsageError where the mode's loop writes no regions or objects (kvikio's reader reads only)."""
    if not spec.mode_declaration.native_loop:
        raise UsageError(f"--mode {spec.mode}: writes regions in the native loop only (kvikio's reader reads); "
                         "use another mode")


def sample_writers(spec: JobSpec, gpu: int, count: int) -> list:
    """`count` writers of whole regions or new objects (native SampleReaders made from a write job:
    their write() and create()); kvikio's loop writes none (UsageError)."""
    check_writes_regions(spec)
    return sample_readers(spec, gpu, count)


def sample_data_path(spec: JobSpec, typical_read: int) -> str | None:
    """What kvikio's reads of about this size pass through, from its settings, where the readers
    run in other processes (None from the native loop: system/gpu_path tells it from the spec)."""
    return None if spec.mode_declaration.native_loop else kvikio_mode.sample_data_path(spec, typical_read)
