// The shell's own background threads: a periodic ticker and the MQTT
// connector that retries the first connection. Both are non-copyable, start
// in the constructor and stop (joined) in stop() or the destructor.
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

// Calls transport.connect() until it succeeds, waiting a jittered
// exponential backoff (1 s .. 30 s) between attempts; the transport
// reconnects by itself afterwards. The agent serves HTTP meanwhile (devices
// then count as offline). `transport`, `random` and `log` must outlive it;
// `random` is used only from the connector's thread.
class Connector {
 public:
  Connector(Transport& transport, Random& random, Logger& log);
  ~Connector();
  Connector(const Connector&) = delete;
  Connector& operator=(const Connector&) = delete;

  // Interrupts the wait between attempts (an attempt under way finishes,
  // bounded by the transport's connect timeout). Idempotent.
  void stop();

 private:
  void run();

  Transport& transport_;
  Random& random_;
  Logger& log_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace vend::agent
