#include "copy.hpp"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gds {

size_t last_level_cache_bytes() {
  static const size_t bytes = [] {
    size_t found = 0;
    int highest = 0;
    for (int i = 0; i < 8; ++i) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
      std::ifstream level_file(dir + "level"), size_file(dir + "size");
      int level = 0;
      std::string size;  // "32768K"
      if (!(level_file >> level) || !(size_file >> size) || level < highest) continue;
      size_t value = std::strtoull(size.c_str(), nullptr, 10);
      if (size.back() == 'K') value <<= 10;
      if (size.back() == 'M') value <<= 20;
      if (value) highest = level, found = value;
    }
    return found ? found : size_t(32) << 20;
  }();
  return bytes;
}

__attribute__((visibility("default"))) void copy_streaming(char* dst, const char* src, size_t n) {
#if defined(__SSE2__)
  // Whole lines only: a line the streaming stores filled in part would leave for memory in parts. The
  // ragged ends (the neighbouring pieces' lines) go through the cache.
  const size_t head = std::min(n, (64 - (reinterpret_cast<uintptr_t>(dst) & 63)) & 63);
  std::memcpy(dst, src, head);
  size_t done = head;
  for (; done + 64 <= n; done += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + done));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + done + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + done + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + done + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + done), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + done + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + done + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + done + 48), d);
  }
  std::memcpy(dst + done, src + done, n - done);
#else
  std::memcpy(dst, src, n);
#endif
}

void streamed_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

namespace {
std::atomic<uint64_t> g_landing{0};  // the bytes every Landing of the process holds between them
}  // namespace

void Landing::start(uint64_t bytes) {
  bytes_ = bytes;
  past_cache_ = lands_past_cache(g_landing.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

uint64_t Landing::end(uint64_t landed) {
  if (!bytes_) return 0;
  const bool streamed = past_cache_;
  if (streamed) streamed_fence();
  g_landing.fetch_sub(bytes_, std::memory_order_relaxed);
  bytes_ = 0;
  past_cache_ = false;
  return streamed ? landed : 0;
}

}  // namespace gds
