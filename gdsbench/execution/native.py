"""The bridge to the native core: a resolved JobSpec as the native Job, and
one part run natively in this process. A leaf: loops.py runs parts through
it, and it uses no other module of execution/."""

from __future__ import annotations

from gdsbench import _native
from gdsbench.execution.record import RunRecord
from gdsbench.job.spec import OPTIONS, JobSpec
from gdsbench.system.pattern import check_device

# What a poll callback returns to the native run.
POLL_CONTINUE, POLL_CANCEL, POLL_STONEWALL = 0, 1, 2


# Native Job attributes set by name, not from JobSpec's table of native fields: the mode (a
# string parsed natively), the direction (from --rw), and the engine's own options.
_SET_BY_NAME = ("mode", "direction", "engine_options")


def _check_against_native() -> None:
    ours = {opt.name for opt in OPTIONS if opt.native} - set(_SET_BY_NAME)
    if ours != set(_native.Job.SPEC_FIELDS):
        raise ImportError(f"gdsbench._native.Job and JobSpec disagree on native fields: "
                          f"{sorted(ours ^ set(_native.Job.SPEC_FIELDS))}; rebuild gdsbench (scripts/setup)")


_check_against_native()


def to_native(spec: JobSpec) -> _native.Job:
    """The resolved spec as the native Job struct (same field names)."""
    job = _native.Job()
    for opt in OPTIONS:
        if opt.native:
            value = getattr(spec, opt.name)
            setattr(job, opt.name, list(value) if opt.kind == "gpus" else value)
    job.engine_options = {o.name: int(getattr(spec, o.name)) for o in OPTIONS if o.engine == spec.engine}
    job.direction = spec.direction
    return job


def run_natively(spec: JobSpec, poll, on_ready) -> RunRecord:
    """Run one resolved part in this process, natively."""
    check = check_device if spec.real_gpu and spec.verify else None
    return RunRecord.from_native(_native.run(to_native(spec), poll, check, on_ready))
