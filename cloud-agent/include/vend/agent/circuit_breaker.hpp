// CircuitBreaker: a pure closed / open / half-open state machine on an
// injected monotonic clock, for calls to a dependency that can go away (the
// agent's stock store, docs/stock-store.md "Degradation"). No I/O, no
// threads, no logging: the caller makes the calls, takes its fallback when
// a call is not allowed, and reports each outcome.
//
//   closed     calls go through. `failure_threshold` consecutive failures
//              open the breaker; a success resets the count.
//   open       calls are refused (the caller uses its fallback, at no
//              latency) until `open_ms` have passed since it opened; then
//              allow_call() lets ONE call through as a probe and the breaker
//              is half_open.
//   half_open  the probe is out; other calls are refused. The probe's
//              on_success() closes the breaker; its on_failure() opens it
//              again for another open_ms.
//
// Thread-safety: none. The owner serialises every call (the agent core
// holds its lock). `clock` must outlive the breaker. Copyable.
#pragma once

#include <cstdint>

#include "vend/clock.hpp"

namespace vend::agent {

struct CircuitBreakerOptions {
  // Consecutive failures that open a closed breaker. Values < 1 count as 1.
  int failure_threshold = 3;
  // How long an open breaker refuses calls before it lets a probe through
  // (monotonic ms). Negative values count as 0.
  int64_t open_ms = 2000;
};

enum class BreakerState { kClosed, kOpen, kHalfOpen };

// "closed", "open", "half_open" (metric labels, /healthz).
const char* to_string(BreakerState state);

// How often the breaker entered each state since it was made.
struct BreakerTransitions {
  int64_t opened = 0;       // closed -> open, and half_open -> open (a failed probe)
  int64_t half_opened = 0;  // open -> half_open (a probe let through)
  int64_t closed = 0;       // half_open -> closed (a probe succeeded)
};

class CircuitBreaker {
 public:
  explicit CircuitBreaker(const Clock& clock, CircuitBreakerOptions options = {});

  // Whether the caller may call the dependency now. Closed: always. Open:
  // false until open_ms have passed since it opened; then true once, and the
  // breaker is half_open (the caller's call is the probe and it MUST report
  // its outcome). Half-open: false (the probe is still out).
  bool allow_call();

  // The outcome of a call allow_call() let through. Closed: a success
  // resets the failure count; a failure counts, and the threshold-th one in
  // a row opens the breaker. Half-open: success closes, failure re-opens.
  // Open: ignored (a late outcome of a call made before it opened; it must
  // not shorten or extend the open period).
  void on_success();
  void on_failure();

  BreakerState state() const { return state_; }
  // Failures in a row while closed; 0 after a success, and while not closed.
  int consecutive_failures() const { return consecutive_failures_; }
  const BreakerTransitions& transitions() const { return transitions_; }
  // Monotonic time the breaker last opened (0 if it never did).
  int64_t opened_at_ms() const { return opened_at_ms_; }
  const CircuitBreakerOptions& options() const { return options_; }

 private:
  void open();

  const Clock* clock_;
  CircuitBreakerOptions options_;
  BreakerState state_ = BreakerState::kClosed;
  int consecutive_failures_ = 0;
  int64_t opened_at_ms_ = 0;
  BreakerTransitions transitions_;
};

}  // namespace vend::agent
