"""`gdsbench prepare`: write a test file whose every 4 KiB block carries its
own offset and a checksum (see native/pattern.hpp), for runs and --verify.

It writes only files it creates: a new path, or a file it made before. Its
proof is an extended attribute it writes on every file it makes
(user.gdsbench.prepared: the size, inode and modification time it left the
file with), so a user's file that merely starts with gdsbench blocks is never
taken for one of its own. Where the filesystem keeps no extended attributes,
the proof is the whole file: every block must carry the pattern. The data
goes to a temporary file beside the target and is renamed into place when
complete, so an interrupted prepare leaves nothing that looks finished; the
temporary file of a prepare that was killed is removed by the next one.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gdsbench import _native
from gdsbench.job.errors import IoFailure, UsageError
from gdsbench.job.units import format_size
from gdsbench.system import pagecache, writable
from gdsbench.system.pattern import has_pattern, scan

CHUNK = 8 * 1024 * 1024
BLOCK = _native.PATTERN_BLOCK
MARK = "user.gdsbench.prepared"
PARTIAL = ".gdsbench-partial-"


@dataclass(frozen=True)
class Prepared:
    path: str
    size: int
    reused: bool  # an existing gdsbench file of this size was kept as it was


def sign(path: str) -> None:
    """Sign again a file of gdsbench's that gdsbench has just written into (its size, inode
    and modification time changed)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _mark(fd)
    finally:
        os.close(fd)


def _signature(st: os.stat_result) -> dict:
    """What a file's mark records of it: any change to the file (a write, a replacement) changes it."""
    return {"size": st.st_size, "inode": st.st_ino, "mtime_ns": st.st_mtime_ns}


def _mark(fd: int) -> None:
    """Sign a file prepare made (best effort: some filesystems keep no extended attributes)."""
    try:
        os.setxattr(fd, MARK, json.dumps(_signature(os.fstat(fd))).encode())
    except OSError:
        pass


def created_by_gdsbench(path: str) -> bool:
    """Whether the file at `path` is one prepare made and nobody has changed
    since: its signature matches it; or, unsigned (another filesystem, an older
    gdsbench) or signed before a change (a write run that was killed, a user's
    edit), every block of it carries the pattern."""
    st = os.stat(path)
    try:
        proof = json.loads(os.getxattr(path, MARK))
    except OSError:
        return _whole_file_has_pattern(path, st.st_size)
    except ValueError:
        return False
    if proof == _signature(st):
        return True
    return isinstance(proof, dict) and proof.get("inode") == st.st_ino and _whole_file_has_pattern(path, st.st_size)


def _whole_file_has_pattern(path: str, size: int) -> bool:
    if size == 0 or size % BLOCK:
        return False
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return scan(fd, 0, size, first_only=True)[0] == 0
    finally:
        os.close(fd)


def _remove_leftovers(path: str) -> None:
    """The temporary file of a prepare of `path` that was killed (its pid is gone)."""
    for tmp in glob.glob(glob.escape(path) + PARTIAL + "*"):
        pid = tmp.rsplit("-", 1)[-1]
        if pid.isdigit():
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                os.unlink(tmp)
            except PermissionError:
                pass


def _is_complete(path: str, size: int) -> bool:
    return os.stat(path).st_size == size and has_pattern(path, size - BLOCK)


def check_may_write(path: str) -> bool:
    """True if `path` exists and is ours to replace; False if it does not exist."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"PATH {path}: refusing to write: gdsbench prepare only writes regular files it created")
    if not created_by_gdsbench(path):
        raise UsageError(
            f"PATH {path}: refusing to overwrite a file gdsbench did not create; choose a new path or remove it yourself"
        )
    return True


def prepare(
    path: str,
    size: int,
    *,
    seed: int = 1,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
    size_flag: str = "--size",
) -> Prepared:
    """Create (or reuse) a pattern file of `size` bytes at `path`.

    `progress(done, total)` is called after each chunk. An existing gdsbench
    file of the same size is kept unless `force`. Errors about the size name
    `size_flag`, what the caller's user gave it as.
    """
    if size <= 0 or size % BLOCK:
        raise UsageError(f"{size_flag} {size}: must be a positive multiple of 4 KiB, e.g. 1G")
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"PATH {path!r}: not a UTF-8 name; gdsbench's results record paths as text, so choose "
                         "another name") from None
    exists = check_may_write(path)
    if exists and not force and _is_complete(path, size):
        return Prepared(path, size, reused=True)
    _write_new(path, size, exists, size_flag, lambda fd, tmp: _write_pattern(fd, path, size, seed, progress))
    return Prepared(path, size, reused=False)


def write_with(path: str, size: int, write: Callable[[str], None], size_flag: str) -> bool:
    """A file another library writes (write(tmp_path): pyarrow's parquet writer, say), about
    `size` bytes, signed as prepare's own; one gdsbench made and signed is kept as it is. Whether
    it was written."""
    exists = check_may_write(path)
    if exists and is_signed(path):
        return False
    _write_new(path, size, exists, size_flag, lambda fd, tmp: write(tmp))
    return True


def is_signed(path: str) -> bool:
    """Whether prepare made the file at `path` whole and nobody has changed it since (its signature)."""
    try:
        return json.loads(os.getxattr(path, MARK)) == _signature(os.stat(path))
    except (OSError, ValueError):
        return False


def _write_new(path: str, size: int, exists: bool, size_flag: str, fill: Callable[[int, str], None]) -> None:
    """Write a file of gdsbench's at `path` (fill(fd, temporary path)) under a temporary name, sign
    it, then give it the name: only a whole, signed file ever has it."""
    if exists:  # before writing a new one: it could not be put in this one's place
        writable.refuse_locked(path, "replace it")
    directory = _check_room(path, size, exists, size_flag)
    _remove_leftovers(path)
    tmp = f"{path}{PARTIAL}{os.getpid()}"
    fd = _create(tmp, path)
    try:
        fill(fd, tmp)
        os.fsync(fd)
        _mark(fd)
        os.close(fd)
        fd = -1
        os.rename(tmp, path)
        _fsync_directory(directory)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    pagecache.evict(path, 0, os.path.getsize(path))  # a run right after must not read what we just wrote from RAM


def _check_room(path: str, size: int, exists: bool, size_flag: str) -> str:
    """The directory the file goes in, once it is known to exist and hold `size` bytes."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(f"PATH {path}: directory {directory} does not exist")
    vfs = os.statvfs(directory)
    free = vfs.f_bavail * vfs.f_frsize + (os.stat(path).st_size if exists else 0)
    if size > free:
        fix = "; choose a smaller size" if size_flag.startswith("-") else ""  # a size the user gave, by its flag
        raise UsageError(f"{size_flag} {format_size(size)}: only {format_size(free)} free in {directory}{fix}")
    return directory


def _create(tmp: str, path: str) -> int:
    """A new file of gdsbench's own (O_EXCL: never one that was there), for writing."""
    try:
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except OSError as e:
        why = {errno.EROFS: "the filesystem is read-only", errno.EACCES: "no permission to create files there",
               errno.ENOSPC: "no space (or no free inodes) left there"}.get(e.errno, e.strerror)
        raise UsageError(f"PATH {path}: cannot create the file: {why}; choose another directory") from None


def _write_pattern(fd: int, path: str, size: int, seed: int, progress) -> None:
    buf = np.empty(CHUNK, dtype=np.uint8)
    done = 0
    while done < size:
        n = min(CHUNK, size - done)
        view = buf[:n]
        _native.pattern_fill(view, done, seed)
        written = 0
        while written < n:
            try:
                written += os.pwrite(fd, view[written:], done + written)
            except OSError as e:
                raise IoFailure(f"PATH {path}: writing failed after {format_size(done + written)}: {e.strerror}; "
                                "nothing was left behind") from None
        done += n
        if progress:
            progress(done, size)


def _fsync_directory(directory: str) -> None:
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
