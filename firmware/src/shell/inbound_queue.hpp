// InboundQueue: the one place where the transport's threads hand work to the
// single-threaded device core (CONVENTIONS.md #4).
//
// Commands are bounded: when `capacity` are waiting, a new one is dropped and
// counted (the cloud re-sends unanswered commands, and a dispense is
// deduplicated by order id, so a drop delays, never loses, an order).
// Connection changes are never dropped but are folded into O(1) state: the
// consumer learns of a loss even when the session came back before it looked.
//
// Thread-safe: any number of producers, one consumer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace vend::fw {

class InboundQueue {
 public:
  struct Batch {
    // Connection changes to deliver in order (at most two: a loss, then the
    // current state).
    std::vector<bool> connection_changes;
    std::vector<std::string> commands;
    uint64_t dropped_since_last = 0;  // commands dropped since the previous batch
  };

  explicit InboundQueue(size_t capacity) : capacity_(capacity) {}
  InboundQueue(const InboundQueue&) = delete;
  InboundQueue& operator=(const InboundQueue&) = delete;

  // Returns false when the command was dropped because the queue is full.
  bool push_command(std::string payload);
  void push_connection(bool connected);
  // Wakes the consumer without work (shutdown).
  void wake();

  // Waits until something is queued or `deadline` passes, then takes it all.
  Batch take_until(std::chrono::steady_clock::time_point deadline);

  uint64_t dropped_total() const;

 private:
  bool has_work_locked() const;

  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> commands_;
  uint64_t dropped_total_ = 0;
  uint64_t dropped_reported_ = 0;
  std::optional<bool> latest_connection_;  // set when a change is pending
  bool lost_since_take_ = false;
  bool delivered_connected_ = false;  // what the consumer last saw
  bool woken_ = false;
};

}  // namespace vend::fw
