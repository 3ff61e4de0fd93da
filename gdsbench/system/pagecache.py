"""The page cache and a target: drop its pages before a cold run (as fio's
invalidate=1 does) and measure how much of it is resident (mincore)."""

from __future__ import annotations

import os

from gdsbench import _native


def evict(path: str, offset: int, length: int) -> None:
    """Ask the kernel to drop the region's clean cached pages (POSIX_FADV_DONTNEED).

    Only reads the descriptor's metadata; dirty pages or pages another process
    has mapped may stay, which cached_fraction() then reports.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cached_fraction(path: str, offset: int, length: int) -> float:
    """Fraction (0..1) of the region's pages in the page cache right now."""
    return _native.resident_fraction(path, offset, length)


def evict_all(regions: list[tuple[str, int, int]]) -> None:
    """evict() each (path, offset, length)."""
    for path, offset, length in regions:
        evict(path, offset, length)


def cached_fraction_all(regions: list[tuple[str, int, int]]) -> float | None:
    """The fraction of all the regions' pages in the page cache now (None: no regions)."""
    total = sum(length for _, _, length in regions)
    if not total:
        return None
    return sum(cached_fraction(path, offset, length) * length for path, offset, length in regions) / total
