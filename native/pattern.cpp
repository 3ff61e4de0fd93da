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
