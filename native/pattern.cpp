#include "pattern.hpp"

#include "error.hpp"

namespace gds::pattern {

uint64_t checksum(const uint64_t* w) {
  uint64_t sum = 0;
  for (size_t i = 0; i < kWords - 1; ++i) sum += mix64(w[i] + uint64_t(i) * kGolden);
  return sum;
}

void fill(void* buf, size_t len, uint64_t offset, uint64_t seed) {
  GDS_EXPECT(len % kBlock == 0 && offset % kBlock == 0,
             "pattern blocks are 4 KiB: length and offset must be multiples of 4096");
  auto* w = static_cast<uint64_t*>(buf);
  for (size_t b = 0; b < len / kBlock; ++b, w += kWords) {
    uint64_t block_offset = offset + b * kBlock;
    w[0] = kMagic;
    w[1] = block_offset;
    w[2] = seed;
    for (size_t i = 3; i < kWords - 1; ++i) w[i] = mix64(seed + block_offset + i * 8 + kGolden);
    w[kWords - 1] = checksum(w);
  }
}

void fill_reusable(void* buf, size_t len, uint64_t key) {
  GDS_EXPECT(len % kBlock == 0, "pattern blocks are 4 KiB: the length must be a multiple of 4096");
  for (size_t b = 0; b < len / kBlock; ++b) fill(static_cast<char*>(buf) + b * kBlock, kBlock, 0, key + b * kBlock);
}

namespace {
uint64_t term(uint64_t word, uint64_t index) {
  return mix64(word + index * kGolden);
}  // one word's share of checksum()
}  // namespace

void restamp(void* buf, size_t len, uint64_t offset) {
  GDS_EXPECT(len % kBlock == 0 && offset % kBlock == 0,
             "pattern blocks are 4 KiB: length and offset must be multiples of 4096");
  auto* w = static_cast<uint64_t*>(buf);
  for (size_t b = 0; b < len / kBlock; ++b, w += kWords) {
    const uint64_t at = offset + b * kBlock, seed = w[2] + w[1] - at;  // the same payload, now for `at`
    w[kWords - 1] += term(at, 1) + term(seed, 2) - term(w[1], 1) - term(w[2], 2);
    w[1] = at;
    w[2] = seed;
  }
}

uint64_t check(const void* buf, size_t len, uint64_t offset, std::vector<uint64_t>* bad_offsets) {
  auto* w = static_cast<const uint64_t*>(buf);
  uint64_t bad = 0;
  for (size_t b = 0; b < len / kBlock; ++b, w += kWords) {
    uint64_t block_offset = offset + b * kBlock;
    if (w[0] != kMagic || w[1] != block_offset || w[kWords - 1] != checksum(w)) {
      if (bad_offsets) bad_offsets->push_back(block_offset);
      ++bad;
    }
  }
  return bad;
}

}  // namespace gds::pattern
