#include "histogram.hpp"

#include <cmath>

#include "error.hpp"

namespace gds {

uint64_t LatencyHistogram::bucket_low(size_t i) {
  if (i < 2 * kSub) return i;  // groups 0 and 1 are exact
  unsigned e = unsigned(i / kSub) - 1;
  return uint64_t(i - size_t(e) * kSub) << e;
}

uint64_t LatencyHistogram::bucket_width(size_t i) {
  if (i < 2 * kSub) return 1;
  return 1ull << (unsigned(i / kSub) - 1);
}

double LatencyHistogram::bucket_value(size_t i) { return double(bucket_low(i)) + double(bucket_width(i) - 1) / 2.0; }

void LatencyHistogram::merge(const LatencyHistogram& o) {
  if (o.count_ == 0) return;
  for (size_t i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
  uint64_t n = count_ + o.count_;
  double delta = o.mean_ - mean_;
  mean_ += delta * double(o.count_) / double(n);
  m2_ += o.m2_ + delta * delta * double(count_) * double(o.count_) / double(n);
  count_ = n;
  min_ = std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
}

void LatencyHistogram::clear() { *this = LatencyHistogram(); }

double LatencyHistogram::percentile(double p) const {
  if (count_ == 0) return 0.0;
  GDS_EXPECT(p >= 0.0 && p <= 100.0, "percentile must be between 0 and 100");
  if (p >= 100.0) return double(max_);
  if (p <= 0.0) return double(min_);
  // rank = ceil(p/100 * n); the small slack keeps 99.9% of 1000 at rank 999
  // despite binary floating point.
  double x = p / 100.0 * double(count_);
  uint64_t rank = uint64_t(std::ceil(x - 1e-9 * x));
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      double v = bucket_value(i);
      return std::min(std::max(v, double(min_)), double(max_));
    }
  }
  return double(max_);
}

LatencyHistogram LatencyHistogram::from_state(const uint64_t* counts, size_t n, uint64_t min, uint64_t max, double mean,
                                              double m2) {
  GDS_EXPECT(n == kBuckets,
             "histogram state has " + std::to_string(n) + " buckets; expected " + std::to_string(kBuckets));
  LatencyHistogram h;
  for (size_t i = 0; i < n; ++i) {
    h.counts_[i] = counts[i];
    h.count_ += counts[i];
  }
  if (h.count_) {
    h.min_ = min;
    h.max_ = max;
  }
  h.mean_ = mean;
  h.m2_ = m2;
  return h;
}

}  // namespace gds
