// Monotonic nanosecond clock used for every latency and window measurement.
#pragma once
#include <cstdint>
#include <ctime>

namespace gds {

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace gds
