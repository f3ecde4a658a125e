// The agent's side of the ops topics (vend/v1/ops/..., vend/ops.hpp): which
// alerts are active, the order events waiting to go out, and when each
// retained view (device status, fleet summary) is due again. Memory only:
// these classes decide what to publish and return it as values; the core
// encodes, publishes and logs. Times are passed in (no clock reads).
//
// Single-threaded (the core's thread). Not copyable.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vend/ops.hpp"

namespace vend::agent {

// Active alerts, one per (device, slot, code).
class AlertBook {
 public:
  AlertBook() = default;
  AlertBook(const AlertBook&) = delete;
  AlertBook& operator=(const AlertBook&) = delete;

  struct Raised {
    std::optional<ops::Alert> publish;  // nullopt: already active with this message
    bool new_alert = false;             // it was not active before
  };
  // Raised once while active; a new message for an active one is published
  // again (not a new alert).
  Raised raise(const std::string& device, int slot, const std::string& code,
               const std::string& severity, const std::string& message, int64_t now_ms);
  // The "cleared" message to publish, nullopt when it was not active.
  std::optional<ops::Alert> clear(const std::string& device, int slot, std::string_view code,
                                  int64_t now_ms);
  bool active(const std::string& device, int slot, std::string_view code) const;
  size_t size() const { return active_.size(); }
  // The active alerts (state "raised"), by device, slot and code.
  std::vector<ops::Alert> list() const;
  // Active alerts per code, ordered by code.
  std::vector<std::pair<std::string, int64_t>> counts_by_code() const;

 private:
  using Key = std::tuple<std::string, int, std::string>;
  std::map<Key, ops::Alert> active_;
};

// Order events between two flushes, in the order they happened.
class OrderEventBatch {
 public:
  static constexpr size_t kMaxPerMessage = 500;

  // True when the batch is full and should be taken now (bounded messages).
  // Each event is written as it is added (ops::OrderEventsWriter).
  bool add(const ops::OrderEventView& event);
  // The waiting events as one vend/v1/ops/orders payload; nullopt when
  // there are none.
  std::optional<std::string> take();
  size_t size() const { return pending_.size(); }

 private:
  ops::OrderEventsWriter pending_;
};

// When the retained views are due: a device whose status changed is
// published at most once per `interval_ms`, the fleet summary likewise.
// A publish time of 0 counts as never published.
class ViewSchedule {
 public:
  explicit ViewSchedule(int64_t interval_ms) : interval_ms_(interval_ms) {}
  ViewSchedule(const ViewSchedule&) = delete;
  ViewSchedule& operator=(const ViewSchedule&) = delete;

  // The device's status changed (and with it the fleet's).
  void device_changed(const std::string& device, int64_t now_ms);
  // Something only the fleet summary shows changed (an alert).
  void fleet_changed() { fleet_dirty_ = true; }
  // The changed devices due now, marked published at `now_ms`; ones
  // published less than an interval ago wait (the scan runs again only when
  // the first of them is due, not on every tick).
  std::vector<std::string> take_due_devices(int64_t now_ms);
  // True (and marked published) when the fleet summary is due now.
  bool take_fleet_due(int64_t now_ms);

 private:
  struct Device {
    int64_t published_ms = 0;  // last publish
    bool dirty = false;        // changed since published (then in dirty_)
  };
  const int64_t interval_ms_;
  std::unordered_map<std::string, Device> devices_;
  std::vector<std::string> dirty_;  // the dirty devices, each once
  int64_t scan_due_ms_ = 0;         // no dirty device is due before this (0: scan next time)
  bool fleet_dirty_ = true;
  int64_t fleet_published_ms_ = 0;
};

}  // namespace vend::agent
