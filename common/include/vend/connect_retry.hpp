// ConnectRetry: keeps calling transport.connect() until the first session is
// up, on its own thread, with the jittered exponential backoff of
// reconnect_delay() (1 s .. 30 s); after that the transport reconnects by
// itself. Shared by the firmware daemon and the agent shell, which both keep
// working offline meanwhile.
//
// `transport`, `random` and `log` must outlive it; `random` is used only from
// its thread. Non-copyable. Starts in the constructor; stop() (or the
// destructor) interrupts the wait between attempts and joins — an attempt
// under way finishes first, bounded by the transport's connect timeout.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "vend/log.hpp"
#include "vend/random.hpp"
#include "vend/transport.hpp"

namespace vend {

class ConnectRetry {
 public:
  // `component` names the log records; `meanwhile` says what the process
  // does while it waits ("working offline", "serving HTTP").
  ConnectRetry(Transport& transport, Random& random, Logger& log, std::string component,
               std::string meanwhile);
  ~ConnectRetry();
  ConnectRetry(const ConnectRetry&) = delete;
  ConnectRetry& operator=(const ConnectRetry&) = delete;

  // Idempotent.
  void stop();

 private:
  void run();

  Transport& transport_;
  Random& random_;
  Logger& log_;
  std::string component_;
  std::string meanwhile_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace vend
