// The order in which one worker visits the blocks of its slice of the region.
//
// seq:  block 0, 1, 2, ... n-1, then again from 0.
// rand: each pass visits every block of the slice exactly once (no repeats
//       within a pass, like fio's random map) in a seeded pseudo-random order
//       that changes from pass to pass. The order is a keyed bijection on
//       [0, 2^k) (xor, odd multiply and xorshift steps, each invertible),
//       restricted to [0, n) by cycle walking, so it needs O(1) memory and no
//       allocation whatever the size of the region.
#pragma once
#include <cstdint>

#include "pattern.hpp"

namespace gds {

class OffsetSequence {
 public:
  OffsetSequence(uint64_t first_byte, uint64_t nblocks, uint64_t block_size, bool random, uint64_t seed)
      : first_(first_byte), n_(nblocks), bs_(block_size), random_(random), seed_(seed) {
    bits_ = 1;
    while (bits_ < 64 && (1ull << bits_) < n_) ++bits_;
    mask_ = bits_ >= 64 ? ~0ull : (1ull << bits_) - 1;
    shift_ = bits_ / 2;
    rekey();
  }

  // The order worker `index` of a job seeded `job_seed` reads in.
  static OffsetSequence for_worker(uint64_t first_byte, uint64_t nblocks, uint64_t block_size, bool random,
                                   uint64_t job_seed, uint32_t index) {
    return OffsetSequence(first_byte, nblocks, block_size, random, pattern::mix64(job_seed) + index);
  }

  uint64_t next() {
    if (pos_ == n_) {
      pos_ = 0;
      ++pass_;
      rekey();
    }
    uint64_t block = random_ ? permute(pos_) : pos_;
    ++pos_;
    return first_ + block * bs_;
  }
  uint64_t passes_started() const { return pass_ + (pos_ > 0 ? 1 : 0); }
  // Whether the block next() returned last is in a later pass than the first: read before.
  bool rereading() const { return pass_ > 0; }

 private:
  uint64_t step(uint64_t x) const {
    x = (x ^ k0_) & mask_;
    x = (x * m0_) & mask_;
    if (shift_) x ^= x >> shift_;
    x = (x + k1_) & mask_;
    x = (x * m1_) & mask_;
    if (shift_) x ^= x >> shift_;
    return x;
  }
  uint64_t permute(uint64_t i) const {
    uint64_t x = step(i);
    while (x >= n_) x = step(x);  // cycle walking: stays a bijection on [0, n)
    return x;
  }
  void rekey() {
    uint64_t s = pattern::mix64(seed_ * pattern::kGolden + pass_ + 1);
    k0_ = pattern::mix64(s + 1);
    k1_ = pattern::mix64(s + 2);
    m0_ = pattern::mix64(s + 3) | 1;  // odd: invertible modulo 2^k
    m1_ = pattern::mix64(s + 4) | 1;
  }

  uint64_t first_, n_, bs_;
  bool random_;
  uint64_t seed_;
  unsigned bits_ = 1, shift_ = 0;
  uint64_t mask_ = 1;
  uint64_t pos_ = 0, pass_ = 0;
  uint64_t k0_ = 0, k1_ = 0, m0_ = 1, m1_ = 1;
};

}  // namespace gds
