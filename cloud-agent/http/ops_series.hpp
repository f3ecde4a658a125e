// OpsSeries: the console's plots (GET /v1/ops/series): per-minute buckets
// of the last `minutes` minutes, built from the same ops messages as the
// event stream (OpsHub listener):
//   orders      orders created (an order event from "")
//   sales       orders COMPLETED
//   failed      orders FAILED
//   latency     payment -> dispense result (PAID to COMPLETED or FAILED,
//               the span vend_dispatch_latency_seconds measures): P50, P95,
//               P99 from a log histogram (bins 1.25x wide; the bin's geometric middle is
//               within 12% of any value in it)
// and per device, the share of the window it was online (from its device
// statuses; a device is known from its first status in this process).
//
// The publishing thread (the core's) only queues the message (offer(), O(1)
// plus one copy, bounded by max_pending: beyond it the oldest is dropped
// and counted). Parsing happens in drain(): the shell calls it a few times
// a second from its main thread, and render() drains first. Memory is
// bounded: `minutes` buckets, max_tracked_orders paid orders awaiting their
// result (oldest forgotten first), max_devices devices.
//
// Thread-safe. Non-copyable. `clock` (wall time: the window) must outlive it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vend/clock.hpp"
#include "vend/ops.hpp"

namespace vend::agent {

struct OpsSeriesOptions {
  size_t minutes = 60;
  size_t max_pending = 4096;  // queued messages not parsed yet
  size_t max_tracked_orders = 100'000;
  size_t max_devices = 20'000;
};

class OpsSeries {
 public:
  static constexpr size_t kLatencyBins = 64;

  OpsSeries(OpsSeriesOptions options, const Clock& clock);
  OpsSeries(const OpsSeries&) = delete;
  OpsSeries& operator=(const OpsSeries&) = delete;

  // An ops message (OpsHub listener): "orders" and "device" are kept for
  // drain(), the rest ignored. Never blocks beyond a short lock.
  void offer(const std::string& kind, const std::string& payload);
  // Parses what was offered into the buckets. Undecodable messages are
  // counted (bad_messages) and skipped.
  void drain();
  // The JSON of GET /v1/ops/series (docs/openapi.yaml), after a drain().
  std::string render();

 private:
  struct Bucket {
    int64_t minute = -1;  // wall ms / 60000
    int64_t orders = 0, sales = 0, failed = 0;
    std::array<uint32_t, kLatencyBins> latency{};
  };
  struct Device {
    bool online = false;
    int64_t since_ms = 0;                                // of the current state
    int64_t first_seen_ms = 0;                           // its first status
    std::vector<std::pair<int64_t, int64_t>> online_ms;  // (minute, ms online), a ring
  };

  Bucket& bucket(int64_t ts_ms);
  void on_orders(const ops::OrderEvents& events);
  void on_device(const ops::DeviceStatus& status);
  // Adds [from_ms, to_ms) to `d`'s online time, minute by minute.
  void credit_online(Device& d, int64_t from_ms, int64_t to_ms) const;
  std::string render_locked(int64_t now_ms) const;

  const OpsSeriesOptions options_;
  const Clock& clock_;

  mutable std::mutex pending_mu_;                     // guards pending_, dropped_
  std::deque<std::pair<bool, std::string>> pending_;  // (is orders, payload)
  uint64_t dropped_ = 0;

  std::mutex mu_;  // guards the rest; taken before pending_mu_
  std::vector<Bucket> buckets_;
  std::unordered_map<std::string, int64_t> paid_ms_;  // order -> when PAID
  std::deque<std::string> paid_order_;                // oldest first (eviction)
  std::map<std::string, Device> devices_;
  uint64_t bad_messages_ = 0;
};

}  // namespace vend::agent
