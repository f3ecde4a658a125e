#include "shell_threads.hpp"

#include <string>

#include "vend/paho_transport.hpp"

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

Connector::Connector(Transport& transport, Random& random, Logger& log)
    : transport_(transport), random_(random), log_(log) {
  thread_ = std::thread([this] { run(); });
}

Connector::~Connector() { stop(); }

void Connector::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Connector::run() {
  for (int attempt = 0;; ++attempt) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    if (transport_.connect().ok()) return;  // the transport logged why not
    milliseconds delay =
        reconnect_delay(attempt, milliseconds(1000), milliseconds(30000), random_.uniform());
    log_.warn("agent", "MQTT broker not reachable; next attempt in " +
                           std::to_string(delay.count()) + " ms (serving HTTP meanwhile)");
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, delay, [this] { return stopping_; })) return;
  }
}

}  // namespace vend::agent
