// Log-linear latency histogram in the manner of fio's stat.h.
//
// Values below 128 ns land in exact buckets. Above that, each power of two
// [64*2^e, 128*2^e) is split into 64 linear buckets of width 2^e, so a bucket
// is at most 1/64 of its lower bound wide and its midpoint is within 1/128
// (0.78%) of any value in it. 35 groups cover 0 .. 2^40 ns (about 18 minutes);
// larger values land in the last bucket (min/max stay exact). The layout is
// fixed, so histograms from threads, processes and hosts merge by adding counts.
// Count, mean and variance are kept alongside (Welford; Chan's rule to merge).
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gds {

class LatencyHistogram {
 public:
  static constexpr unsigned kSubBits = 6;
  static constexpr uint64_t kSub = 1ull << kSubBits;  // 64 buckets per group
  static constexpr unsigned kGroups = 35;
  static constexpr size_t kBuckets = kGroups * kSub;  // 2240

  static size_t index_of(uint64_t v) {
    if (v < kSub) return size_t(v);
    unsigned msb = 63u - unsigned(__builtin_clzll(v));
    unsigned e = msb - kSubBits;
    size_t i = size_t(e) * kSub + size_t(v >> e);
    return i < kBuckets ? i : kBuckets - 1;
  }
  // Smallest value that lands in bucket i, and the bucket's width.
  static uint64_t bucket_low(size_t i);
  static uint64_t bucket_width(size_t i);
  // The value reported for bucket i: its midpoint.
  static double bucket_value(size_t i);

  void add(uint64_t v) {
    ++counts_[index_of(v)];
    ++count_;
    if (v < min_) min_ = v;
    if (v > max_) max_ = v;
    double d = double(v) - mean_;
    mean_ += d / double(count_);
    m2_ += d * (double(v) - mean_);
  }
  void merge(const LatencyHistogram& other);
  void clear();

  // Percentile p in [0, 100]: the reported value of the bucket holding the
  // sample of rank ceil(p/100 * count), clamped to [min, max].
  double percentile(double p) const;

  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const { return mean_; }
  double m2() const { return m2_; }
  double variance() const { return count_ > 1 ? m2_ / double(count_ - 1) : 0.0; }
  const std::array<uint64_t, kBuckets>& counts() const { return counts_; }

  // Rebuild from stored state (pickling, results files).
  static LatencyHistogram from_state(const uint64_t* counts, size_t n, uint64_t min, uint64_t max, double mean,
                                     double m2);

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
  double mean_ = 0.0;
  double m2_ = 0.0;
};

}  // namespace gds
