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

Crash safety. A checkpoint's folder holds a manifest, gdsbench-checkpoint.json,
written before any of its files (complete: false) and again after every rank
has written and fsync'd them (complete: true, with each file's size, inode and
modification time). A checkpoint without a complete manifest is never read
back. A run names the incomplete ones it finds, and removes a folder only
where its manifest says gdsbench wrote it and every file in it is one gdsbench
made and nobody changed since: the same size, inode and modification time as
recorded, or, in an incomplete checkpoint (nothing recorded yet), the size it
was made with and gdsbench's pattern or a hole at its start. Anything else is
refused, naming the file, and left as it is; every folder the run will replace
is checked before the first is written.

One run at a time writes a directory: it holds an exclusive lock (flock on
DIR/.gdsbench-checkpoint-lock, which names its pid and run) from before its
checks to its end, and a second is refused naming the first.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import stat
import time
from dataclasses import dataclass, field

from gdsbench.checkpoint import models
from gdsbench.checkpoint.models import CheckpointFile, Model
from gdsbench.execution import mpi
from gdsbench.execution.loops import run_part, sample_data_path
from gdsbench.execution.parts import check_direct_in
from gdsbench.execution.processes import Cancelled, Children, ParentLink
from gdsbench.execution.progress import POINTS, Progress
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import JobSpec
from gdsbench.job.units import format_rate, format_size
from gdsbench.results.store import keep_row
from gdsbench.system import gpu_path, pagecache
from gdsbench.system.folders import LocalFolder
from gdsbench.system.pattern import has_pattern

MANIFEST = "gdsbench-checkpoint.json"
LOCK = ".gdsbench-checkpoint-lock"
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

    @property
    def ranks(self) -> int:
        """The ranks that write and read: the model's TP x PP x DP, or the subset's."""
        return self.subset or self.model.ranks

    def files(self, rank: int) -> list[CheckpointFile]:
        return models.rank_files(self.model, rank, self.scale)

    def folder(self, checkpoint: int) -> str:
        return os.path.join(self.directory, models.folder(checkpoint))

    def shift(self) -> int:
        return self.ranks_per_node or self.ranks

    def info(self) -> dict:
        sizes = [sum(f.size for f in self.files(r)) for r in range(self.ranks)]
        return {"kind": "checkpoint", "model": self.model.to_dict(), "scale": self.scale, "directory": self.directory,
                "checkpoints": self.checkpoints, "ranks": self.ranks, "subset": bool(self.subset), "fsync": self.fsync,
                "verify": self.verify,
                "read_shift": self.shift(), "checkpoint_bytes": sum(sizes), "rank_bytes": sizes,
                "job": {k: getattr(self.spec, k) for k in ("mode", "engine", "bs", "qd", "direct", "gpu_backend")},
                "data_path": {phase: self.data_path(phase) for phase in PHASES}}

    def data_path(self, phase: str) -> str:
        """What a phase's bytes pass through, in words (kvikio's: from its settings, as train's are:
        the ranks that move them are other processes)."""
        spec = self.spec.replace(rw=phase)
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
    ended_ns: int = 0  # time.monotonic_ns() at its last file closed: this host's CLOCK_MONOTONIC


# ---- one rank's part of a phase ----

def _move(spec: JobSpec, path: str, size: int, write: bool, fsync: bool, verify: bool) -> tuple[int, int, int | None]:
    """Write (or read, and check if asked) the whole of one file: its body in --bs transfers, the
    rest in one, each a job of its own, native or kvikio's (its thread and buffers made inside
    the rank's time: a fixed cost a file, small beside a large file's). Returns (blocks checked,
    bad blocks, first bad offset)."""
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


def write_rank(run: CheckpointRun, checkpoint: int, rank: int) -> RankRecord:
    """Rank `rank`'s files of one checkpoint, each created new (never one that was there: O_EXCL,
    in the folder this run made, whose manifest names it), written with the pattern, fsync'd."""
    folder, files = run.folder(checkpoint), run.files(rank)
    started = time.monotonic_ns()
    for f in files:
        path = os.path.join(folder, f.name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            os.ftruncate(fd, f.size)
        finally:
            os.close(fd)
        _move(run.spec, path, f.size, write=True, fsync=run.fsync, verify=False)
    ended = time.monotonic_ns()
    return RankRecord(rank, socket.gethostname(), sum(f.size for f in files), (ended - started) / 1e9, len(files),
                      ended_ns=ended)


def read_rank(run: CheckpointRun, checkpoint: int, rank: int) -> RankRecord:
    """The files of rank + ranks-per-node, read whole and checked block by block."""
    source = (rank + run.shift()) % run.ranks
    folder, files = run.folder(checkpoint), run.files(source)
    out = RankRecord(rank, socket.gethostname(), sum(f.size for f in files), 0.0, len(files))
    started = time.monotonic_ns()
    for f in files:
        checked, bad, first = _move(run.spec, os.path.join(folder, f.name), f.size, write=False, fsync=False,
                                    verify=run.verify)
        out.verified_blocks += checked
        out.verify_mismatches += bad
        if bad and out.first_mismatch is None:
            out.first_mismatch = f"{f.name} of {models.folder(checkpoint)} at offset {first}"
    out.ended_ns = time.monotonic_ns()
    out.seconds = (out.ended_ns - started) / 1e9
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


# ---- the checkpoints' folders ----

def read_manifest(folder: str) -> dict | None:
    try:
        with open(os.path.join(folder, MANIFEST)) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("gdsbench_checkpoint") == 1 else None


def write_manifest(run: CheckpointRun, checkpoint: int, complete: bool) -> None:
    """The folder's manifest: the files each rank writes, and once complete, what each file was
    left as (`written`: its size, inode and modification time), the proof that it is still ours."""
    folder = run.folder(checkpoint)
    record = {"gdsbench_checkpoint": 1, "complete": complete, "checkpoint": checkpoint,
              "model": run.model.to_dict(), "scale": run.scale,
              "files": {r: [[f.name, f.size] for f in run.files(r)] for r in range(run.ranks)}}
    if complete:
        record["written"] = {f.name: proof for r in range(run.ranks) for f in run.files(r)
                             if (proof := _identity(os.path.join(folder, f.name))) is not None}
    tmp = os.path.join(folder, f".{MANIFEST}.partial-{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(record, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(folder, MANIFEST))
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _identity(path: str) -> dict | None:
    """What a file is now, as the manifest records it (None: not there, as a rank's file on another
    host's local disk may not be)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return {"size": st.st_size, "inode": st.st_ino, "mtime_ns": st.st_mtime_ns}


def _planned_sizes(manifest: dict) -> dict[str, int] | None:
    """The manifest's files, name -> size (None: a manifest damaged by hand)."""
    try:
        return {name: int(size) for files in manifest.get("files", {}).values() for name, size in files}
    except (TypeError, ValueError, AttributeError):
        return None


def _starts_as_ours(path: str) -> bool:
    """Its first block is gdsbench's pattern, or a hole its rank had not yet written."""
    with open(path, "rb") as f:
        head = f.read(models.BLOCK)
    return head == bytes(len(head)) or has_pattern(path, 0)


def _changed(path: str, size: int, proof: dict | None) -> str | None:
    """Why a file named in a manifest is no longer the one gdsbench made (None: it is)."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if isinstance(proof, dict):  # a complete checkpoint: what each file was left as
        now = _identity(path)
        differ = [f"{k} {proof.get(k)} then, {now[k]} now" for k in now if proof.get(k) != now[k]]
        return f"changed since gdsbench wrote it ({'; '.join(differ)})" if differ else None
    if st.st_size == 0:  # made, not yet sized
        return None
    if st.st_size != size:
        return f"{st.st_size} bytes, and gdsbench made it {size}"
    return None if _starts_as_ours(path) else "does not start with gdsbench's pattern (another program wrote it)"


def foreign(folder: str) -> str | None:
    """Why a checkpoint folder is not wholly gdsbench's, naming what (None: it is). Wholly gdsbench's:
    its manifest (written before any file), and nothing in it but the manifest's leftovers and
    regular files the manifest names, each the one gdsbench made (_changed): a run stopped part-way
    leaves some short or unwritten."""
    if os.path.islink(folder) or not os.path.isdir(folder):
        return f"{folder}: there already, and not a checkpoint gdsbench wrote (not a directory)"
    manifest = read_manifest(folder)
    sizes = _planned_sizes(manifest) if manifest is not None else None
    if sizes is None:
        return f"{folder}: there already, and not a checkpoint gdsbench wrote (no manifest of gdsbench's in it)"
    written = manifest.get("written") if isinstance(manifest.get("written"), dict) else {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name == MANIFEST or name.startswith(f".{MANIFEST}.partial-"):
            continue
        if name not in sizes:
            return f"{folder}: not a checkpoint gdsbench wrote: it holds {name}, which gdsbench did not make"
        why = _changed(path, sizes[name], written.get(name))
        if why:
            return f"{path}: {why}"
    return None


def complete(run: CheckpointRun, checkpoint: int) -> bool:
    """Whether checkpoint k was written whole: its manifest says so, for this model, scale and ranks."""
    m = read_manifest(run.folder(checkpoint))
    return bool(m and m.get("complete") is True and m.get("model") == run.model.to_dict() and m.get("scale") == run.scale
                and len(m.get("files", ())) == run.ranks)


def incomplete_folders(directory: str) -> list[str]:
    """Checkpoint folders of gdsbench's in directory whose writing never finished."""
    if not os.path.isdir(directory):
        return []
    out = []
    for name in sorted(os.listdir(directory)):
        m = read_manifest(os.path.join(directory, name))
        if name.startswith("global_epoch") and m is not None and m.get("complete") is not True:
            out.append(os.path.join(directory, name))
    return out


def _refuse(why: str) -> UsageError:
    return UsageError(f"{why}; gdsbench removes only what it wrote, so it is left as it is: give another directory, "
                      "or remove it yourself")


def check_folders(run: CheckpointRun) -> None:
    """UsageError where a folder this run would replace is not wholly gdsbench's: every one is
    checked before the first checkpoint is written."""
    for k in range(1, run.checkpoints + 1):
        folder = run.folder(k)
        why = foreign(folder) if os.path.lexists(folder) else None
        if why:
            raise _refuse(why)


def make_room(run: CheckpointRun, checkpoint: int) -> str | None:
    """A new, empty folder for checkpoint k. One of gdsbench's already there is removed first (said
    in the returned note); anything else under the name is refused, and left as it is."""
    folder = run.folder(checkpoint)
    note = None
    if os.path.lexists(folder):
        why = foreign(folder)
        if why:
            raise _refuse(why)
        state = "complete" if read_manifest(folder).get("complete") is True else "INCOMPLETE"
        shutil.rmtree(folder)
        note = f"removed {folder}, an earlier {state} checkpoint gdsbench wrote"
    os.makedirs(folder)
    return note


class DirectoryLock:
    """This process's hold on a checkpoint directory (a flock on DIR/.gdsbench-checkpoint-lock): a
    second run into it would remove the first's folders as incomplete. The file says who holds
    it: {"gdsbench_checkpoint_lock": 1, "pid": ..., "run": ...}; it stays, as a run's lock does
    (removing it could let two runs lock two files of one name)."""

    def __init__(self, directory: str):
        self.directory = directory
        self.path = os.path.join(directory, LOCK)
        self.fd: int | None = None

    def __enter__(self) -> DirectoryLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise UsageError(f"DIR {self.directory}: cannot make its lock file {LOCK} ({e.strerror}); give a "
                             "directory you may write") from None
        try:
            self._take(fd)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.say(None)
        return self

    def _take(self, fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_record(fd) or {}  # {}: caught while its holder writes it
            raise UsageError(f"DIR {self.directory}: another gdsbench checkpoint (pid {holder.get('pid', '?')}, run "
                             f"{holder.get('run') or '?'}) is writing checkpoints there now; wait for it to end, or give "
                             "another directory") from None
        if _lock_record(fd) is None:  # a file of that name that is not ours: never written over
            raise UsageError(f"DIR {self.directory}: its {LOCK} was not written by gdsbench; remove it, or give another "
                             "directory")

    def say(self, run_path: str | None) -> None:
        """Name this process, and its run folder once made, in the lock file."""
        record = json.dumps({"gdsbench_checkpoint_lock": 1, "pid": os.getpid(), "run": run_path}) + "\n"
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, record.encode(), 0)

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the description releases the flock
            self.fd = None


def _lock_record(fd: int) -> dict | None:
    """The holder a lock file names ({} where it is empty: made, not yet written), None where it is
    not gdsbench's."""
    text = os.pread(fd, 4096, 0).decode(errors="replace")
    if not text.strip():
        return {}
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) and record.get("gdsbench_checkpoint_lock") == 1 else None


# ---- the whole run ----

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
            "first_mismatch": next((r.first_mismatch for r in records if r.first_mismatch), None)}


def clear_cache(run: CheckpointRun) -> float:
    """Drop the checkpoints' pages from this host's page cache (what MLPerf's rules clear between
    writing and reading), file by file: each flushed first (fdatasync: a dirty page cannot be
    dropped; outside any rank's time), then dropped. Returns the share of their pages still
    cached after."""
    cached = total = 0
    for k in range(1, run.checkpoints + 1):
        for r in range(run.ranks):
            for f in run.files(r):
                path = os.path.join(run.folder(k), f.name)
                if not os.path.exists(path):
                    continue
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    os.fdatasync(fd)
                finally:
                    os.close(fd)
                pagecache.evict(path, 0, f.size)
                cached += pagecache.cached_fraction(path, 0, f.size) * f.size
                total += f.size
    return cached / total if total else 0.0


def checkpoint(run: CheckpointRun, store=None, on_row=None, out: Outcome | None = None) -> Outcome:
    """Write every checkpoint, clear the cache, read every one back; each row saved as it is made
    (into `out`, which keeps them if the run is stopped part-way)."""
    out = out if out is not None else Outcome()
    root = mpi.is_root()
    comm = mpi.world()
    if root:
        for folder in incomplete_folders(run.directory):
            out.notes.append(f"{folder}: an INCOMPLETE checkpoint (a run stopped while writing it); it is never read "
                             "back, and is replaced when its number is written")
        os.makedirs(run.directory, exist_ok=True)
    # rank 0's bar on a terminal; each checkpoint's line is the command's own (on_row)
    ui = Progress(len(PHASES) * run.checkpoints, "checkpoint", POINTS) if store is not None else None
    try:
        cached = None
        for phase in PHASES:
            if phase == "read":
                cached = clear_cache(run)
                if cached > 0.01:
                    out.notes.append(f"{cached:.0%} of the checkpoints' pages stayed in the page cache after it was cleared "
                                     "(pages another process maps, or the cache refused): some reads may come from memory")
            for k in range(1, run.checkpoints + 1):
                if phase == "write" and root:
                    note = make_room(run, k)
                    if note:
                        out.notes.append(note)
                    write_manifest(run, k, complete=False)
                if phase == "read" and root and not complete(run, k):
                    raise UsageError(f"{run.folder(k)}: not a complete checkpoint of this model and scale; it is not read")
                if comm is not None:
                    comm.Barrier()  # the folder is there before any rank writes into it
                if ui:
                    ui.start(f"{phase} checkpoint {k}")
                records = ranks_do(run, phase, k)
                if records is None:  # an MPI rank other than 0
                    continue
                if phase == "write":
                    write_manifest(run, k, complete=True)
                row = dict(summarise(run, phase, k, records), cached_fraction=cached if phase == "read" else None)
                if ui:
                    ui.finish(rate=format_rate(row["throughput_bytes_per_s"]))
                keep_row(row, out.rows, store, on_row)
    finally:
        if ui:
            ui.close()
    return out


def make_directory(run: CheckpointRun) -> None:
    """DIR made (with its parents) or found a directory, before any run folder: UsageError in one line
    where it cannot be (a file by that name, a filesystem that refuses)."""
    if os.path.exists(run.directory) and not os.path.isdir(run.directory):
        raise UsageError(f"DIR {run.directory}: is not a directory; give a directory for the checkpoints (it is "
                         "created if missing)")
    try:
        os.makedirs(run.directory, exist_ok=True)
    except OSError as e:
        raise UsageError(f"DIR {run.directory}: cannot create it ({e.strerror}); give a directory on a filesystem "
                         "you may write") from None


def check_room(run: CheckpointRun) -> None:
    """UsageError where the checkpoints cannot fit in the directory's filesystem (before anything is written)."""
    need = run.checkpoints * sum(f.size for r in range(run.ranks) for f in run.files(r))
    free = LocalFolder(run.directory).free_bytes()
    if free is not None and need > free:
        raise UsageError(f"--checkpoints {run.checkpoints}: {format_size(need)} of checkpoints, only {format_size(free)} "
                         f"free in {run.directory}; shrink them with --scale, or write fewer")


def check_target(run: CheckpointRun) -> None:
    """run's check of O_DIRECT on its target (parts.check_direct) before anything is written, asked
    of DIR's filesystem through the lock file this run holds there: refused in run's words, not
    as a rank's failed open."""
    check_direct_in(run.spec, os.path.join(run.directory, LOCK), run.directory)
