// Clock: the only source of time in core code (CONVENTIONS.md #2).
#pragma once

#include <cstdint>
#include <limits>

namespace vend {

// Monotonic time never goes back and is for deadlines and durations; wall time
// (Unix epoch, ms) is for expires_at_ms and human-facing timestamps only and
// is never used as a dedup key.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t monotonic_ms() const = 0;
  virtual int64_t wall_ms() const = 0;
};

// The real clock. Thread-safe.
class SystemClock final : public Clock {
 public:
  int64_t monotonic_ms() const override;
  int64_t wall_ms() const override;
};

// A clock moved by hand, for tests and the deterministic simulator.
// Not thread-safe: it belongs to the single simulation thread.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t wall_start_ms = 1'700'000'000'000, int64_t monotonic_start_ms = 0)
      : wall_ms_(wall_start_ms), monotonic_ms_(monotonic_start_ms) {}

  int64_t monotonic_ms() const override { return monotonic_ms_; }
  int64_t wall_ms() const override { return wall_ms_ + skew_ms_; }

  // Moves both clocks forward. REQUIRES: delta_ms >= 0.
  void advance(int64_t delta_ms);
  // Skews the wall clock only (clock-skew faults); monotonic time is unaffected.
  void set_wall_skew(int64_t skew_ms) { skew_ms_ = skew_ms; }

 private:
  int64_t wall_ms_;
  int64_t monotonic_ms_;
  int64_t skew_ms_ = 0;
};

// a + b, clamped to the int64 range: time sums built from wire values (an
// expires_at_ms near 2^63-1 plus a skew) never overflow.
constexpr int64_t saturating_add(int64_t a, int64_t b) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  if (b > 0 && a > kMax - b) return kMax;
  if (b < 0 && a < kMin - b) return kMin;
  return a + b;
}

// True when a deadline of `deadline_ms`, tolerating `skew_ms`, has passed at
// `now_ms`. Overflow-free for any deadline.
constexpr bool past_deadline(int64_t now_ms, int64_t deadline_ms, int64_t skew_ms) {
  return now_ms > saturating_add(deadline_ms, skew_ms);
}

}  // namespace vend
