// CircuitBreaker on a ManualClock: thresholds, the open period, the single
// half-open probe, late outcomes, transition counters.
#include "vend/agent/circuit_breaker.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace vend;
using namespace vend::agent;

namespace {

void fail_times(CircuitBreaker& breaker, int n) {
  for (int i = 0; i < n; ++i) {
    REQUIRE(breaker.allow_call());
    breaker.on_failure();
  }
}

}  // namespace

TEST_CASE("closed: calls go through; only consecutive failures open it") {
  ManualClock clock;
  CircuitBreaker breaker(clock, {3, 1000});
  CHECK(breaker.state() == BreakerState::kClosed);
  fail_times(breaker, 2);
  CHECK(breaker.consecutive_failures() == 2);
  breaker.on_success();  // breaks the run
  CHECK(breaker.consecutive_failures() == 0);
  fail_times(breaker, 2);
  CHECK(breaker.state() == BreakerState::kClosed);
  fail_times(breaker, 1);
  CHECK(breaker.state() == BreakerState::kOpen);
  CHECK(breaker.opened_at_ms() == clock.monotonic_ms());
  CHECK(breaker.transitions().opened == 1);
  CHECK(breaker.transitions().half_opened == 0);
}

TEST_CASE("open: refuses until open_ms passed, then lets exactly one probe through") {
  ManualClock clock;
  CircuitBreaker breaker(clock, {1, 1000});
  fail_times(breaker, 1);
  REQUIRE(breaker.state() == BreakerState::kOpen);
  clock.advance(999);
  CHECK_FALSE(breaker.allow_call());
  CHECK(breaker.state() == BreakerState::kOpen);
  clock.advance(1);
  CHECK(breaker.allow_call());
  CHECK(breaker.state() == BreakerState::kHalfOpen);
  CHECK_FALSE(breaker.allow_call());  // the probe is still out
  CHECK(breaker.transitions().half_opened == 1);

  SUBCASE("a successful probe closes it") {
    breaker.on_success();
    CHECK(breaker.state() == BreakerState::kClosed);
    CHECK(breaker.transitions().closed == 1);
    CHECK(breaker.allow_call());
  }
  SUBCASE("a failed probe opens it for another open_ms") {
    clock.advance(500);
    breaker.on_failure();
    CHECK(breaker.state() == BreakerState::kOpen);
    CHECK(breaker.transitions().opened == 2);
    CHECK(breaker.opened_at_ms() == clock.monotonic_ms());
    clock.advance(999);
    CHECK_FALSE(breaker.allow_call());
    clock.advance(1);
    CHECK(breaker.allow_call());
    CHECK(breaker.transitions().half_opened == 2);
  }
}

TEST_CASE("late outcomes while open neither close it nor extend the open period") {
  ManualClock clock;
  CircuitBreaker breaker(clock, {2, 1000});
  clock.advance(100);
  fail_times(breaker, 2);
  REQUIRE(breaker.state() == BreakerState::kOpen);
  REQUIRE(breaker.opened_at_ms() == 100);
  clock.advance(400);
  breaker.on_success();
  CHECK(breaker.state() == BreakerState::kOpen);
  breaker.on_failure();
  CHECK(breaker.opened_at_ms() == 100);
  clock.advance(600);
  CHECK(breaker.allow_call());
  CHECK(breaker.transitions().opened == 1);
}

TEST_CASE("a closed breaker starts counting from zero again") {
  ManualClock clock;
  CircuitBreaker breaker(clock, {2, 0});
  fail_times(breaker, 2);
  REQUIRE(breaker.allow_call());  // open_ms 0: the probe goes at once
  breaker.on_success();
  REQUIRE(breaker.state() == BreakerState::kClosed);
  fail_times(breaker, 1);
  CHECK(breaker.state() == BreakerState::kClosed);
  fail_times(breaker, 1);
  CHECK(breaker.state() == BreakerState::kOpen);
}

TEST_CASE("options are clamped; states have names") {
  ManualClock clock;
  CircuitBreaker breaker(clock, {0, -5});
  CHECK(breaker.options().failure_threshold == 1);
  CHECK(breaker.options().open_ms == 0);
  fail_times(breaker, 1);
  CHECK(breaker.state() == BreakerState::kOpen);
  CHECK(std::string(to_string(BreakerState::kClosed)) == "closed");
  CHECK(std::string(to_string(BreakerState::kOpen)) == "open");
  CHECK(std::string(to_string(BreakerState::kHalfOpen)) == "half_open");
}
