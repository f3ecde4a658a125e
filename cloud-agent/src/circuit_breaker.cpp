#include "vend/agent/circuit_breaker.hpp"

#include <algorithm>

namespace vend::agent {

const char* to_string(BreakerState state) {
  switch (state) {
    case BreakerState::kClosed: return "closed";
    case BreakerState::kOpen: return "open";
    case BreakerState::kHalfOpen: return "half_open";
  }
  return "?";
}

CircuitBreaker::CircuitBreaker(const Clock& clock, CircuitBreakerOptions options)
    : clock_(&clock), options_(options) {
  options_.failure_threshold = std::max(options_.failure_threshold, 1);
  options_.open_ms = std::max<int64_t>(options_.open_ms, 0);
}

bool CircuitBreaker::allow_call() {
  switch (state_) {
    case BreakerState::kClosed: return true;
    case BreakerState::kHalfOpen: return false;
    case BreakerState::kOpen: break;
  }
  if (clock_->monotonic_ms() - opened_at_ms_ < options_.open_ms) return false;
  state_ = BreakerState::kHalfOpen;
  ++transitions_.half_opened;
  return true;
}

void CircuitBreaker::on_success() {
  if (state_ == BreakerState::kOpen) return;
  if (state_ == BreakerState::kHalfOpen) {
    state_ = BreakerState::kClosed;
    ++transitions_.closed;
  }
  consecutive_failures_ = 0;
}

void CircuitBreaker::on_failure() {
  switch (state_) {
    case BreakerState::kOpen: return;
    case BreakerState::kHalfOpen: open(); return;
    case BreakerState::kClosed: break;
  }
  if (++consecutive_failures_ >= options_.failure_threshold) open();
}

void CircuitBreaker::open() {
  state_ = BreakerState::kOpen;
  opened_at_ms_ = clock_->monotonic_ms();
  consecutive_failures_ = 0;
  ++transitions_.opened;
}

}  // namespace vend::agent
