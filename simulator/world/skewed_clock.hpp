// A machine's or an agent instance's view of time: the world's clock with
// its own wall-clock skew, and (agent instances) a monotonic clock running
// drift_ppm faster or slower than the world's. Not thread-safe, like the
// clock it wraps.
#pragma once

#include "vend/clock.hpp"

namespace vend::sim {

class SkewedClock final : public Clock {
 public:
  explicit SkewedClock(const Clock& base, int64_t drift_ppm = 0)
      : base_(base), drift_ppm_(drift_ppm) {}
  int64_t monotonic_ms() const override {
    int64_t t = base_.monotonic_ms();
    return t + t * drift_ppm_ / 1'000'000;
  }
  int64_t wall_ms() const override { return base_.wall_ms() + skew_ms_; }
  void set_skew(int64_t skew_ms) { skew_ms_ = skew_ms; }
  int64_t skew() const { return skew_ms_; }
  int64_t drift_ppm() const { return drift_ppm_; }

 private:
  const Clock& base_;
  int64_t drift_ppm_;
  int64_t skew_ms_ = 0;
};

}  // namespace vend::sim
