// The one copy a remote engine makes: bytes a client library received (libcurl's buffer, libnfs's
// reply) into the request's buffer, or a write's bytes into libcurl's.
//
// glibc's memcpy moves a piece of a few KiB and up with `rep movsb`, which on this machine's CPUs
// runs about ten times slower where the destination lies 1-31 bytes past the source modulo a page
// (4 KiB aliasing: benchmarks/copy_alignment.py measures each skew). Where a piece lands there
// depends on the heap and on the lengths the network hands over, so one run hit it and the next
// did not. Below glibc's rep-movsb threshold (2 KiB at the least) it copies with vector loads and
// stores at full speed whatever the skew, so in that band the piece goes 1 KiB at a time.
//
// Past the cache: where the reads in flight (a process's, every thread's) hold more than half the
// last-level cache (8 x 4 MiB ranges on a 32 MiB L3), every line a piece lands in is first read from memory
// (write-allocate) and then pushed back out before anything reads it. Streaming (non-temporal) stores skip the read:
// benchmarks/copy_alignment.py --footprint measures both ways (copy_received, through _native.copy_received).
// Where the requests fit in the cache, ordinary stores stay there and are faster. (An eighth of the cache was
// tried: results/benchmarks/vs_clients-copy_threshold_ab.md found no row outside the noise, so half stays.)
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gds {

// The last-level cache's bytes, as Linux's sysfs gives cpu0's highest level; 32 MiB where it does not say.
size_t last_level_cache_bytes();

// Whether requests holding `bytes_in_flight` between them land past the cache (see the top).
inline bool lands_past_cache(uint64_t bytes_in_flight) { return bytes_in_flight > last_level_cache_bytes() / 2; }

// A read's bytes landing in its request's buffer, counted with every other remote read in flight in this
// process (every thread's: the threads share the last-level cache), which says whether its pieces stream.
class Landing {
 public:
  Landing() = default;
  Landing(const Landing&) = delete;  // one count, ended once
  Landing& operator=(const Landing&) = delete;
  Landing(Landing&& other) noexcept : bytes_(other.bytes_), past_cache_(other.past_cache_) { other.bytes_ = 0; }
  ~Landing() { end(); }  // a read dropped unfinished (an engine closed with answers out) is no longer counted

  // `bytes` start landing (a read's length): its pieces stream where the reads in flight now outgrow the cache.
  void start(uint64_t bytes);
  // Its pieces all copied, or dropped: fenced where they streamed (before the request is handed back), and no
  // longer counted. Returns `landed` (the bytes that did land) where they streamed, else 0: the engine's
  // streamed_bytes. Ending one not started, or ended already, does nothing and returns 0.
  uint64_t end(uint64_t landed = 0);
  bool past_cache() const { return past_cache_; }

 private:
  uint64_t bytes_ = 0;
  bool past_cache_ = false;
};

// n bytes to dst with streaming stores (on whole 64-byte lines; the ragged head and tail as memcpy), or
// memcpy where the CPU has no SSE2. Streaming stores are weakly ordered: streamed_fence() before the bytes
// are anyone else's. (In copy.cpp, exported: a profile of the stripped module names it, as it names glibc's
// memcpy.)
void copy_streaming(char* dst, const char* src, size_t n);

// Every streaming store this thread made is in memory, ordered before its later stores (sfence): once a
// request's last piece has landed, not after each piece (libcurl hands a body over 16 KiB at a time, and
// a fence waits for the lines still on their way).
void streamed_fence();

// A received piece into its request's buffer; `past_cache`: the requests in flight do not fit in the cache
// (streamed: streamed_fence() once the request's pieces are all in).
inline void copy_received(char* dst, const char* src, size_t n, bool past_cache = false) {
  constexpr size_t kPage = 4096, kBand = 64, kStep = 1024;  // the slow band, with a margin; a step under the threshold
  if (past_cache) return copy_streaming(dst, src, n);
  const size_t skew = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & (kPage - 1);
  if (skew == 0 || skew >= kBand || n <= kStep) {
    std::memcpy(dst, src, n);
    return;
  }
  for (size_t done = 0; done < n; done += kStep) std::memcpy(dst + done, src + done, std::min(kStep, n - done));
}

}  // namespace gds
