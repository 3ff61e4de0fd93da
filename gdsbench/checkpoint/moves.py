"""How one checkpoint file's bytes move, wherever it lies (a local file, an S3 object): the whole
of it in --bs transfers, as a job of its own, native or kvikio's; its thread and buffers made
inside the rank's time (a fixed cost a file, small beside a large file's)."""

from __future__ import annotations

from gdsbench.execution.loops import run_part
from gdsbench.job.errors import UsageError, renamed_flags
from gdsbench.job.spec import JobSpec
from gdsbench.system import pattern


def as_read_flags(error: UsageError) -> UsageError:
    """A refusal of the read job's --bs or --qd, named as the user gave them (--read-bs, --read-qd)."""
    return renamed_flags(error, {"--bs": "--read-bs", "--qd": "--read-qd"})


def move_whole(spec: JobSpec, path: str, size: int, write: bool, fsync: bool, verify: bool) -> tuple[int, int, int | None]:
    """Write (or read, and check if asked) the whole of one file: its body in --bs transfers, the
    rest in one, a write with the file's own payload (pattern.file_seed). Returns (blocks checked, bad
    blocks, first bad offset)."""
    if write:
        spec = spec.replace(seed=pattern.file_seed(spec.seed, path))
    checked = bad = 0
    first = None
    body = size // spec.bs * spec.bs
    pieces = [(0, body, spec.bs), (body, size - body, size - body)]
    pieces = [p for p in pieces if p[1]]
    for i, (offset, length, bs) in enumerate(pieces):
        last = i == len(pieces) - 1
        job = spec.replace(path=path, rw="write" if write else "read", offset=offset, size=length, io_size=length, bs=bs,
                           qd=min(spec.qd, length // bs), threads=1, runtime_ns=0, ramp_ns=0, verify=verify and not write,
                           fsync_end=write and fsync and last, pattern="seq", stonewall=False, round_reads=0)
        record = run_part(job).record
        if record.interrupted:
            raise KeyboardInterrupt
        (t,) = record.threads
        checked, bad = checked + t.verified_blocks, bad + t.verify_mismatches
        if t.verify_mismatches and first is None:
            first = t.first_mismatch_offset
    return checked, bad, first
