// MQTT topic names of protocol v1: the one place that builds and parses them.
//
//   vend/v1/dev/{device}/cmd      cloud -> device commands (QoS 1)
//   vend/v1/dev/{device}/evt      device -> cloud events (QoS 1)
//   vend/v1/dev/{device}/status   device presence (retained, last will)
//   vend/v1/ops/...               operator views (fleet, devices, orders,
//                                 alerts, reconciliation reports)
//
// Device ids are proto::is_valid_id ids, which exclude the MQTT special
// characters '+', '#' and '/', so a built topic is never a wildcard and
// always has the expected number of levels.
#pragma once

#include <string>
#include <string_view>

#include "vend/result.hpp"

namespace vend::topics {

inline constexpr std::string_view kRoot = "vend/v1";

// Same rule as proto::is_valid_id: 1..64 chars of [A-Za-z0-9._-].
bool is_valid_device_id(std::string_view device);

// Device topics. REQUIRES: is_valid_device_id(device) (checked by assert).
std::string device_cmd(std::string_view device);     // vend/v1/dev/{device}/cmd
std::string device_evt(std::string_view device);     // vend/v1/dev/{device}/evt
std::string device_status(std::string_view device);  // vend/v1/dev/{device}/status

// Subscription filters over every device.
std::string all_device_evt();     // vend/v1/dev/+/evt
std::string all_device_status();  // vend/v1/dev/+/status

// Ops topics. REQUIRES: ids are valid (is_valid_device_id; checked by assert).
std::string ops_fleet();  // vend/v1/ops/fleet
std::string ops_fleet_of(
    std::string_view instance);                   // vend/v1/ops/fleet/{instance} (several agents)
std::string ops_device(std::string_view device);  // vend/v1/ops/devices/{device}
std::string ops_orders();                         // vend/v1/ops/orders
std::string ops_alerts();                         // vend/v1/ops/alerts
std::string ops_reconcile(std::string_view device);  // vend/v1/ops/reconcile/{device}
std::string ops_all();                               // vend/v1/ops/# (filter)

// A device topic taken apart.
struct DeviceTopic {
  enum class Kind { kCmd, kEvt, kStatus };
  std::string device;
  Kind kind = Kind::kCmd;
  bool operator==(const DeviceTopic&) const = default;
};

// "cmd", "evt", "status".
const char* to_string(DeviceTopic::Kind kind);

// Parses "vend/v1/dev/{device}/{cmd|evt|status}" exactly (no extra levels, a
// valid device id). Errors: code "bad_topic", message naming the problem
// (wrong prefix, bad device id, unknown kind).
Result<DeviceTopic> parse_device_topic(std::string_view topic);

}  // namespace vend::topics
