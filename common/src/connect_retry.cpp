#include "vend/connect_retry.hpp"

#include <chrono>
#include <utility>

#include "vend/paho_transport.hpp"

namespace vend {

using std::chrono::milliseconds;

ConnectRetry::ConnectRetry(Transport& transport, Random& random, Logger& log, std::string component,
                           std::string meanwhile)
    : transport_(transport),
      random_(random),
      log_(log),
      component_(std::move(component)),
      meanwhile_(std::move(meanwhile)) {
  thread_ = std::thread([this] { run(); });
}

ConnectRetry::~ConnectRetry() { stop(); }

void ConnectRetry::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ConnectRetry::run() {
  for (int attempt = 0;; ++attempt) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    if (transport_.connect().ok()) return;  // the transport logged why not
    milliseconds delay =
        reconnect_delay(attempt, milliseconds(1000), milliseconds(30000), random_.uniform());
    log_.warn(component_, "MQTT broker not reachable; next attempt in " +
                              std::to_string(delay.count()) + " ms (" + meanwhile_ + " meanwhile)");
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, delay, [this] { return stopping_; })) return;
  }
}

}  // namespace vend
