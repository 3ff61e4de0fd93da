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
    with HeldRegions([(path, offset, length)]) as held:
        held.evict()


def cached_fraction(path: str, offset: int, length: int) -> float:
    """Fraction (0..1) of the region's pages in the page cache right now."""
    with HeldRegions([(path, offset, length)]) as held:
        return held.cached_fraction()


class HeldRegions:
    """Regions of files, held open from before a run to after it, so the page
    cache is measured on the files that were read, even if their names are
    gone by the end (the result keeps its measurement either way)."""

    def __init__(self, regions: list[tuple[str, int, int]]):
        self.held: list[tuple[int, int, int]] = []  # (fd, offset, length)
        try:
            for path, offset, length in regions:
                self.held.append((os.open(path, os.O_RDONLY | os.O_CLOEXEC), offset, length))
        except BaseException:
            self.close()
            raise

    def evict(self) -> None:
        for fd, offset, length in self.held:
            os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)

    def cached_fraction(self) -> float | None:
        """The fraction of all the regions' pages in the page cache now (None: no regions)."""
        total = sum(length for _, _, length in self.held)
        if not total:
            return None
        return sum(_native.resident_fraction(fd, offset, length) * length for fd, offset, length in self.held) / total

    def close(self) -> None:
        for fd, _, _ in self.held:
            os.close(fd)
        self.held = []

    def __enter__(self) -> HeldRegions:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
