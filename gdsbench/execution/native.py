"""The bridge to the native core: a resolved JobSpec as the native Job, and
one part run natively in this process. A leaf: runner, processes and MPI all
use it, and it uses none of them."""

from __future__ import annotations

from gdsbench import _native
from gdsbench.execution.record import RunRecord
from gdsbench.job.spec import OPTIONS, JobSpec
from gdsbench.system.pattern import check_device

# What a poll callback returns to the native run.
POLL_CONTINUE, POLL_CANCEL, POLL_STONEWALL = 0, 1, 2


def to_native(spec: JobSpec) -> _native.Job:
    """The resolved spec as the native Job struct (same field names)."""
    job = _native.Job()
    for opt in OPTIONS:
        if opt.native:
            value = getattr(spec, opt.name)
            setattr(job, opt.name, list(value) if opt.kind == "gpus" else value)
    return job


def run_part(spec: JobSpec, poll, on_ready) -> RunRecord:
    """Run one resolved part in this process, natively."""
    check = check_device if spec.real_gpu and spec.verify else None
    return RunRecord.from_native(_native.run(to_native(spec), poll, check, on_ready))
