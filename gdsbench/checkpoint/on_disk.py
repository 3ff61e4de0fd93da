"""A checkpoint directory on a local or mounted filesystem: its folders, their manifests
(manifest.py) and its lock, as `gdsbench checkpoint DIR` keeps them (session.py runs the ranks).

Crash safety. A checkpoint's folder holds its manifest, written before any of its files and
again, complete, with each file's size, inode and modification time, after every rank has
written and fsync'd them. A run names the incomplete checkpoints it finds, and removes a folder
only where its manifest says gdsbench wrote it and every file in it is one gdsbench made and
nobody changed since: the same size, inode and modification time as recorded, or, in an
incomplete checkpoint (nothing recorded yet), no longer than gdsbench writes it and starting with
gdsbench's pattern or a hole (or empty: made, not yet written). Anything else is refused, naming
the file, and left as it is; every folder the run will replace is checked before the first is
written.

One run at a time writes a directory: it holds an exclusive lock (flock on
DIR/.gdsbench-checkpoint-lock, which names its pid and run) from before its checks to its end,
and a second is refused naming the first.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import stat

from gdsbench.checkpoint import manifest, models
from gdsbench.checkpoint.moves import as_read_flags, move_whole
from gdsbench.execution.parts import check_cache_choice_in
from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_size
from gdsbench.system import pagecache
from gdsbench.system.folders import LocalFolder
from gdsbench.system.pattern import has_pattern

MANIFEST = manifest.NAME
LOCK = ".gdsbench-checkpoint-lock"


def read_manifest(folder: str) -> dict | None:
    try:
        with open(os.path.join(folder, MANIFEST)) as f:
            return manifest.parse(f.read())
    except OSError:
        return None


def write_manifest(run, checkpoint: int, complete: bool) -> None:
    """The folder's manifest: the files each rank writes, and once complete, what each file was
    left as (`written`: its size, inode and modification time), the proof that it is still ours."""
    folder = run.folder(checkpoint)
    written = None
    if complete:
        written = {f.name: proof for r in range(run.ranks) for f in run.files(r)
                   if (proof := _identity(os.path.join(folder, f.name))) is not None}
    record = manifest.record(run, checkpoint, complete, written)
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


def _starts_as_ours(path: str) -> bool:
    """Its first block is gdsbench's pattern, or a hole its rank had not yet written (a hole, not
    zeros: another tool's file of zeros under the same name is not ours)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            hole_at_start = os.lseek(fd, 0, os.SEEK_DATA) >= models.BLOCK
        except OSError as e:  # ENXIO: no data at all, a hole to its end
            if e.errno != errno.ENXIO:
                raise
            hole_at_start = True
    finally:
        os.close(fd)
    return hole_at_start or has_pattern(path, 0)


def _changed(path: str, size: int, proof: dict | None) -> str | None:
    """Why a file named in a manifest is no longer the one gdsbench made (None: it is)."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if isinstance(proof, dict):  # a complete checkpoint: what each file was left as
        now = _identity(path)
        differ = [f"{k} {proof.get(k)} then, {now[k]} now" for k in now if proof.get(k) != now[k]]
        return f"changed since gdsbench wrote it ({'; '.join(differ)})" if differ else None
    if st.st_size == 0:  # made, not yet written
        return None
    if st.st_size > size:  # written from its start, as far as its rank got
        return f"{st.st_size} bytes, and gdsbench writes it {size}"
    return None if _starts_as_ours(path) else "does not start with gdsbench's pattern (another program wrote it)"


def foreign(folder: str) -> str | None:
    """Why a checkpoint folder is not wholly gdsbench's, naming what (None: it is). Wholly gdsbench's:
    its manifest (written before any file), and nothing in it but the manifest's leftovers and
    regular files the manifest names, each the one gdsbench made (_changed): a run stopped part-way
    leaves some short or unwritten."""
    if os.path.islink(folder) or not os.path.isdir(folder):
        return f"{folder}: there already, and not a checkpoint gdsbench wrote (not a directory)"
    m = read_manifest(folder)
    sizes = manifest.planned_sizes(m) if m is not None else None
    if sizes is None:
        return f"{folder}: there already, and not a checkpoint gdsbench wrote (no manifest of gdsbench's in it)"
    written = manifest.proofs(m)
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


def complete(run, checkpoint: int) -> bool:
    """Whether checkpoint k was written whole: its manifest says so, for this model, scale and ranks."""
    return manifest.describes(read_manifest(run.folder(checkpoint)), run)


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


def check_folders(run) -> None:
    """UsageError where a folder this run would replace is not wholly gdsbench's: every one is
    checked before the first checkpoint is written."""
    for k in range(1, run.checkpoints + 1):
        folder = run.folder(k)
        why = foreign(folder) if os.path.lexists(folder) else None
        if why:
            raise manifest.refusal(why, "directory")


def make_room(run, checkpoint: int) -> str | None:
    """A new, empty folder for checkpoint k. One of gdsbench's already there is removed first (said
    in the returned note); anything else under the name is refused, and left as it is."""
    folder = run.folder(checkpoint)
    note = None
    if os.path.lexists(folder):
        why = foreign(folder)
        if why:
            raise manifest.refusal(why, "directory")
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


def clear_cache(run) -> float:
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


def make_directory(run) -> None:
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


def check_room(run) -> None:
    """UsageError where the checkpoints cannot fit in the directory's filesystem (before anything is written)."""
    need = run.checkpoints * sum(f.size for r in range(run.ranks) for f in run.files(r))
    free = LocalFolder(run.directory).free_bytes()
    if free is not None and need > free:
        raise UsageError(f"--checkpoints {run.checkpoints}: {format_size(need)} of checkpoints, only {format_size(free)} "
                         f"free in {run.directory}; shrink them with --scale, or write fewer")


def check_target(run) -> None:
    """run's check of O_DIRECT or --uncached on its target (parts.check_cache_choice) before anything
    is written, asked of DIR's filesystem through the lock file this run holds there: refused in run's
    words, not as a rank's failed open. The reads' own transfers too (--read-bs), named as given."""
    check_cache_choice_in(run.spec, os.path.join(run.directory, LOCK), run.directory)
    if run.read_spec is not None:
        try:
            check_cache_choice_in(run.moved("read"), os.path.join(run.directory, LOCK), run.directory)
        except UsageError as e:
            raise as_read_flags(e) from None


class Directory:
    """A run's checkpoints in a directory, as session.py asks any place of them (`run`: a
    session.CheckpointRun, here and in every function of this module)."""

    remote = False

    def __init__(self, directory: str):
        self.directory = directory

    def prepare(self, run) -> None:
        make_directory(run)

    def prepare_rank(self, run) -> None:
        """On every rank: nothing (a directory needs no credentials)."""

    def hold(self, run) -> DirectoryLock:
        return DirectoryLock(run.directory)

    def check(self, run) -> None:
        """Before the first checkpoint is written: every folder this run replaces, the room, O_DIRECT there."""
        check_folders(run)
        check_room(run)
        check_target(run)

    check_room = staticmethod(check_room)
    incomplete = staticmethod(incomplete_folders)
    make_room = staticmethod(make_room)
    write_manifest = staticmethod(write_manifest)
    complete = staticmethod(complete)
    clear_cache = staticmethod(clear_cache)

    @staticmethod
    def write(run, path: str, size: int) -> None:
        """One file of a rank's, created new (never one that was there: O_EXCL, in the folder this
        run made, whose manifest names it), written with the pattern, fsync'd. Buffered, each write
        extends it, as torch.save's and DLIO's do (sized first, ext4's buffered writes would skip
        the journal an extending write waits on); O_DIRECT, it is sized first, as parallel direct
        writers size theirs (an extending direct write waits for the ones before it: --qd would
        not hold)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            if run.spec.uses_o_direct:
                os.ftruncate(fd, size)
        finally:
            os.close(fd)
        move_whole(run.spec, path, size, write=True, fsync=run.fsync, verify=False)

    @staticmethod
    def read(run, path: str, size: int) -> tuple[int, int, int | None]:
        return move_whole(run.moved("read"), path, size, write=False, fsync=False, verify=run.verify)
