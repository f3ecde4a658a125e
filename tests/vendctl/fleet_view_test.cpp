// The watch model and its rendering: encoded ops messages folded into a
// FleetView, the frame asserted as text; and the tables of HTTP answers.
#include "vend/ctl/fleet_view.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "test_support.hpp"
#include "vend/ctl/render.hpp"
#include "vend/ops.hpp"
#include "vend/topics.hpp"

namespace vend::ctl {
namespace {

using nlohmann::json;

constexpr int64_t kNow = 1700000010000;  // 2023-11-14 22:13:30 UTC

ops::DeviceStatus device(const std::string& id, bool online, int64_t pool) {
  ops::DeviceStatus d;
  d.device = id;
  d.online = online;
  d.last_seen_ms = kNow - 4000;
  d.snapshot_at_ms = kNow - 60000;
  d.outbox_depth = 2;
  d.last_verdict = "ok";
  d.slots = {{1, "cola", 150, 10, pool, 1, 2, 5, 0, 9, 9}};
  d.ts_ms = kNow;
  return d;
}

// One order event as the agent publishes it (a batch of one).
std::string encoded(const ops::OrderEvent& e) { return ops::encode(ops::OrderEvents{{e}}); }

ops::OrderEvent order(const std::string& id, const std::string& from, const std::string& to,
                      int64_t ts_ms) {
  return {id, "vm-1", 1, from, to, 150, to == "FAILED" ? "jam" : "", ts_ms};
}

ops::Alert alert(const std::string& code, const std::string& state) {
  return {code, "warning", state, "vm-2", 1, "9 items counted, 8 tokens", kNow - 3000};
}

void feed(FleetView& view, const std::string& topic, const std::string& payload) {
  Status s = view.apply(topic, payload);
  REQUIRE_MESSAGE(s.ok(), vend::test::error_text(s));
}

FleetView sample_view() {
  FleetView view;
  ops::FleetSummary f{kNow, 2, 1, 11, {{"DISPATCHED", 2}, {"COMPLETED", 5}}, 7, 1, true, ""};
  feed(view, topics::ops_fleet(), ops::encode(f));
  feed(view, topics::ops_device("vm-2"), ops::encode(device("vm-2", false, 0)));
  feed(view, topics::ops_device("vm-1"), ops::encode(device("vm-1", true, 11)));
  feed(view, topics::ops_orders(), encoded(order("ord-1", "", "RESERVED", kNow - 9000)));
  feed(view, topics::ops_orders(), encoded(order("ord-1", "PAID", "DISPATCHED", kNow - 8000)));
  feed(view, topics::ops_alerts(), ops::encode(alert("physical_mismatch", "raised")));
  feed(view, topics::ops_alerts(), ops::encode(alert("seq_gap", "raised")));
  feed(view, topics::ops_alerts(), ops::encode(alert("seq_gap", "cleared")));
  return view;
}

TEST_CASE("a frame of the fleet: summary, devices, recent orders, active alerts") {
  FleetView view = sample_view();
  const std::string expected =
      "vend fleet at 2023-11-14 22:13:30 UTC (8 ops messages)\n"
      "devices 1/2 online | stock 11 | orders DISPATCHED 2, COMPLETED 5 (7 since start) | "
      "alerts 1 | storage ok\n"
      "\n"
      "DEVICE  ONLINE  SEEN  STOCK  RESV/DISP  OUTBOX  RECONCILE\n"
      "vm-1    yes     4s    11     1/2        2       ok\n"
      "vm-2    NO      4s    0      1/2        2       ok\n"
      "\n"
      "RECENT ORDERS\n"
      "TIME      ORDER  DEVICE  SLOT  TRANSITION          PRICE  REASON\n"
      "22:13:22  ord-1  vm-1    1     PAID -> DISPATCHED  1.50\n"
      "22:13:21  ord-1  vm-1    1     new -> RESERVED     1.50\n"
      "\n"
      "ACTIVE ALERTS\n"
      "SINCE     SEVERITY  CODE               DEVICE  SLOT  MESSAGE\n"
      "22:13:27  warning   physical_mismatch  vm-2    1     9 items counted, 8 tokens\n";
  CHECK(render_frame(view, kNow, FrameOptions{}) == expected);
  // A terminal gets "home + clear" first; a pipe never gets escape codes.
  CHECK(render_frame(view, kNow, FrameOptions{true, 0, ""}).rfind("\x1b[H\x1b[2J", 0) == 0);
  CHECK(render_frame(view, kNow, FrameOptions{}).find('\x1b') == std::string::npos);
  // Rows beyond the terminal are summarised.
  std::string short_frame = render_frame(view, kNow, FrameOptions{false, 1, "broker lost"});
  CHECK(short_frame.find("... 1 more\n") != std::string::npos);
  CHECK(short_frame.find("!! broker lost\n") != std::string::npos);
}

TEST_CASE("the view keeps 10 recent orders, forgets deleted retained topics, counts rejects") {
  FleetView view = sample_view();
  for (int i = 0; i < 12; ++i) {
    feed(view, topics::ops_orders(),
         encoded(order("ord-x" + std::to_string(i), "", "RESERVED", kNow + i)));
  }
  REQUIRE(view.recent_orders().size() == FleetView::kRecentOrders);
  CHECK(view.recent_orders().front().order_id == "ord-x11");
  CHECK(view.recent_orders().back().order_id == "ord-x2");

  feed(view, topics::ops_device("vm-2"), "");  // retained message deleted
  CHECK(view.devices().count("vm-2") == 0);
  CHECK(view.devices().count("vm-1") == 1);
  feed(view, "vend/v1/ops/something_new", "{}");  // a newer agent's topic: ignored
  feed(view, "vend/v1/dev/vm-1/status", "{}");    // not an ops topic: ignored

  Status bad = view.apply(topics::ops_device("vm-1"), R"({"v":1,"device":"vm-1"})");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "missing_field");
  CHECK(view.rejected() == 1);
  CHECK(view.devices().at("vm-1").slots.size() == 1);  // the last good status stays
  CHECK(render_frame(view, kNow, FrameOptions{})
            .find("1 message(s) rejected; last: "
                  "vend/v1/ops/devices/vm-1: missing_field") != std::string::npos);

  ops::ReconcileReport report;
  report.id = "rec-1";
  report.device = "vm-1";
  report.verdict = "ok";
  feed(view, topics::ops_reconcile("vm-1"), ops::encode(report));
  CHECK(view.reports().at("vm-1").id == "rec-1");
}

TEST_CASE("payload text cannot drive the terminal; UTF-8 columns stay aligned") {
  FleetView view;
  ops::Alert evil = alert("jam", "raised");
  evil.message =
      "motor\x1b[2J stalled\xc2\x9b"
      "31m\nagain";
  feed(view, topics::ops_alerts(), ops::encode(evil));
  ops::OrderEvent e = order("ord-1", "", "RESERVED", kNow);
  e.device = "vm-1";
  feed(view, topics::ops_orders(), encoded(e));
  const std::string frame = render_frame(view, kNow, FrameOptions{});
  CHECK(frame.find('\x1b') == std::string::npos);
  CHECK(frame.find("\xc2\x9b") == std::string::npos);
  CHECK(frame.find("motor?[2J stalled?31m?again") != std::string::npos);

  json devices = json::parse(R"({"devices":[{"boot_id":"","id":"vm-1","last_processed_seq":0,
      "last_seen_ms":0,"online":false}]})");
  devices["devices"][0]["boot_id"] = "caf\u00e9";  // 5 bytes, 4 columns
  devices["devices"].push_back(devices["devices"][0]);
  devices["devices"][1]["boot_id"] = "x";
  devices["devices"][1]["id"] = "vm-2";
  CHECK(render_devices(devices, kNow).value() ==
        "DEVICE  ONLINE  SEEN   LAST SEQ  BOOT\n"
        "vm-1    NO      never  0         caf\u00e9\n"
        "vm-2    NO      never  0         x\n");
}

TEST_CASE("an empty view says what is missing") {
  FleetView view;
  std::string frame = render_frame(view, kNow, FrameOptions{});
  CHECK(frame.find("fleet: no summary yet") != std::string::npos);
  CHECK(frame.find("no device status yet") != std::string::npos);
  CHECK(frame.find("RECENT ORDERS: none") != std::string::npos);
  CHECK(frame.find("ACTIVE ALERTS: none") != std::string::npos);
}

TEST_CASE("tables of the agent's answers") {
  json devices = json::parse(R"({"devices":[{"boot_id":"","id":"vm-1","last_processed_seq":0,
      "last_seen_ms":0,"online":false},{"boot_id":"ab12","id":"vm-2","last_processed_seq":41,
      "last_seen_ms":1700000007000,"online":true}]})");
  CHECK(render_devices(devices, kNow).value() ==
        "DEVICE  ONLINE  SEEN    LAST SEQ  BOOT\n"
        "vm-1    NO      never   0         -\n"
        "vm-2    yes     3s ago  41        ab12\n");
  json orders = json::parse(R"({"orders":[{"id":"o1","device":"vm-1","slot":2,"state":"FAILED",
      "price_cents":1205,"created_ms":1700000000000,"updated_ms":1700000001000,
      "reserve_deadline_ms":1700000300000,"reason":"jam"}]})");
  CHECK(render_orders(orders).value() ==
        "ORDER  STATE   DEVICE  SLOT  PRICE  UPDATED              REASON\n"
        "o1     FAILED  vm-1    2     12.05  2023-11-14 22:13:21  jam\n");
  std::string key(64, 'a');
  std::string provisioned = render_provisioned(json{{"id", "vm-1"}, {"key", key}}).value();
  CHECK(provisioned.find("device key: " + key + "\n") != std::string::npos);
  CHECK(provisioned.find("WARNING") != std::string::npos);
  CHECK(render_restock(json{{"restock_id", "rst-1"}}, "vm-1", 2, 5)
            .value()
            .find("restock rst-1 sent to vm-1: slot 2, 5 item(s)") == 0);

  auto wrong = render_devices(json{{"items", json::array()}}, kNow);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().code == "bad_answer");
}

TEST_CASE("reconcile report table and agent errors") {
  ops::ReconcileReport r;
  r.id = "rec-7";
  r.device = "vm-1";
  r.ts_ms = kNow;
  r.trigger = "on_demand";
  r.request_id = "rq-1";
  r.snapshot_seq = 12;
  r.full = true;
  r.verdict = "repaired";
  r.slots = {{1, 4, 0, 0, 4, 4, true, "match", {}, 0, 0},
             {2, 3, 0, 0, 2, 2, false, "repaired", {"pool 3 -> 2"}, 0, 1}};
  CHECK(render_reconcile(r) ==
        "reconcile rec-7 of vm-1 at 2023-11-14 22:13:30 UTC: repaired (trigger on_demand, "
        "snapshot seq 12, full)\n"
        "SLOT  VERDICT   POOL  RESV  DISP  PHYSICAL  DEV TOKENS  DIGEST   ACTIONS\n"
        "1     match     4     0     0     4         4           match    -\n"
        "2     repaired  3     0     0     2         2           DIFFERS  pool 3 -> 2; "
        "tokens +0/-1\n");

  Error e = api_error(409, R"({"error":{"code":"device_offline","message":"vm-1 is offline"}})");
  CHECK(e.code == "device_offline");
  CHECK(e.message == "vm-1 is offline");
  Error proxy = api_error(502, "<html>Bad Gateway</html>\n");
  CHECK(proxy.code == "http_502");
  CHECK(proxy.message == "<html>Bad Gateway</html> ");
}

TEST_CASE("several agents: the summaries add up, and each machine shows its agent") {
  FleetView view;
  ops::FleetSummary a{kNow, 2, 2, 10, {{"COMPLETED", 3}}, 3, 0, true, "a"};
  ops::FleetSummary b{kNow - 500, 1, 0, 4, {{"COMPLETED", 1}, {"RESERVED", 1}}, 2, 1, true, "b"};
  feed(view, topics::ops_fleet_of("a"), ops::encode(a));
  feed(view, topics::ops_fleet_of("b"), ops::encode(b));
  ops::DeviceStatus d1 = device("vm-1", true, 10);
  d1.owner = "a";
  ops::DeviceStatus d2 = device("vm-2", false, 4);
  d2.owner = "b";
  feed(view, topics::ops_device("vm-1"), ops::encode(d1));
  feed(view, topics::ops_device("vm-2"), ops::encode(d2));
  REQUIRE(view.fleet());
  CHECK(view.fleet()->devices == 3);
  CHECK(view.fleet()->online == 2);
  CHECK(view.fleet()->stock_total == 14);
  CHECK(view.fleet()->orders_by_state.at("COMPLETED") == 4);
  CHECK(view.fleet()->alerts_active == 1);
  std::string frame = render_frame(view, kNow, FrameOptions{});
  CHECK_MESSAGE(frame.find("agents a 2 devices, b 1 devices\n") != std::string::npos, frame);
  CHECK_MESSAGE(frame.find("RECONCILE  AGENT\n") != std::string::npos, frame);
  CHECK_MESSAGE(frame.find("ok         a\n") != std::string::npos, frame);
  // An instance that left deletes its retained summary.
  feed(view, topics::ops_fleet_of("b"), "");
  CHECK(view.fleet()->devices == 2);
}

}  // namespace
}  // namespace vend::ctl
