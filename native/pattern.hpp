// The self-checking data pattern written by `gdsbench prepare` and checked by
// `--verify`. Every 4 KiB block is 512 little-endian 64-bit words:
//   w[0]      magic "GDSBENCH" (marks files gdsbench created)
//   w[1]      the block's own byte offset in the file
//   w[2]      the seed the file was written with
//   w[3..510] payload: splitmix64(seed + byte position of the word)
//   w[511]    checksum of w[0..510] (see checksum())
// A block read back is correct when its magic, offset and checksum agree, so
// a check needs no seed and catches misplaced blocks as well as flipped bits.
// The same rule is implemented for GPU memory in gdsbench/pattern.py.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gds::pattern {

constexpr size_t kBlock = 4096;
constexpr size_t kWords = kBlock / 8;
constexpr uint64_t kMagic = 0x48434e4542534447ull;  // "GDSBENCH" read as little-endian

inline uint64_t mix64(uint64_t z) {  // splitmix64 / murmur3 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

// Sum over i of mix64(w[i] + i * golden), modulo 2^64.
uint64_t checksum(const uint64_t* words);

// Fill `len` bytes (a multiple of kBlock) for file offset `offset` (a multiple of kBlock).
void fill(void* buf, size_t len, uint64_t offset, uint64_t seed);

// Writes, whose bytes must carry the pattern of wherever each lands, without the
// cost of fill() per write. A block's payload depends on w[2] + w[1] only, so a
// block keeps one payload for any offset: fill_reusable() makes a buffer of
// valid blocks once (block b's w[2] + w[1] = key + b * kBlock, so blocks differ),
// and restamp() moves it to another file offset by rewriting w[1], w[2] and the
// checksum: four mix64 per 4 KiB instead of a thousand. The payload of a buffer
// repeats from write to write (as fio's buffers do unless refilled), which a
// deduplicating or compressing target could exploit.
void fill_reusable(void* buf, size_t len, uint64_t key);
void restamp(void* buf, size_t len, uint64_t offset);

// Check `len` bytes read from file offset `offset`. Returns the number of bad
// blocks, and appends the file offset of each to *bad_offsets (if given).
uint64_t check(const void* buf, size_t len, uint64_t offset, std::vector<uint64_t>* bad_offsets);

}  // namespace gds::pattern
