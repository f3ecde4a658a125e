#include "vend/topics.hpp"

#include <cassert>

#include "vend/protocol.hpp"

namespace vend::topics {

namespace {

constexpr std::string_view kDevicePrefix = "vend/v1/dev/";
constexpr std::string_view kOpsPrefix = "vend/v1/ops/";

std::string join(std::string_view prefix, std::string_view middle, std::string_view suffix = {}) {
  std::string topic;
  topic.reserve(prefix.size() + middle.size() + suffix.size());
  topic.append(prefix).append(middle).append(suffix);
  return topic;
}

std::string device_topic(std::string_view device, std::string_view suffix) {
  assert(is_valid_device_id(device));
  return join(kDevicePrefix, device, suffix);
}

Error bad_topic(std::string message) { return Error{"bad_topic", std::move(message)}; }

}  // namespace

bool is_valid_device_id(std::string_view device) { return proto::is_valid_id(device); }

std::string device_cmd(std::string_view device) { return device_topic(device, "/cmd"); }
std::string device_evt(std::string_view device) { return device_topic(device, "/evt"); }
std::string device_status(std::string_view device) { return device_topic(device, "/status"); }

std::string all_device_evt() { return join(kDevicePrefix, "+/evt"); }
std::string all_device_status() { return join(kDevicePrefix, "+/status"); }

std::string ops_fleet() { return join(kOpsPrefix, "fleet"); }
std::string ops_fleet_of(std::string_view instance) {
  assert(is_valid_device_id(instance));  // the same alphabet as an instance id
  return join(kOpsPrefix, "fleet/", instance);
}
std::string ops_device(std::string_view device) {
  assert(is_valid_device_id(device));
  return join(kOpsPrefix, "devices/", device);
}
std::string ops_orders() { return join(kOpsPrefix, "orders"); }
std::string ops_alerts() { return join(kOpsPrefix, "alerts"); }
std::string ops_reconcile(std::string_view device) {
  assert(is_valid_device_id(device));
  return join(kOpsPrefix, "reconcile/", device);
}
std::string ops_all() { return join(kOpsPrefix, "#"); }

const char* to_string(DeviceTopic::Kind kind) {
  switch (kind) {
    case DeviceTopic::Kind::kCmd: return "cmd";
    case DeviceTopic::Kind::kEvt: return "evt";
    case DeviceTopic::Kind::kStatus: return "status";
  }
  return "unknown";
}

Result<DeviceTopic> parse_device_topic(std::string_view topic) {
  if (!topic.starts_with(kDevicePrefix)) {
    return bad_topic("topic does not start with '" + std::string(kDevicePrefix) + "'");
  }
  std::string_view rest = topic.substr(kDevicePrefix.size());
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return bad_topic("topic has no kind after the device id");
  const std::string_view device = rest.substr(0, slash);
  const std::string_view kind = rest.substr(slash + 1);
  if (!is_valid_device_id(device)) {
    return bad_topic("device id in topic must be 1..64 chars of [A-Za-z0-9._-]");
  }
  for (auto k : {DeviceTopic::Kind::kCmd, DeviceTopic::Kind::kEvt, DeviceTopic::Kind::kStatus}) {
    if (kind == to_string(k)) return DeviceTopic{std::string(device), k};
  }
  return bad_topic("topic kind must be cmd, evt or status");
}

}  // namespace vend::topics
