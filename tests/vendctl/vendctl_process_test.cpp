// The built `vendctl` binary against real servers: `watch --once` on a real
// mosquitto fed by a PahoTransport, and provision / devices / restock /
// orders against the real vend-agent (docs/operations.md).
#include <doctest/doctest.h>
#include <httplib.h>

#include <chrono>
#include <string>
#include <vector>

#include "ctl_rig.hpp"
#include "test_support.hpp"
#include "vend/log.hpp"
#include "vend/ops.hpp"
#include "vend/paho_transport.hpp"
#include "vend/topics.hpp"

namespace vend::ctl {
namespace {

using namespace std::chrono_literals;
using namespace testing;  // NOLINT: the rig is the test's vocabulary

// ---- watch --once on a real broker -----------------------------------------

class Publisher {
 public:
  explicit Publisher(const test::MosquittoServer& broker) : mqtt_(options(broker), log_) {
    REQUIRE(mqtt_.connect().ok());
  }
  void publish(const std::string& topic, const std::string& payload, bool retained) {
    REQUIRE(mqtt_.publish(Message{topic, payload, 1, retained}).ok());
  }
  // True once the broker acknowledged everything published.
  bool flushed() {
    return eventually([&] { return mqtt_.inflight() == 0; }, 5s);
  }

 private:
  static PahoOptions options(const test::MosquittoServer& broker) {
    PahoOptions o;
    o.server_uri = broker.url();
    o.client_id = "ops-publisher";
    return o;
  }
  MemoryLogger log_;
  PahoTransport mqtt_;
};

ops::DeviceStatus device_status(const std::string& id, bool online, int64_t pool, int64_t ts) {
  ops::DeviceStatus d;
  d.device = id;
  d.online = online;
  d.last_seen_ms = ts;
  d.snapshot_at_ms = ts;
  d.outbox_depth = 3;
  d.last_verdict = online ? "ok" : "alert";
  d.slots = {{1, "cola", 150, 10, pool, 0, 1, 4, 0, 8, 8}};
  d.ts_ms = ts;
  return d;
}

TEST_CASE("vendctl watch --once shows retained fleet and devices and live order events") {
  test::TempDir dir;
  test::MosquittoServer broker;
  Publisher pub(broker);
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  ops::FleetSummary fleet{now, 2, 1, 7, {{"COMPLETED", 4}, {"DISPATCHED", 1}}, 5, 0, true, ""};
  pub.publish(topics::ops_fleet(), ops::encode(fleet), true);
  pub.publish(topics::ops_device("vm-w1"), ops::encode(device_status("vm-w1", true, 7, now)), true);
  pub.publish(topics::ops_device("vm-w2"), ops::encode(device_status("vm-w2", false, 0, now)),
              true);
  REQUIRE(pub.flushed());

  // Collect for 4 s; the order events are published once it has subscribed.
  const std::string log = dir.file("watch.out");
  test::Child watch({test::binary_path("vendctl/vendctl"), "watch", "--once", "--for", "4",
                     "--mqtt", broker.url()},
                    log);
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        return test::read_file(log).find("vendctl: watching vend/v1/ops/#") !=
                               std::string::npos;
                      },
                      10s),
                  test::read_file(log));
  pub.publish(
      topics::ops_orders(),
      ops::encode(ops::OrderEvents{{{"ord-w1", "vm-w1", 1, "", "RESERVED", 150, "", now},
                                    {"ord-w1", "vm-w1", 1, "RESERVED", "PAID", 150, "", now}}}),
      false);
  pub.publish(topics::ops_alerts(),
              ops::encode(ops::Alert{"seq_gap", "critical", "raised", "vm-w2", 0,
                                     "events 4..6 missing", now}),
              false);
  REQUIRE(watch.wait(15s) == 0);
  const std::string out = test::read_file(log);
  INFO(out);
  CHECK(out.find('\x1b') == std::string::npos);  // not a terminal: no ANSI codes
  CHECK(out.find("devices 1/2 online | stock 7 | orders DISPATCHED 1, COMPLETED 4 (5 since "
                 "start) | alerts 0 | storage ok") != std::string::npos);
  // The SEEN column is an age that depends on timing: "*" matches any word.
  CHECK(has_row(out, {"vm-w1", "yes", "*", "7", "0/1", "3", "ok"}));
  CHECK(has_row(out, {"vm-w2", "NO", "*", "0", "0/1", "3", "alert"}));
  CHECK(out.find("ord-w1  vm-w1   1     RESERVED -> PAID  1.50") != std::string::npos);
  CHECK(out.find("ord-w1  vm-w1   1     new -> RESERVED   1.50") != std::string::npos);
  CHECK(out.find("critical  seq_gap  vm-w2   -     events 4..6 missing") != std::string::npos);
  // The newer order event comes first.
  CHECK(out.find("RESERVED -> PAID") < out.find("new -> RESERVED"));

  Run down = vendctl(
      dir, {"watch", "--once", "--mqtt", "tcp://127.0.0.1:" + std::to_string(test::free_port())});
  CHECK_MESSAGE(down.code == 3, down.output);
  CHECK(has(down, "vendctl: unreachable: cannot connect to MQTT broker tcp://127.0.0.1:"));
}

// ---- HTTP commands against the real vend-agent ------------------------------

TEST_CASE("vendctl provision, devices, restock and orders against the real vend-agent") {
  test::TempDir dir;
  RealAgent agent(dir);
  REQUIRE_MESSAGE(agent.started(), agent.log());
  const std::string api = agent.api();
  auto ctl = [&](const std::vector<std::string>& args) { return agent.ctl(args); };
  auto agent_log = [&] { return agent.log(); };
  const int http_port = agent.http_port();

  Run provision =
      ctl({"provision", "vm-ctl-1", "--slot", "1:cola:150:10", "--slot", "2:sparkling water:90:8"});
  REQUIRE_MESSAGE(provision.code == 0, provision.output);
  const size_t key_at = provision.output.find("device key: ");
  REQUIRE(key_at != std::string::npos);
  CHECK(provision.output.substr(key_at + 12, 65).find_first_not_of("0123456789abcdef") == 64);
  CHECK(has(provision, "WARNING: the key is shown only this once"));

  Run again = ctl({"provision", "vm-ctl-1", "--slot", "1:cola:150:10"});
  CHECK(again.code == 1);
  CHECK(has(again, "vendctl: conflict: "));

  Run devices = ctl({"devices"});
  REQUIRE_MESSAGE(devices.code == 0, devices.output);
  CHECK(has(devices, "DEVICE    ONLINE  SEEN   LAST SEQ  BOOT\nvm-ctl-1  NO      never  0"));

  // The agent's MQTT session is up once /healthz says so; a restock needs it.
  httplib::Client health("127.0.0.1", http_port);
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        auto r = health.Get("/healthz");
                        return r && r->body.find("\"mqtt_connected\":true") != std::string::npos;
                      },
                      10s),
                  agent_log());
  Run restock = ctl({"restock", "vm-ctl-1", "2", "5"});
  REQUIRE_MESSAGE(restock.code == 0, restock.output);
  CHECK(has(restock, "sent to vm-ctl-1: slot 2, 5 item(s)"));
  Run unknown_slot = ctl({"restock", "vm-ctl-1", "9", "1"});
  CHECK(unknown_slot.code == 1);
  CHECK(has(unknown_slot, "vendctl: unknown_slot: vm-ctl-1 has no slot 9"));

  // The device never came online: the agent refuses to reconcile it.
  Run offline = ctl({"reconcile", "vm-ctl-1", "--wait", "1"});
  CHECK(offline.code == 1);
  CHECK(has(offline, "vendctl: device_offline: "));

  Run orders = ctl({"orders", "--state", "PAID", "--limit", "5"});
  REQUIRE_MESSAGE(orders.code == 0, orders.output);
  CHECK(orders.output == "no orders\n");
  Run orders_json = ctl({"orders", "--json"});
  CHECK(orders_json.output == "{\"orders\":[]}\n");

  Run no_token = vendctl(dir, {"devices", "--api", api});
  CHECK(no_token.code == 1);
  CHECK(has(no_token, "vendctl: unauthorized: "));
  Run refused =
      vendctl(dir, {"devices", "--api", "http://127.0.0.1:" + std::to_string(test::free_port())});
  CHECK(refused.code == 3);
  CHECK(has(refused, "vendctl: unreachable: cannot reach http://127.0.0.1:"));
  CHECK(has(refused, "/v1/devices: connection refused"));
}

}  // namespace
}  // namespace vend::ctl
