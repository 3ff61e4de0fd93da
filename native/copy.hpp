// The one copy a remote engine makes: bytes a client library received (libcurl's buffer, libnfs's
// reply) into the request's buffer, or a write's bytes into libcurl's.
//
// glibc's memcpy moves a piece of a few KiB and up with `rep movsb`, which on this machine's CPUs
// runs about ten times slower where the destination lies 1-31 bytes past the source modulo a page
// (4 KiB aliasing: benchmarks/copy_alignment.py measures each skew). Where a piece lands there
// depends on the heap and on the lengths the network hands over, so one run hit it and the next
// did not. Below glibc's rep-movsb threshold (2 KiB at the least) it copies with vector loads and
// stores at full speed whatever the skew, so in that band the piece goes 1 KiB at a time.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gds {

inline void copy_received(char* dst, const char* src, size_t n) {
  constexpr size_t kPage = 4096, kBand = 64, kStep = 1024;  // the slow band, with a margin; a step under the threshold
  const size_t skew = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & (kPage - 1);
  if (skew == 0 || skew >= kBand || n <= kStep) {
    std::memcpy(dst, src, n);
    return;
  }
  for (size_t done = 0; done < n; done += kStep) std::memcpy(dst + done, src + done, std::min(kStep, n - done));
}

}  // namespace gds
