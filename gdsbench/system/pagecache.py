"""The page cache and a local file: drop its pages before a cold run (as fio's
invalidate=1 does) and measure how much of it is resident (mincore)."""

from __future__ import annotations

import errno
import fcntl
import os
import struct

from gdsbench import _native
from gdsbench.job.errors import UsageError
from gdsbench.system import writable

RWF_DONTCACHE = 0x80  # preadv2/pwritev2's flag for uncached buffered I/O (Linux 6.14); os has no name for it


def uncached_refusal(path: str) -> str | None:
    """Why --uncached (RWF_DONTCACHE) cannot work on path's filesystem here, or None where it can: asked
    of a one-byte read at the file's end, which the kernel checks the flag for and which reads nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        return f"cannot open {path}: {e.strerror}"
    try:
        os.preadv(fd, [bytearray(1)], os.fstat(fd).st_size, RWF_DONTCACHE)
        return None
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.EINVAL):
            return (f"{path}'s filesystem, or this kernel (before Linux 6.14), does not do uncached buffered I/O "
                    "(RWF_DONTCACHE)")
        return f"{path}: {e.strerror}"
    finally:
        os.close(fd)


def evict(path: str, offset: int, length: int) -> None:
    """Ask the kernel to drop the region's clean cached pages (POSIX_FADV_DONTNEED).

    Only reads the descriptor's metadata; dirty pages or pages another process
    has mapped may stay, which cached_fraction() then reports.
    """
    held = HeldFileRegion(path, offset, length)
    try:
        held.evict()
    finally:
        held.close()


def cached_fraction(path: str, offset: int, length: int) -> float:
    """Fraction (0..1) of the region's pages in the page cache right now."""
    held = HeldFileRegion(path, offset, length)
    try:
        return held.cached_fraction()
    finally:
        held.close()


class HeldFileRegion:
    """A region of a local file, held open by descriptor (targets.Held), so its
    pages are measured on the file read even if its name is gone later. With
    `lock` ("read" or "write") it also holds an advisory lock on the region (an
    open-file-description lock, F_OFD_SETLK, which only a close of this very
    descriptor drops), so two gdsbench runs never write the same region, nor
    read one another is writing: the other is refused in one line."""

    def __init__(self, path: str, offset: int, length: int, lock: str | None = None):
        try:
            self.fd: int | None = os.open(path, (os.O_RDWR | os.O_NOFOLLOW if lock == "write" else os.O_RDONLY) |
                                          os.O_CLOEXEC)
        except OSError as e:
            if lock != "write":
                raise
            raise UsageError(f"PATH {path}: cannot open it for writing: {writable.why_not(path, e)}") from None
        self.offset, self.length = offset, length
        if lock:
            try:
                self._lock(path, lock)
            except BaseException:
                self.close()
                raise

    def _lock(self, path: str, how: str) -> None:
        kind = fcntl.F_WRLCK if how == "write" else fcntl.F_RDLCK
        request = struct.pack("hhqqi4x", kind, os.SEEK_SET, self.offset, self.length, 0)  # struct flock, l_pid 0
        try:
            fcntl.fcntl(self.fd, fcntl.F_OFD_SETLK, request)
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EACCES):
                doing = "reading or writing" if how == "write" else "writing"
                raise UsageError(f"PATH {path}: another gdsbench run is {doing} this region now; wait for it to end") \
                    from None
            # a filesystem without locks (ENOLCK, EINVAL): nothing to hold

    def evict(self) -> None:
        os.posix_fadvise(self.fd, self.offset, self.length, os.POSIX_FADV_DONTNEED)

    def cached_fraction(self) -> float:
        return _native.resident_fraction(self.fd, self.offset, self.length)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
