// Monotonic nanosecond clock used for every latency and window measurement.
#pragma once
#include <sys/time.h>

#include <cstdint>
#include <ctime>

namespace gds {

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// A getrusage time in seconds.
inline double seconds(const timeval& tv) { return double(tv.tv_sec) + double(tv.tv_usec) / 1e6; }

// Wall-clock time, comparable between processes and (with synchronised
// clocks) hosts; used only to line up parts of a multi-process run.
inline uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

}  // namespace gds
