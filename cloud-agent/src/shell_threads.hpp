// The shell's periodic ticker thread (the first MQTT connection is retried
// by vend::ConnectRetry). Non-copyable; starts in the constructor and stops
// (joined) in stop() or the destructor.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "vend/log.hpp"
#include "vend/random.hpp"
#include "vend/transport.hpp"

namespace vend::agent {

// Calls `fn` every `period` on its own thread (the next call is planned
// from the previous deadline, so a slow call does not shift the rhythm
// forever; missed periods are skipped, not replayed).
class PeriodicTicker {
 public:
  PeriodicTicker(std::chrono::milliseconds period, std::function<void()> fn);
  ~PeriodicTicker();
  PeriodicTicker(const PeriodicTicker&) = delete;
  PeriodicTicker& operator=(const PeriodicTicker&) = delete;

  // Returns after the running call (if any) finished. Idempotent.
  void stop();

 private:
  void run();

  std::chrono::milliseconds period_;
  std::function<void()> fn_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace vend::agent
