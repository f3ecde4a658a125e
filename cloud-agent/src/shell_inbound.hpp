// InboundPump: hands MQTT input (messages and connection changes) from the
// transport's threads to the core on a thread of its own.
//
// Why not call AgentCore from the Paho handler: Paho holds its client mutex
// while it runs a message handler, and AgentCore publishes (acks, commands)
// while holding its core lock. A handler taking the core lock would lock in
// the opposite order: a potential deadlock (ThreadSanitizer reported it).
// With the pump, Paho threads only take the pump's own short-lived lock.
//
// At-least-once is kept end to end without the PUBACK: the broker's PUBACK
// now goes out before the core has seen the message, but a device keeps
// every event in its outbox until the agent's application-level ack covers
// it, and statuses are retained (sent again on every subscription).
//
// Bounded: at most `max_messages` messages and `max_bytes` payload bytes
// wait; beyond that a message is dropped and counted (the device re-sends
// unacknowledged events; a warning with the count is logged from the pump
// thread). Connection changes are never dropped. Order is kept.
//
// Thread-safe; non-copyable. The handlers run on the pump's thread only.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <variant>

#include "vend/log.hpp"
#include "vend/transport.hpp"

namespace vend::agent {

class InboundPump {
 public:
  struct Limits {
    size_t max_messages = 10'000;
    size_t max_bytes = 64 * 1024 * 1024;
  };
  using MessageHandler = std::function<void(const Message&)>;
  using ConnectionHandler = std::function<void(bool connected)>;

  // Starts the pump thread. `log` must outlive the pump.
  InboundPump(Limits limits, MessageHandler on_message, ConnectionHandler on_connection,
              Logger& log);
  ~InboundPump();
  InboundPump(const InboundPump&) = delete;
  InboundPump& operator=(const InboundPump&) = delete;

  // Never block (beyond the pump's lock). Ignored after stop().
  void push_message(const Message& message);
  void push_connection(bool connected);

  // Finishes the item being handled, discards the rest, joins. Idempotent.
  void stop();

  uint64_t dropped() const;
  // What waits now, and the bounds.
  struct Fill {
    size_t messages = 0, max_messages = 0, bytes = 0, max_bytes = 0;
  };
  Fill fill() const;

 private:
  using Item = std::variant<Message, bool>;
  void run();
  void report_drops(uint64_t dropped_now);

  Limits limits_;
  MessageHandler on_message_;
  ConnectionHandler on_connection_;
  Logger& log_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  size_t messages_ = 0;
  size_t bytes_ = 0;
  uint64_t dropped_ = 0;
  uint64_t dropped_reported_ = 0;  // pump thread only
  bool stopping_ = false;
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace vend::agent
