"""The page cache and a local file: drop its pages before a cold run (as fio's
invalidate=1 does) and measure how much of it is resident (mincore)."""

from __future__ import annotations

import os

from gdsbench import _native


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
    pages are measured on the file read even if its name is gone later."""

    def __init__(self, path: str, offset: int, length: int):
        self.fd: int | None = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self.offset, self.length = offset, length

    def evict(self) -> None:
        os.posix_fadvise(self.fd, self.offset, self.length, os.POSIX_FADV_DONTNEED)

    def cached_fraction(self) -> float:
        return _native.resident_fraction(self.fd, self.offset, self.length)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
