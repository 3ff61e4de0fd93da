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

With --footprint it measures the engine's own copy (native/copy.hpp, through _native.copy_received)
by how many bytes the requests in flight hold: 4 MiB bodies, each as the 16 KiB pieces libcurl hands
its write callback, copied into requests taken in turn from that many bytes, with ordinary stores and
with streaming ones (fenced once a body, as the engine does), alternating;
the table copy_footprint gives each one's CPU time per GB and streaming's time against ordinary's,
repeat by repeat (the engine streams where the footprint passes half the last-level cache):

    .venv/bin/python benchmarks/copy_alignment.py --footprint   # about a minute
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, median, rotated, write_outputs  # noqa: E402
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


FOOTPRINTS = (8 * MiB, 16 * MiB, 24 * MiB, 32 * MiB, 64 * MiB)  # bytes the requests in flight hold between them
PIECE = 16 * KiB  # what libcurl hands its write callback at a time (CURL_MAX_WRITE_SIZE), whatever its buffer
BODY = 4 * MiB  # a request's
# where a body's pieces land: the engine's first piece from nginx is 16 KiB less its 292 bytes of headers, so
# every later one starts 16 KiB - 292 bytes on (28 bytes into a line; its source, libcurl's buffer, lies far
# from it modulo a page, as the page-aligned source here does, out of glibc's slow band)
RAGGED = 16 * KiB - 292
TIMES = (BODY - RAGGED) // PIECE  # whole pieces a body holds
COPIED = TOTAL // BODY * TIMES * PIECE  # bytes a footprint row copies


def footprint_seconds(src: np.ndarray, dst: np.ndarray, footprint: int, streaming: bool) -> float:
    """Thread CPU seconds to copy COPIED bytes as BODY-long bodies of PIECE-long pieces, the bodies landing in
    turn in `footprint` bytes of dst."""
    from gdsbench import _native

    bodies = [dst[at + RAGGED:at + BODY] for at in range(0, footprint, BODY)]
    started = time.thread_time()
    for i in range(TOTAL // BODY):
        _native.copy_received(bodies[i % len(bodies)], src, streaming, TIMES)
    return time.thread_time() - started


def footprint_main(repeats: int) -> int:
    src, dst = aligned(PIECE), aligned(max(FOOTPRINTS))
    src[:] = 7
    dst[:] = 0  # faulted in before any timing
    rows = [(f, streaming) for f in FOOTPRINTS for streaming in (False, True)]
    seconds: dict[tuple[int, bool], list[float]] = {r: [] for r in rows}
    for repeat in range(repeats):
        for row in rotated(rows, repeat):
            seconds[row].append(footprint_seconds(src, dst, *row))
    table, raw = [], {"rows": []}
    for f, streaming in rows:
        per_gb = [s / (COPIED / 1e9) for s in seconds[(f, streaming)]]
        lo, hi = median_interval(per_gb)
        ratio = ""
        if streaming:
            ratios = [a / b for a, b in zip(seconds[(f, True)], seconds[(f, False)])]
            rlo, rhi = median_interval(ratios)
            ratio = f"{median(ratios):.2f} ({rlo:.2f}-{rhi:.2f})"
        table.append([f"{f // MiB} MiB", "streaming" if streaming else "ordinary",
                      f"{median(per_gb):.3f} ({lo:.3f}-{hi:.3f})", ratio])
        raw["rows"].append({"footprint": f, "streaming": streaming, "seconds": seconds[(f, streaming)]})
    md = markdown_table(["requests in flight hold", "stores", "CPU-s/GB median (interval)",
                         "streaming against ordinary, CPU time ratio (interval)"], table)
    notes = [f"Each cell: {repeats} repeats of {COPIED / MiB:.0f} MiB copied as {BODY // MiB} MiB bodies of {PIECE // KiB} KiB "
             "pieces (what libcurl hands the engine's write callback at a time), each piece starting "
             f"{RAGGED % 64} bytes into a cache line as behind nginx's headers, the bodies landing in turn in the "
             "footprint; rows alternating, the order rotated each repeat; "
             f"intervals: {interval_label(repeats)} for the median, distribution-free. CPU time is the thread's "
             "(time.thread_time), a Python call per body included.",
             "The copy is the curl engine's own (native/copy.hpp's copy_received through _native.copy_received): "
             "ordinary stores (glibc's memcpy) or streaming ones (copy_streaming, on whole lines, one fence a body). "
             "The engine streams where its "
             "requests in flight hold more than half the last-level cache, as sysfs gives it "
             "(/sys/devices/system/cpu/cpu0/cache)."]
    path, _ = write_outputs("copy_footprint", "The curl engine's copy by how much its requests in flight hold", md,
                            notes, raw)
    print(md)
    print(f"wrote {path}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--footprint", action="store_true", help="the engine's copy by the bytes its requests hold "
                    "(table copy_footprint) instead of by alignment")
    args = ap.parse_args()
    if args.footprint:
        return footprint_main(args.repeats)
    src, dst = aligned(max(PIECES) + 128), aligned(DESTINATION)
    src[:] = 7
    rows = [(piece, skew) for piece in PIECES for skew in SKEWS]
    seconds: dict[tuple[int, int], list[float]] = {r: [] for r in rows}
    for piece, skew in rows:  # warm: pages faulted, caches as in the runs
        copy_seconds(src, dst, piece, skew)
    for repeat in range(args.repeats):
        for row in rotated(rows, repeat):
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
