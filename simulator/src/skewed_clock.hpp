// A machine's view of time: the world's clock with its own wall-clock skew
// (monotonic time is shared). Not thread-safe, like the clock it wraps.
#pragma once

#include "vend/clock.hpp"

namespace vend::sim {

class SkewedClock final : public Clock {
 public:
  explicit SkewedClock(const Clock& base) : base_(base) {}
  int64_t monotonic_ms() const override { return base_.monotonic_ms(); }
  int64_t wall_ms() const override { return base_.wall_ms() + skew_ms_; }
  void set_skew(int64_t skew_ms) { skew_ms_ = skew_ms; }
  int64_t skew() const { return skew_ms_; }

 private:
  const Clock& base_;
  int64_t skew_ms_ = 0;
};

}  // namespace vend::sim
