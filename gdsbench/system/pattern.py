"""The prepare/verify block pattern (native/pattern.hpp) checked with array
libraries: numpy on the host, cupy on the GPU, where bytes read in GPU modes
land. The native core calls check_device for --verify in those modes."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from gdsbench import _native

WORDS = 512  # 64-bit words per 4 KiB block


def _mix64(xp: Any, z):
    z = (z ^ (z >> xp.uint64(30))) * xp.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> xp.uint64(27))) * xp.uint64(0x94D049BB133111EB)
    return z ^ (z >> xp.uint64(31))


def bad_blocks(xp: Any, data, file_offset: int) -> list[int]:
    """File offsets of the bad 4 KiB blocks in bytes read at file_offset;
    `data` is a uint8 array of whole blocks (numpy or cupy)."""
    words = data.view(xp.uint64).reshape(-1, WORDS)
    index = xp.arange(WORDS - 1, dtype=xp.uint64)
    # uint64 arithmetic wraps modulo 2^64 in numpy and cupy alike
    checksum = _mix64(xp, words[:, : WORDS - 1] + index * xp.uint64(_native.PATTERN_GOLDEN)).sum(axis=1,
                                                                                                  dtype=xp.uint64)
    offsets = xp.uint64(file_offset) + xp.arange(words.shape[0], dtype=xp.uint64) * xp.uint64(WORDS * 8)
    bad = (words[:, 0] != xp.uint64(_native.PATTERN_MAGIC)) | (words[:, 1] != offsets) | (words[:, WORDS - 1] != checksum)
    if not int(bad.sum()):
        return []
    return [file_offset + int(i) * WORDS * 8 for i in xp.nonzero(bad)[0].tolist()]


def restamp(xp: Any, data, file_offset: int) -> None:
    """Move a buffer of reusable pattern blocks (_native.pattern_fill_reusable) to file_offset in
    place, as native/pattern.cpp's restamp does: each block's offset and seed words and its
    checksum, with array operations (numpy on the host, cupy on the GPU)."""
    words = data.view(xp.uint64).reshape(-1, WORDS)
    at = xp.uint64(file_offset) + xp.arange(words.shape[0], dtype=xp.uint64) * xp.uint64(WORDS * 8)
    seed = words[:, 2] + words[:, 1] - at  # the same payload, now for `at`

    def term(word, index: int):  # index x golden taken modulo 2^64 here: numpy warns on a scalar's overflow
        return _mix64(xp, word + xp.uint64(index * _native.PATTERN_GOLDEN % 2**64))

    words[:, WORDS - 1] += term(at, 1) + term(seed, 2) - term(words[:, 1], 1) - term(words[:, 2], 2)
    words[:, 1] = at
    words[:, 2] = seed


def file_seed(seed: int, name: str) -> int:
    """The payload seed of one of many files written with `seed`: its own, from its name. With one seed,
    block k of every file would be the same bytes (a block's words come from the seed and its offset), so
    a store that deduplicates would keep one copy of a dataset's or a checkpoint's files and read or write
    less than the bytes measured; files made by DLIO or a real job are all different. A check needs no
    seed (native/pattern.hpp), so files written either way read back as correct."""
    digest = hashlib.blake2b(f"{seed}:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def has_pattern(path: str, offset: int) -> bool:
    """Whether the 4 KiB block at `offset` of `path` is one `gdsbench prepare` wrote there."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.pread(fd, _native.PATTERN_BLOCK, offset)
    finally:
        os.close(fd)
    return len(data) == _native.PATTERN_BLOCK and _native.pattern_check(data, offset)[0] == 0


def scan(fd: int, offset: int, length: int, first_only: bool = False, chunk: int = 8 << 20) -> tuple[int, int | None]:
    """(bad blocks, offset of the first) in a region of an open file, read in chunks; with
    first_only it stops at the first chunk holding a bad one (or a short read, counted bad)."""
    bad, first = 0, None
    for at in range(offset, offset + length, chunk):
        want = min(chunk, offset + length - at)
        data = os.pread(fd, want, at)
        count, where = _native.pattern_check(data[:len(data) // _native.PATTERN_BLOCK * _native.PATTERN_BLOCK], at)
        if len(data) < want:  # the file ends inside the region: its missing blocks are bad
            count, where = count + -(-(want - len(data)) // _native.PATTERN_BLOCK), where if where is not None else at
        bad, first = bad + count, first if first is not None else where
        if bad and first_only:
            break
    return bad, first


def check_written(path: str, offset: int, length: int) -> tuple[int, int, int | None]:
    """(blocks checked, bad blocks, offset of the first bad one) of a region gdsbench wrote, read back from the
    storage: the file is fsync'd and its pages dropped first, so what is checked is what the
    storage holds, not what the page cache kept."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
        bad, first = scan(fd, offset, length)
    finally:
        os.close(fd)
    return length // _native.PATTERN_BLOCK, bad, first


def check_device(ptr: int, length: int, file_offset: int, gpu: int) -> list[int]:
    """File offsets of the bad blocks among `length` bytes of GPU memory at
    address `ptr` on GPU `gpu`, checked on the GPU (cupy)."""
    import cupy

    with cupy.cuda.Device(gpu):
        memory = cupy.cuda.UnownedMemory(ptr, length, owner=None, device_id=gpu)
        data = cupy.ndarray((length,), dtype=cupy.uint8, memptr=cupy.cuda.MemoryPointer(memory, 0))
        return bad_blocks(cupy, data, file_offset)
