#include "shell_threads.hpp"

#include <string>

namespace vend::agent {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

PeriodicTicker::PeriodicTicker(milliseconds period, std::function<void()> fn)
    : period_(period), fn_(std::move(fn)) {
  thread_ = std::thread([this] { run(); });
}

PeriodicTicker::~PeriodicTicker() { stop(); }

void PeriodicTicker::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PeriodicTicker::run() {
  auto next = Steady::now() + period_;
  std::unique_lock lock(mu_);
  while (!cv_.wait_until(lock, next, [this] { return stopping_; })) {
    lock.unlock();
    fn_();
    lock.lock();
    next += period_;
    auto now = Steady::now();
    if (next < now) next = now + period_;  // fell behind: skip, don't burst
  }
}

}  // namespace vend::agent
