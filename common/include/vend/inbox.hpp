// Inbox: the one hand-over from other threads (MQTT callbacks, HTTP workers,
// senders) to a single-threaded core (CONVENTIONS.md #4). The firmware daemon
// and the agent's core thread both drain one.
//
// Three kinds of input, each with its own rule when the core falls behind:
//   - messages (MQTT payloads): bounded by count and bytes, and by count per
//     source (a device: max_messages_per_source) so that one sender cannot
//     fill the queue the others share; one that does not fit is DROPPED and
//     counted. Safe because every sender re-sends what was not acknowledged
//     (device outboxes, the cloud's command re-sends).
//   - calls (a closure to run on the core thread, e.g. an HTTP request):
//     bounded by count; one that does not fit is REFUSED (push_call returns
//     false) so the caller can answer 503 at once instead of queueing forever.
//   - connection changes: never dropped, folded into O(1) state; the consumer
//     learns of a loss even when the session came back before it looked.
// Messages and calls keep their arrival order; a batch delivers the folded
// connection changes first.
//
// Thread-safe: any number of producers, one consumer. close() makes every
// later push fail and wakes the consumer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace vend {

template <typename M>
class Inbox {
 public:
  using Call = std::function<void()>;
  using Item = std::variant<M, Call>;

  struct Limits {
    size_t max_messages = 10'000;
    size_t max_bytes = 64 * 1024 * 1024;
    size_t max_calls = 10'000;
    // Messages of one source waiting at once (push_message's `source`);
    // 0: no bound per source.
    size_t max_messages_per_source = 0;
  };

  struct Batch {
    // At most two, in order: a loss the consumer had not seen, then the
    // current state.
    std::vector<bool> connection_changes;
    std::vector<Item> items;          // messages and calls, in arrival order
    uint64_t dropped_since_last = 0;  // messages dropped since the previous batch
    bool closed = false;
  };

  // What waits now, and the bounds.
  struct Fill {
    size_t messages = 0, max_messages = 0, bytes = 0, max_bytes = 0, calls = 0, max_calls = 0;
  };

  explicit Inbox(Limits limits) : limits_(limits) {}
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  // False when the message was dropped (full, its source's share full, or
  // closed). `bytes` is its size as counted against max_bytes; `source`
  // names its sender for max_messages_per_source ("" counts as none).
  bool push_message(M message, size_t bytes, std::string_view source = {}) {
    {
      std::lock_guard lock(mu_);
      if (closed_ || messages_ >= limits_.max_messages || bytes_ + bytes > limits_.max_bytes) {
        if (!closed_) ++dropped_total_;
        return false;
      }
      if (limits_.max_messages_per_source > 0 && !source.empty()) {
        size_t& queued = per_source_[std::string(source)];
        if (queued >= limits_.max_messages_per_source) {
          ++dropped_total_;
          ++dropped_over_share_total_;
          return false;
        }
        ++queued;
      }
      ++messages_;
      bytes_ += bytes;
      items_.emplace_back(std::in_place_index<0>, std::move(message));
    }
    cv_.notify_one();
    return true;
  }

  // False when refused (full, or closed): the call will never run.
  bool push_call(Call call) {
    {
      std::lock_guard lock(mu_);
      if (closed_ || calls_ >= limits_.max_calls) return false;
      ++calls_;
      items_.emplace_back(std::in_place_index<1>, std::move(call));
    }
    cv_.notify_one();
    return true;
  }

  void push_connection(bool connected) {
    {
      std::lock_guard lock(mu_);
      latest_connection_ = connected;
      if (!connected) lost_since_take_ = true;
    }
    cv_.notify_one();
  }

  // Wakes the consumer without work.
  void wake() {
    {
      std::lock_guard lock(mu_);
      woken_ = true;
    }
    cv_.notify_one();
  }

  // Later pushes fail; what is queued is still delivered by take_until().
  void close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }

  // Waits until something is queued (or closed, or woken) or `deadline`
  // passes, then takes everything.
  Batch take_until(std::chrono::steady_clock::time_point deadline) {
    Batch batch;
    take_until(deadline, batch);
    return batch;
  }

  // The same into `batch`, whose previous contents are dropped. A consumer
  // that passes the same Batch every time allocates nothing in steady state:
  // the two item vectors swap roles (the producers fill the one the consumer
  // just emptied).
  void take_until(std::chrono::steady_clock::time_point deadline, Batch& batch) {
    batch.connection_changes.clear();
    batch.items.clear();
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, deadline, [this] { return has_work_locked(); });
    // A loss the consumer has not seen comes first, even if the session is
    // already back: the core must learn that its session was lost.
    if (lost_since_take_ && delivered_connected_) {
      batch.connection_changes.push_back(false);
      delivered_connected_ = false;
    }
    if (latest_connection_ && *latest_connection_ != delivered_connected_) {
      batch.connection_changes.push_back(*latest_connection_);
      delivered_connected_ = *latest_connection_;
    }
    latest_connection_.reset();
    lost_since_take_ = false;
    items_.swap(batch.items);
    messages_ = bytes_ = calls_ = 0;
    per_source_.clear();
    batch.dropped_since_last = dropped_total_ - dropped_reported_;
    dropped_reported_ = dropped_total_;
    batch.closed = closed_;
    woken_ = false;
  }

  uint64_t dropped_total() const {
    std::lock_guard lock(mu_);
    return dropped_total_;
  }

  // Of dropped_total(): messages dropped because their source had
  // max_messages_per_source waiting already.
  uint64_t dropped_over_share_total() const {
    std::lock_guard lock(mu_);
    return dropped_over_share_total_;
  }

  Fill fill() const {
    std::lock_guard lock(mu_);
    return Fill{messages_, limits_.max_messages, bytes_, limits_.max_bytes,
                calls_,    limits_.max_calls};
  }

 private:
  bool has_work_locked() const {
    return woken_ || closed_ || latest_connection_.has_value() || !items_.empty() ||
           dropped_total_ != dropped_reported_;
  }

  const Limits limits_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Item> items_;
  size_t messages_ = 0;
  size_t bytes_ = 0;
  size_t calls_ = 0;
  std::unordered_map<std::string, size_t> per_source_;  // messages waiting, by source
  uint64_t dropped_total_ = 0;
  uint64_t dropped_over_share_total_ = 0;
  uint64_t dropped_reported_ = 0;
  std::optional<bool> latest_connection_;  // set when a change is pending
  bool lost_since_take_ = false;
  bool delivered_connected_ = false;  // what the consumer last saw
  bool woken_ = false;
  bool closed_ = false;
};

}  // namespace vend
