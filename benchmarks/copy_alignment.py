#!/usr/bin/env python3
"""What the curl engine's one copy costs at each alignment: the body callback
copies each piece libcurl received (its receive buffer, 512 KiB) into the
request's buffer, and where the destination lies a few bytes past the source
modulo a page, glibc's memcpy (its `rep movsb` path) is many times slower. Which offset a run gets depends on where
libcurl's buffer fell in the heap and on the length of the server's headers
(the first piece's body starts after them), so two builds of the same code can
differ (see vs_clients-build_ab.md).

Each row copies 256 MiB as pieces of one size from a page-aligned source into
a 4 MiB page-aligned destination at each piece's boundary plus `skew` bytes, through
numpy's copyto (glibc's memcpy, as the engine's std::memcpy). Rows alternate
within each repeat (the order rotated each time); the figure is the median of
the repeats with its distribution-free interval, and each row's ratio to the
aligned row (skew 0) of its piece size, repeat by repeat.

    .venv/bin/python benchmarks/copy_alignment.py          # about a minute
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, median, write_outputs  # noqa: E402
from stats import interval_label, median_interval  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
TOTAL, DESTINATION = 256 * MiB, 4 * MiB
# destination - source, modulo a page: a few in the first 64 bytes (where this machine's glibc copied slowly
# when tried by hand), 821 (rclone's S3 headers: the first piece's body starts that far into libcurl's buffer)
SKEWS = (0, 1, 11, 16, 17, 32, 48, 53, 64, 821, 2048 + 11)
PIECES = (32 * KiB, 512 * KiB)  # what a recv on loopback most often gave (strace), and libcurl's buffer


def aligned(n: int) -> np.ndarray:
    """n bytes starting on a 4096-byte boundary (so every offset below is the offset modulo 64)."""
    raw = np.empty(n + 4096, dtype=np.uint8)
    start = (-raw.ctypes.data) % 4096
    return raw[start:start + n]


def copy_seconds(src: np.ndarray, dst: np.ndarray, piece: int, skew: int) -> float:
    """Seconds to copy TOTAL bytes as pieces from the aligned src into dst at piece boundaries + skew."""
    s = src[:piece]
    slots = (DESTINATION - 4096) // piece  # room for the largest skew
    started = time.perf_counter()
    for i in range(TOTAL // piece):
        at = (i % slots) * piece + skew
        np.copyto(dst[at:at + piece], s)
    return time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    src, dst = aligned(max(PIECES) + 128), aligned(DESTINATION)
    src[:] = 7
    rows = [(piece, skew) for piece in PIECES for skew in SKEWS]
    seconds: dict[tuple[int, int], list[float]] = {r: [] for r in rows}
    for piece, skew in rows:  # warm: pages faulted, caches as in the runs
        copy_seconds(src, dst, piece, skew)
    for repeat in range(args.repeats):
        k = repeat % len(rows)
        for row in rows[k:] + rows[:k]:
            seconds[row].append(copy_seconds(src, dst, *row))
    table, raw = [], {"rows": []}
    for piece, skew in rows:
        rates = [TOTAL / s / (1 << 30) for s in seconds[(piece, skew)]]
        ratios = [a / b for a, b in zip(seconds[(piece, 0)], seconds[(piece, skew)])]  # speed against aligned
        lo, hi = median_interval(rates)
        rlo, rhi = median_interval(ratios)
        table.append([f"{piece // KiB} KiB", skew, f"{median(rates):.2f} ({lo:.2f}-{hi:.2f})",
                      f"{median(ratios):.2f} ({rlo:.2f}-{rhi:.2f})"])
        raw["rows"].append({"piece": piece, "skew": skew, "seconds": seconds[(piece, skew)]})
    md = markdown_table(["piece", "destination - source, mod 4096 (bytes)", "GiB/s median (interval)",
                         "speed against skew 0, median ratio (interval)"], table)
    notes = [f"Each cell: {args.repeats} repeats of {TOTAL // MiB} MiB copied, rows alternating, the order rotated "
             f"each repeat; intervals: {interval_label(args.repeats)} for the median, distribution-free.",
             "The source is page-aligned, the destination a piece boundary plus the skew, so the skew is the "
             "destination's offset from the source modulo a page; numpy's copyto calls glibc's memcpy, as the engine's "
             "std::memcpy does."]
    path, _ = write_outputs("copy_alignment", "The curl engine's copy at each relative alignment", md, notes, raw)
    print(md)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
