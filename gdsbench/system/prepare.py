"""`gdsbench prepare`: write a test file whose every 4 KiB block carries its
own offset and a checksum (see native/pattern.hpp), for runs and --verify.

It writes only files it creates: a new path, or a file whose first block
carries gdsbench's magic. The data goes to a temporary file beside the target
and is renamed into place when complete, so an interrupted prepare leaves
nothing that looks finished.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gdsbench import _native
from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_size
from gdsbench.system import pagecache
from gdsbench.system.pattern import has_pattern

CHUNK = 8 * 1024 * 1024
BLOCK = _native.PATTERN_BLOCK


@dataclass(frozen=True)
class Prepared:
    path: str
    size: int
    reused: bool  # an existing gdsbench file of this size was kept as it was


def created_by_gdsbench(path: str) -> bool:
    """Whether the file at `path` starts with a gdsbench pattern block."""
    return has_pattern(path, 0)


def _is_complete(path: str, size: int) -> bool:
    return os.stat(path).st_size == size and has_pattern(path, size - BLOCK)


def _check_may_write(path: str) -> bool:
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
) -> Prepared:
    """Create (or reuse) a pattern file of `size` bytes at `path`.

    `progress(done, total)` is called after each chunk. An existing gdsbench
    file of the same size is kept unless `force`.
    """
    if size <= 0 or size % BLOCK:
        raise UsageError(f"--size {size}: must be a positive multiple of 4 KiB, e.g. 1G")
    exists = _check_may_write(path)
    if exists and not force and _is_complete(path, size):
        return Prepared(path, size, reused=True)

    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(f"PATH {path}: directory {directory} does not exist")
    vfs = os.statvfs(directory)
    free = vfs.f_bavail * vfs.f_frsize + (os.stat(path).st_size if exists else 0)
    if size > free:
        raise UsageError(f"--size {format_size(size)}: only {format_size(free)} free in {directory}; choose a smaller size")

    tmp = f"{path}.gdsbench-partial-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        buf = np.empty(CHUNK, dtype=np.uint8)
        done = 0
        while done < size:
            n = min(CHUNK, size - done)
            view = buf[:n]
            _native.pattern_fill(view, done, seed)
            written = 0
            while written < n:
                written += os.pwrite(fd, view[written:], done + written)
            done += n
            if progress:
                progress(done, size)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.rename(tmp, path)
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    pagecache.evict(path, 0, size)  # a run right after must not read what we just wrote from RAM
    return Prepared(path, size, reused=False)
