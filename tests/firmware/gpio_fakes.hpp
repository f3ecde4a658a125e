// Fake GPIO lines for TimedMotor: thread-safe (the controller's thread writes
// and waits; the test thread inspects and makes edges), stamped with
// monotonic_ns like the kernel's edge events.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "gpio/timed_motor.hpp"

namespace vend::fw::test {

class FakeOutput final : public DigitalOutput {
 public:
  struct Write {
    bool active;
    int64_t at_ns;
  };
  Status write(bool active) override {
    if (fail) return make_error("gpio_error", "fake write failure");
    std::lock_guard lock(mu_);
    writes_.push_back(Write{active, monotonic_ns()});
    return {};
  }
  std::vector<Write> writes() const {
    std::lock_guard lock(mu_);
    return writes_;
  }
  bool level() const {
    std::lock_guard lock(mu_);
    return !writes_.empty() && writes_.back().active;
  }
  std::atomic<bool> fail{false};

 private:
  mutable std::mutex mu_;
  std::vector<Write> writes_;
};

class FakeInput final : public DigitalInput {
 public:
  Result<bool> read() override {
    if (fail) return make_error("gpio_error", "fake read failure");
    return level.load();
  }
  Result<std::optional<Edge>> wait_edge(int64_t timeout_ns) override {
    if (fail) return make_error("gpio_error", "fake edge failure");
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns), [&] { return !edges_.empty(); });
    if (edges_.empty()) return std::optional<Edge>();
    Edge e = edges_.front();
    edges_.pop_front();
    return std::optional<Edge>(e);
  }
  // An item falls through the beam now: two edges, as the kernel queues
  // them. Returns the first edge's time stamp.
  int64_t pulse() {
    int64_t now = monotonic_ns();
    {
      std::lock_guard lock(mu_);
      edges_.push_back(Edge{now});
      edges_.push_back(Edge{now + 3'000'000});
    }
    cv_.notify_all();
    return now;
  }
  std::atomic<bool> level{false};
  std::atomic<bool> fail{false};

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Edge> edges_;
};

}  // namespace vend::fw::test
