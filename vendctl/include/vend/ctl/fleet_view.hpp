// FleetView: what `vendctl watch` knows about the fleet, folded from the
// agent's ops messages (vend/ops.hpp) in arrival order. Pure: no I/O, no
// clock, no threads (the watch loop feeds it under its own lock).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "vend/ops.hpp"

namespace vend::ctl {

class FleetView {
 public:
  static constexpr size_t kRecentOrders = 10;

  // Folds one message of vend/v1/ops/#. An empty payload on a retained topic
  // (the retained message was deleted) forgets that device or report.
  // Topics outside vend/v1/ops/ and unknown ops topics are ignored (a newer
  // agent may add some). Returns the decode error of a malformed payload,
  // which is also counted and kept for the frame's footer.
  Status apply(std::string_view topic, std::string_view payload);

  // The fleet summary: one agent's, or with several agents (each on
  // vend/v1/ops/fleet/{instance}) their sum.
  std::optional<ops::FleetSummary> fleet() const;
  // Several agents: each instance's own summary, by instance id.
  const std::map<std::string, ops::FleetSummary>& instances() const { return instances_; }
  // By device id.
  const std::map<std::string, ops::DeviceStatus>& devices() const { return devices_; }
  // Newest first, at most kRecentOrders.
  const std::deque<ops::OrderEvent>& recent_orders() const { return orders_; }
  // Raised and not cleared yet, keyed by (code, device, slot); the latest
  // raise of each key.
  using AlertKey = std::tuple<std::string, std::string, int>;
  const std::map<AlertKey, ops::Alert>& active_alerts() const { return alerts_; }
  const std::map<std::string, ops::ReconcileReport>& reports() const { return reports_; }

  int64_t messages() const { return messages_; }
  int64_t rejected() const { return rejected_; }
  // "topic: code: message" of the last rejected payload; "" when none.
  const std::string& last_error() const { return last_error_; }

 private:
  Status reject(std::string_view topic, const Error& error);
  void apply_alert(ops::Alert alert);

  std::optional<ops::FleetSummary> fleet_;
  std::map<std::string, ops::FleetSummary> instances_;
  std::map<std::string, ops::DeviceStatus> devices_;
  std::deque<ops::OrderEvent> orders_;
  std::map<AlertKey, ops::Alert> alerts_;
  std::map<std::string, ops::ReconcileReport> reports_;
  int64_t messages_ = 0;
  int64_t rejected_ = 0;
  std::string last_error_;
};

}  // namespace vend::ctl
