"""`gdsbench checkpoint` from start to end, as MLPerf Storage v2.0 runs its
checkpoint workload (Submission_guidelines.md 2.2): every rank writes its
files of checkpoint 1, 2, ... N (models.py), each file fsync'd; the page
cache is cleared; then the N checkpoints are read back, each rank reading the
files of rank + ranks-per-node (DLIO's checkpoint_recovery_rank_shift, meant
to defeat a client's cache), every block checked against the pattern.

Ranks are spawned processes on this host, or MPI ranks. In MLPerf's subset
mode (--ranks N, fewer than the model's TP x PP x DP) ranks 0..N-1 write and
read their share of the checkpoint: what one host of the full job would. A rank's time runs
from the start all ranks share to its last file closed (fsync'd for a write),
as DLIO times a rank; a checkpoint's duration is the longest rank's, and its
throughput its bytes over that duration: the minimum over ranks, as MLPerf
reports it. Local ranks time from one release, the parent's (see ranks_do), so
a rank the scheduler starts late counts its wait; MPI ranks, whose hosts'
clocks differ, each from the barrier's end as it saw it.

Where the checkpoints go is a place: a local or mounted directory (on_disk.py) or an S3
prefix (in_bucket.py), each keeping its folders' manifests (manifest.py) and one run's lock, and
replacing only what gdsbench wrote.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from gdsbench.checkpoint import RECORDED_JOB_OPTIONS, models
from gdsbench.checkpoint.in_bucket import Bucket
from gdsbench.checkpoint.models import CheckpointFile, Model
from gdsbench.checkpoint.moves import as_read_flags
from gdsbench.checkpoint.on_disk import Directory
from gdsbench.execution import mpi
from gdsbench.execution.loops import sample_data_path
from gdsbench.execution.processes import Cancelled, Children, ParentLink
from gdsbench.execution.progress import POINTS, Progress
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import JobSpec
from gdsbench.job.units import format_rate, format_size
from gdsbench.results.store import keep_row
from gdsbench.system import gpu_path
from gdsbench.system.environment import meminfo
from gdsbench.system.targets import protocol_of

PHASES = ("write", "read")


@dataclass(frozen=True)
class CheckpointRun:
    model: Model
    directory: str
    checkpoints: int  # written, then each read back once
    spec: JobSpec  # how each file is moved: mode, engine, bs, qd, direct (rw set per phase)
    scale: float = 1.0  # every tensor's bytes times this
    fsync: bool = True  # each file fsync'd after it is written, inside its rank's time
    ranks_per_node: int = 0  # the read shift (0: every rank on this host)
    subset: int = 0  # MLPerf's subset mode: only ranks 0..subset-1 of the model's take part (0: all)
    verify: bool = True  # every block read back checked, inside its rank's time (as torch.load checks CRCs)
    read_spec: JobSpec | None = None  # how each file is read back, where not as it was written (--read-bs, --read-qd)

    def moved(self, phase: str) -> JobSpec:
        """How a phase moves each file: the read job where one was given, else the write job."""
        return (self.read_spec if phase == "read" and self.read_spec else self.spec).replace(rw=phase)

    @property
    def ranks(self) -> int:
        """The ranks that write and read: the model's TP x PP x DP, or the subset's."""
        return self.subset or self.model.ranks

    def files(self, rank: int) -> list[CheckpointFile]:
        return models.rank_files(self.model, rank, self.scale)

    @property
    def place(self) -> Directory | Bucket:
        """Where the checkpoints lie: an S3 prefix (s3://BUCKET/PREFIX/), else a directory."""
        return Bucket(self.directory) if protocol_of(self.directory) == "s3" else Directory(self.directory)

    def folder(self, checkpoint: int) -> str:
        return os.path.join(self.directory, models.folder(checkpoint))

    def shift(self) -> int:
        return self.ranks_per_node or self.ranks

    def info(self) -> dict:
        sizes = [sum(f.size for f in self.files(r)) for r in range(self.ranks)]
        read = self.moved("read")
        return {"kind": "checkpoint", "model": self.model.to_dict(), "scale": self.scale, "directory": self.directory,
                "checkpoints": self.checkpoints, "ranks": self.ranks, "subset": bool(self.subset), "fsync": self.fsync,
                "verify": self.verify,
                "read_shift": self.shift(), "checkpoint_bytes": sum(sizes), "rank_bytes": sizes,
                "job": {k: getattr(self.spec, k) for k in RECORDED_JOB_OPTIONS}
                | {"read_bs": read.bs, "read_qd": read.qd},
                "data_path": {phase: self.data_path(phase) for phase in PHASES}}

    def data_path(self, phase: str) -> str:
        """What a phase's bytes pass through, in words (kvikio's: from its settings, as train's are:
        the ranks that move them are other processes)."""
        spec = self.moved(phase)
        if self.place.remote:
            return self.place.data_path(spec)
        return gpu_path.data_path(spec, None, sample_data_path(spec, spec.bs))


@dataclass
class RankRecord:
    rank: int
    host: str
    bytes: int
    seconds: float  # to its last file closed: from its own start here; ranks_do makes it from the one release
    files: int
    verified_blocks: int = 0
    verify_mismatches: int = 0
    first_mismatch: str | None = None
    file_seconds: list[float] = field(default_factory=list)  # each file's (object's) own time, in order
    ended_ns: int = 0  # time.monotonic_ns() at its last file closed: this host's CLOCK_MONOTONIC


# ---- one rank's part of a phase ----

def write_rank(run: CheckpointRun, checkpoint: int, rank: int) -> RankRecord:
    """Rank `rank`'s files of one checkpoint, each created new in the folder this run made (whose
    manifest names it), written with the pattern, made durable (fsync'd; an object completed)."""
    folder, files, place = run.folder(checkpoint), run.files(rank), run.place
    out = RankRecord(rank, socket.gethostname(), sum(f.size for f in files), 0.0, len(files))
    started = last = time.monotonic_ns()
    for f in files:
        place.write(run, os.path.join(folder, f.name), f.size)
        out.file_seconds.append((time.monotonic_ns() - last) / 1e9)
        last = time.monotonic_ns()
    out.ended_ns = last
    out.seconds = (last - started) / 1e9
    return out


def read_rank(run: CheckpointRun, checkpoint: int, rank: int) -> RankRecord:
    """The files of rank + ranks-per-node, read whole and checked block by block."""
    source = (rank + run.shift()) % run.ranks
    folder, files, place = run.folder(checkpoint), run.files(source), run.place
    out = RankRecord(rank, socket.gethostname(), sum(f.size for f in files), 0.0, len(files))
    started = last = time.monotonic_ns()
    for f in files:
        checked, bad, first = place.read(run, os.path.join(folder, f.name), f.size)
        out.file_seconds.append((time.monotonic_ns() - last) / 1e9)
        last = time.monotonic_ns()
        out.verified_blocks += checked
        out.verify_mismatches += bad
        if bad and out.first_mismatch is None:
            out.first_mismatch = f"{f.name} of {models.folder(checkpoint)} at offset {first}"
    out.ended_ns = last
    out.seconds = (last - started) / 1e9
    return out


DO = {"write": write_rank, "read": read_rank}

LATE_RANK = "GDSBENCH_TEST_LATE_RANK"  # tests only: "RANK:SECONDS", that local rank starts that much after the release


def _late_start(rank: int) -> float:
    """How long the tests ask this local rank to wait after the release before it starts (0: none): a
    rank the scheduler runs late, made on purpose."""
    asked = os.environ.get(LATE_RANK, "")
    which, _, seconds = asked.partition(":")
    return float(seconds) if asked and int(which) == rank else 0.0


def _rank_child(run: CheckpointRun, phase: str, checkpoint: int, rank: int, control, report, parent_pid: int) -> None:
    """Body of one rank's process for one phase of one checkpoint (spawned)."""
    link = ParentLink(control, report, parent_pid)

    def body() -> RankRecord:
        try:
            link.ready_then_wait()  # every rank starts together, as after DLIO's barrier
        except Cancelled:
            raise KeyboardInterrupt from None
        time.sleep(_late_start(rank))
        return DO[phase](run, checkpoint, rank)

    link.report_failures(body, {"host": socket.gethostname(), "pid": os.getpid(), "rank": rank})


class _Ranks(Children):
    """The local ranks' processes, noting when they are released: the one instant, on this host's
    CLOCK_MONOTONIC (time.monotonic_ns(), the same in every process here), that every rank's
    time runs from. "go" is the release (processes.py's protocol): stamped just before it is sent."""

    released_ns: int | None = None

    def tell(self, message: str, who=None) -> None:
        if message == "go" and self.released_ns is None:
            self.released_ns = time.monotonic_ns()
        super().tell(message, who)


def check_memory(run: CheckpointRun, local_ranks: int) -> None:
    """UsageError where this host's ranks' transfer buffers are more than the memory available: each
    rank moves one file at a time, up to --qd transfers of --bs in flight (fewer for a smaller file),
    in each phase; the read job's flags named as given."""
    available = meminfo("MemAvailable")
    if available is None:
        return
    largest = max(f.size for r in range(run.ranks) for f in run.files(r))
    for phase in PHASES:
        spec = run.moved(phase)
        need = local_ranks * min(spec.qd, max(1, largest // spec.bs)) * spec.bs
        if need > available:
            error = UsageError(f"--qd {spec.qd} x --bs {format_size(spec.bs)} x {local_ranks} ranks on this host: "
                               f"{format_size(need)} of buffers, more than the memory available "
                               f"({format_size(available)}); lower --bs or --qd")
            raise as_read_flags(error) if phase == "read" and run.read_spec else error


def ranks_do(run: CheckpointRun, phase: str, checkpoint: int) -> list[RankRecord] | None:
    """Every rank's part of one phase: spawned processes, or under mpirun this rank's (rank 0 gets
    all the records, the others None). A rank that fails ends the phase naming it.

    What a rank's time measures. Local ranks: from the parent's release ("go", one stamp on this
    host's monotonic clock, which every process here shares) to the rank's last file closed, so a
    rank the scheduler starts late (8 ranks on 2 cores) counts its wait, as a training job waits
    for its slowest rank. MPI ranks, possibly on other hosts whose clocks are not the same: from
    the barrier's end as each rank saw it to its last file closed, its own clock's duration; a
    rank that leaves the barrier late does not count that lateness."""
    comm = mpi.world()
    if comm is not None:
        comm.Barrier()
        record = DO[phase](run, checkpoint, comm.Get_rank())
        records = comm.gather(record, root=0)
        return records if comm.Get_rank() == 0 else None
    children = _Ranks(_rank_child, [(run, phase, checkpoint, r) for r in range(run.ranks)])
    records = [message[1] for message in children.supervise()]
    for record in records:  # from the one release, not from each rank's own start
        record.seconds = (record.ended_ns - children.released_ns) / 1e9
    return records


# ---- the whole run ----

@contextlib.contextmanager
def placed(run: CheckpointRun) -> Iterator[object | None]:
    """Every rank made ready for the place (credentials: MPI ranks do not inherit rank 0's
    environment); rank 0 holds its lock for the run (a second run would remove our folders) and
    checks, before the first is written, every folder this run replaces, the room and O_DIRECT
    there. Yields the lock (rank 0's; None on the other ranks, which check the room alone)."""
    place = run.place
    place.prepare_rank(run)
    if not mpi.is_root():
        place.check_room(run)
        yield None
        return
    place.prepare(run)
    with place.hold(run) as lock:
        place.check(run)
        yield lock


@dataclass
class Outcome:
    rows: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def summarise(run: CheckpointRun, phase: str, checkpoint: int, records: list[RankRecord]) -> dict:
    """One phase of one checkpoint as MLPerf reports it (duration: the longest rank's; throughput:
    the checkpoint's bytes over it, the minimum over ranks), with every rank's figures beside it."""
    records = sorted(records, key=lambda r: r.rank)
    total = sum(r.bytes for r in records)
    seconds = [r.seconds for r in records]
    slowest = max(records, key=lambda r: r.seconds)
    ordered = sorted(seconds)
    return {"phase": phase, "checkpoint": checkpoint, "point_key": f"{phase}={checkpoint}", "model": run.model.name,
            "scale": run.scale, "ranks": len(records), "bytes": total, "duration_s": slowest.seconds,
            "throughput_bytes_per_s": total / slowest.seconds if slowest.seconds else 0.0,
            "rank_mean_s": sum(seconds) / len(seconds), "rank_median_s": ordered[len(ordered) // 2],
            "rank_min_s": ordered[0], "slowest_rank": slowest.rank, "slowest_host": slowest.host,
            "rank_seconds": seconds, "rank_bytes": [r.bytes for r in records], "rank_hosts": [r.host for r in records],
            "files": sum(r.files for r in records), "fsync": run.fsync and phase == "write",
            "verified_blocks": sum(r.verified_blocks for r in records),
            "verify_mismatches": sum(r.verify_mismatches for r in records),
            "first_mismatch": next((r.first_mismatch for r in records if r.first_mismatch), None),
            **_file_times([s for r in records for s in r.file_seconds])}


def _file_times(seconds: list[float]) -> dict:
    """Each file's (object's) own time over every rank: its median and longest."""
    ordered = sorted(seconds)
    return {"file_median_s": ordered[len(ordered) // 2], "file_max_s": ordered[-1]} if ordered else {}


def checkpoint(run: CheckpointRun, store=None, on_row=None, out: Outcome | None = None) -> Outcome:
    """Write every checkpoint, clear the cache, read every one back; each row saved as it is made
    (into `out`, which keeps them if the run is stopped part-way)."""
    out = out if out is not None else Outcome()
    root = mpi.is_root()
    comm = mpi.world()
    place = run.place
    if root:
        for folder in place.incomplete(run.directory):
            out.notes.append(f"{folder}: an INCOMPLETE checkpoint (a run stopped while writing it); it is never read "
                             "back, and is replaced when its number is written")
        place.prepare(run)
    # rank 0's bar on a terminal; each checkpoint's line is the command's own (on_row)
    ui = Progress(len(PHASES) * run.checkpoints, "checkpoint", POINTS) if store is not None else None
    try:
        cached = None
        for phase in PHASES:
            if phase == "read":
                cached = place.clear_cache(run)
                if cached is None and root:
                    out.notes.append(place.CACHE_NOTE)
                elif cached is not None and cached > 0.01:
                    out.notes.append(f"{cached:.0%} of the checkpoints' pages stayed in the page cache after it was cleared "
                                     "(pages another process maps, or the cache refused): some reads may come from memory")
            for k in range(1, run.checkpoints + 1):
                if phase == "write" and root:
                    note = place.make_room(run, k)
                    if note:
                        out.notes.append(note)
                    place.write_manifest(run, k, complete=False)
                if phase == "read" and root and not place.complete(run, k):
                    raise UsageError(f"{run.folder(k)}: not a complete checkpoint of this model and scale; it is not read")
                if comm is not None:
                    comm.Barrier()  # the folder is there before any rank writes into it
                if ui:
                    ui.start(f"{phase} checkpoint {k}")
                records = ranks_do(run, phase, k)
                if records is None:  # an MPI rank other than 0
                    continue
                if phase == "write":
                    place.write_manifest(run, k, complete=True)
                row = dict(summarise(run, phase, k, records), cached_fraction=cached if phase == "read" else None)
                if ui:
                    ui.finish(rate=format_rate(row["throughput_bytes_per_s"]))
                keep_row(row, out.rows, store, on_row)
    finally:
        if ui:
            ui.close()
    return out
