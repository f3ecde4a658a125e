#include "vend/topics.hpp"

#include <doctest/doctest.h>

#include <initializer_list>
#include <string>

namespace vend::topics {
namespace {

TEST_CASE("device topics are built under vend/v1/dev") {
  CHECK(kRoot == "vend/v1");
  CHECK(device_cmd("vm-0042") == "vend/v1/dev/vm-0042/cmd");
  CHECK(device_evt("vm-0042") == "vend/v1/dev/vm-0042/evt");
  CHECK(device_status("vm-0042") == "vend/v1/dev/vm-0042/status");
  CHECK(all_device_evt() == "vend/v1/dev/+/evt");
  CHECK(all_device_status() == "vend/v1/dev/+/status");
}

TEST_CASE("ops topics are built under vend/v1/ops") {
  CHECK(ops_fleet() == "vend/v1/ops/fleet");
  CHECK(ops_device("vm-0042") == "vend/v1/ops/devices/vm-0042");
  CHECK(ops_orders() == "vend/v1/ops/orders");
  CHECK(ops_alerts() == "vend/v1/ops/alerts");
  CHECK(ops_reconcile("vm-0042") == "vend/v1/ops/reconcile/vm-0042");
  CHECK(ops_all() == "vend/v1/ops/#");
}

TEST_CASE("built device topics parse back") {
  using Kind = DeviceTopic::Kind;
  for (const char* device : {"a", "vm-0042", "Site_3.row-2"}) {
    CAPTURE(device);
    CHECK(parse_device_topic(device_cmd(device)).value() == DeviceTopic{device, Kind::kCmd});
    CHECK(parse_device_topic(device_evt(device)).value() == DeviceTopic{device, Kind::kEvt});
    CHECK(parse_device_topic(device_status(device)).value() == DeviceTopic{device, Kind::kStatus});
  }
  CHECK(std::string(to_string(Kind::kStatus)) == "status");
}

TEST_CASE("device ids exclude MQTT specials and empty ids") {
  CHECK(is_valid_device_id("vm-0042"));
  CHECK(is_valid_device_id(std::string(64, 'x')));
  for (const std::string& bad : std::initializer_list<std::string>{
           "", "+", "#", "a/b", "vm+1", "vm#1", "a b", std::string(65, 'x')}) {
    CAPTURE(bad);
    CHECK_FALSE(is_valid_device_id(bad));
  }
}

TEST_CASE("malformed device topics are rejected as bad_topic") {
  struct Case {
    const char* topic;
    const char* needle;
  };
  const Case cases[] = {
      {"", "start"},
      {"vend/v2/dev/vm-1/cmd", "start"},
      {"vend/v1/ops/fleet", "start"},
      {"Vend/v1/dev/vm-1/cmd", "start"},
      {"/vend/v1/dev/vm-1/cmd", "start"},
      {"vend/v1/dev/vm-1", "kind"},
      {"vend/v1/dev/", "kind"},
      {"vend/v1/dev//cmd", "device id"},
      {"vend/v1/dev/+/evt", "device id"},
      {"vend/v1/dev/#", "kind"},
      {"vend/v1/dev/vm#1/evt", "device id"},
      {"vend/v1/dev/vm 1/evt", "device id"},
      {"vend/v1/dev/vm-1/cmd/", "kind"},
      {"vend/v1/dev/vm-1/cmd/x", "kind"},
      {"vend/v1/dev/vm-1/events", "kind"},
      {"vend/v1/dev/vm-1/", "kind"},
      {"vend/v1/dev/vm-1/#", "kind"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.topic);
    auto parsed = parse_device_topic(c.topic);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().code == "bad_topic");
    CHECK(parsed.error().message.find(c.needle) != std::string::npos);
  }
  auto long_id = parse_device_topic("vend/v1/dev/" + std::string(65, 'x') + "/cmd");
  REQUIRE_FALSE(long_id.ok());
  CHECK(long_id.error().message.find("device id") != std::string::npos);
}

}  // namespace
}  // namespace vend::topics
