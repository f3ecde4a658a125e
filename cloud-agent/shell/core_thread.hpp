// CoreThread: the agent core's one thread (CoreRunner). It drains one Inbox
// (vend/inbox.hpp): MQTT messages and connection changes from the Paho
// threads, and steps handed over by HTTP workers and the refund sender
// (run()). It ticks the core every `tick_period` between batches. The core
// holds no mutex: this thread is the only one that touches it.
//
// Bounded: messages beyond the inbox's limits are dropped and counted (the
// devices re-send unacknowledged events; a warning with the count is logged
// from this thread), and so are a machine's beyond its share
// (Limits::max_messages_per_source; the source is the device id of the
// topic). Paho acknowledges a QoS 1 message once it is queued or dropped
// here, so what is dropped is not redelivered by the broker: a device's
// events are re-sent by its outbox until the core acks them (after their
// commit); a dropped status stays retained at the broker, sent again on
// the core's next subscribe and asked for by its status probes; a step that does not fit is refused
// (run() returns false and the caller answers 503). Connection changes are never dropped.
//
// Lifecycle: construct, attach the handlers, start(); before start() (and on
// the core thread itself) run() runs the step at once on the caller's thread,
// so AgentCore::start() can run before the thread exists. stop() runs what
// was already queued, refuses the rest and joins. Non-copyable.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "core/core_runner.hpp"
#include "vend/inbox.hpp"
#include "vend/log.hpp"
#include "vend/transport.hpp"

namespace vend::agent {

class CoreThread final : public CoreRunner {
 public:
  using Limits = Inbox<Message>::Limits;
  struct Handlers {
    std::function<void(const Message&)> on_message;
    std::function<void(bool connected)> on_connection;
    std::function<void()> on_tick;
  };

  // `tick_period` 0: no ticks (a test drives them). `log` must outlive it.
  CoreThread(Limits limits, std::chrono::milliseconds tick_period, Logger& log);
  ~CoreThread() override;
  CoreThread(const CoreThread&) = delete;
  CoreThread& operator=(const CoreThread&) = delete;

  // REQUIRES: not started.
  void start(Handlers handlers);
  void stop();  // idempotent

  bool run(const std::function<void()>& step) override;
  bool post(std::function<void()> step) override;
  // From the Paho threads; never block beyond the inbox's lock.
  void push_message(const Message& message);
  void push_connection(bool connected);

  Inbox<Message>::Fill fill() const { return inbox_.fill(); }
  uint64_t dropped() const { return inbox_.dropped_total(); }
  uint64_t dropped_over_share() const { return inbox_.dropped_over_share_total(); }

 private:
  void loop();
  bool on_core_thread() const;

  Inbox<Message> inbox_;
  const std::chrono::milliseconds tick_period_;
  Logger& log_;
  Handlers handlers_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

}  // namespace vend::agent
