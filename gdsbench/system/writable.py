"""Why a file cannot be written, in words that say the remedy: a read-only filesystem, no
permission, or a file marked immutable or append-only (chattr +i, +a), which no write or
replacement passes, root's neither."""

from __future__ import annotations

import errno
import fcntl
import os
import struct

FS_IOC_GETFLAGS = 0x80086601  # linux/fs.h: a file's attributes, as lsattr reads them
ATTRIBUTES = ((0x10, "immutable", "i"), (0x20, "append-only", "a"))  # FS_IMMUTABLE_FL, FS_APPEND_FL


def locked_attribute(path: str) -> tuple[str, str] | None:
    """("immutable", "i") or ("append-only", "a") where the file carries that attribute; None
    otherwise, or where the filesystem keeps no such attributes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        flags = struct.unpack("i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, bytes(8))[:4])[0]
    except OSError:
        return None
    finally:
        os.close(fd)
    return next(((word, letter) for bit, word, letter in ATTRIBUTES if flags & bit), None)


def why_not(path: str, error: OSError) -> str:
    """Why opening or replacing the file at path for writing failed with error."""
    attribute = locked_attribute(path) if error.errno == errno.EPERM else None
    if attribute:
        word, letter = attribute
        return f"the file is {word} (lsattr shows it; `chattr -{letter} {path}` as root lifts it)"
    return {errno.EROFS: "the filesystem is read-only", errno.EACCES: "no permission to write it",
            errno.ENOSPC: "no space (or no free inodes) left there"}.get(error.errno, error.strerror or str(error))


def refuse_locked(path: str, what: str) -> None:
    """UsageError naming path where it is immutable or append-only: `what` (replace it) cannot be done."""
    from gdsbench.job.errors import UsageError

    attribute = locked_attribute(path)
    if attribute:
        word, letter = attribute
        raise UsageError(f"PATH {path}: cannot {what}: the file is {word} (lsattr shows it; `chattr -{letter} {path}` "
                         "as root lifts it)")
