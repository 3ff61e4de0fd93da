// The measured window's rule, fio's, written once for every loop that
// measures: the native Worker's, and the kvikio mode's Python loop through the
// binding (gdsbench._native.WindowRule). Times are CLOCK_MONOTONIC ns, which
// now_ns() and Python's time.monotonic_ns() both read.
//   - the window opens when the ramp ends;
//   - a request counts if it completes inside it, issued before it or not, so
//     large blocks at depth do not read low by the bytes in flight;
//   - nothing is issued once the window has ended, nor, once it is open, past
//     the --io-size budget, which counts the requests completed in the window
//     and those still outstanding (so exactly the budget completes in it).
#pragma once
#include <cstdint>

namespace gds {

struct WindowRule {
  uint64_t start = 0;            // the ramp's end
  uint64_t end = UINT64_MAX;     // start + --runtime (UINT64_MAX: no time limit)
  uint64_t budget = UINT64_MAX;  // requests to complete in the window (UINT64_MAX: no limit)

  bool open_at(uint64_t now) const { return now >= start; }
  bool counts(uint64_t completed_at) const { return completed_at >= start; }
  bool ended_at(uint64_t now) const { return now >= end; }
  bool may_issue(uint64_t now, uint64_t counted, uint64_t outstanding) const {
    return !ended_at(now) && (!open_at(now) || counted + outstanding < budget);
  }
};

}  // namespace gds
