// Operator messages (vend/ops.hpp): one golden JSON example per message,
// encoded byte for byte and decoded back (docs/asyncapi.yaml shows the same
// examples), and a table of rejected payloads, each with the error code and
// the field its message must name.
#include "vend/ops.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace vend::ops {
namespace {

using nlohmann::json;

// ---- The examples ---------------------------------------------------------

FleetSummary fleet() {
  return {1700000005000, 20, 19,   412, {{"COMPLETED", 230}, {"DISPATCHED", 2}, {"RESERVED", 5}},
          241,           1,  true, ""};
}

DeviceStatus device() {
  DeviceStatus d;
  d.device = "vm-0042";
  d.online = true;
  d.boot_id = "fedcba9876543210fedcba9876543210";
  d.last_seen_ms = 1700000004000;
  d.last_seq = 46;
  d.unacked_events = 1;
  d.outbox_depth = 0;
  d.snapshot_at_ms = 1700000001234;
  d.last_verdict = "ok";
  d.slots = {{3, "cola", 150, 10, 7, 1, 1, 12, 0, 9, 9},
             {12, "water", 90, 8, 0, 0, 0, 3, 1, -1, -1}};
  d.ts_ms = 1700000005000;
  return d;
}

OrderEvents order_events() {
  return {{{"ord-7f3a", "vm-0042", 12, "", "RESERVED", 150, "", 1700000001000},
           {"ord-7f3a", "vm-0042", 12, "PAID", "DISPATCHED", 150, "", 1700000002000}}};
}

Alert alert() {
  return {"physical_mismatch", "warning", "raised",
          "vm-0042",           3,         "slot 3: 9 items counted, 8 tokens expected",
          1700000003000};
}

ReconcileReport reconcile() {
  ReconcileReport r;
  r.id = "rec-0001";
  r.device = "vm-0042";
  r.ts_ms = 1700000003000;
  r.trigger = "on_demand";
  r.request_id = "snap-0001";
  r.snapshot_seq = 44;
  r.full = true;
  r.verdict = "repaired";
  r.slots = {{3, 7, 1, 0, 8, 8, true, "match", {}, 0, 0},
             {12, 1, 0, 0, 0, 0, false, "repaired", {"token lost", "pool 1 -> 0"}, 0, 1}};
  return r;
}

// The golden wire forms: sorted keys, no whitespace.
constexpr const char* kFleetJson =
    R"({"alerts_active":1,"devices":20,"online":19,"orders_by_state":{"COMPLETED":230,)"
    R"("DISPATCHED":2,"RESERVED":5},"orders_total":241,"stock_total":412,)"
    R"("storage_ok":true,"ts_ms":1700000005000,"v":1})";
constexpr const char* kDeviceJson =
    R"({"boot_id":"fedcba9876543210fedcba9876543210","device":"vm-0042",)"
    R"("last_seen_ms":1700000004000,"last_seq":46,"last_verdict":"ok","online":true,)"
    R"("outbox_depth":0,"slots":[{"burned":0,"capacity":10,"device_tokens":9,"dispatched":1,)"
    R"("physical_count":9,"pool":7,"price_cents":150,"product":"cola","reserved":1,"slot":3,)"
    R"("sold":12},{"burned":1,"capacity":8,"device_tokens":-1,"dispatched":0,)"
    R"("physical_count":-1,"pool":0,"price_cents":90,"product":"water","reserved":0,"slot":12,)"
    R"("sold":3}],"snapshot_at_ms":1700000001234,"ts_ms":1700000005000,"unacked_events":1,"v":1})";
constexpr const char* kOrderJson =
    R"({"events":[{"device":"vm-0042","from_state":"","order_id":"ord-7f3a","price_cents":150,)"
    R"("reason":"","slot":12,"to_state":"RESERVED","ts_ms":1700000001000},)"
    R"({"device":"vm-0042","from_state":"PAID","order_id":"ord-7f3a","price_cents":150,)"
    R"("reason":"","slot":12,"to_state":"DISPATCHED","ts_ms":1700000002000}],"v":1})";
constexpr const char* kAlertJson =
    R"({"code":"physical_mismatch","device":"vm-0042",)"
    R"("message":"slot 3: 9 items counted, 8 tokens expected","severity":"warning","slot":3,)"
    R"("state":"raised","ts_ms":1700000003000,"v":1})";
constexpr const char* kReconcileJson =
    R"({"device":"vm-0042","full":true,"id":"rec-0001","request_id":"snap-0001",)"
    R"("slots":[{"actions":[],"device_tokens":8,"digest_match":true,"dispatched":0,)"
    R"("physical_count":8,"pool":7,"reserved":1,"slot":3,"tokens_added":0,)"
    R"("tokens_removed":0,"verdict":"match"},{"actions":["token lost","pool 1 -> 0"],)"
    R"("device_tokens":0,"digest_match":false,"dispatched":0,"physical_count":0,"pool":1,)"
    R"("reserved":0,"slot":12,"tokens_added":0,"tokens_removed":1,)"
    R"("verdict":"repaired"}],"snapshot_seq":44,"trigger":"on_demand",)"
    R"("ts_ms":1700000003000,"v":1,"verdict":"repaired"})";

TEST_CASE("ops messages encode to their golden JSON and decode back") {
  CHECK(encode(fleet()) == kFleetJson);
  CHECK(encode(device()) == kDeviceJson);
  CHECK(encode(order_events()) == kOrderJson);
  CHECK(encode(alert()) == kAlertJson);
  CHECK(encode(reconcile()) == kReconcileJson);

  auto f = decode_fleet(kFleetJson);
  REQUIRE_MESSAGE(f.ok(), vend::test::error_text(f));
  CHECK(*f == fleet());
  auto d = decode_device(kDeviceJson);
  REQUIRE_MESSAGE(d.ok(), vend::test::error_text(d));
  CHECK(*d == device());
  auto o = decode_order_events(kOrderJson);
  REQUIRE_MESSAGE(o.ok(), vend::test::error_text(o));
  CHECK(*o == order_events());
  auto a = decode_alert(kAlertJson);
  REQUIRE_MESSAGE(a.ok(), vend::test::error_text(a));
  CHECK(*a == alert());
  auto r = decode_reconcile(kReconcileJson);
  REQUIRE_MESSAGE(r.ok(), vend::test::error_text(r));
  CHECK(*r == reconcile());
}

TEST_CASE("a device status carries clock_skew_ms once measured, either sign") {
  for (int64_t skew : {int64_t{-4000}, int64_t{0}, int64_t{2500}}) {
    DeviceStatus d = device();
    d.clock_skew_ms = skew;
    std::string text = encode(d);
    CHECK(text.find("\"clock_skew_ms\":" + std::to_string(skew)) != std::string::npos);
    auto back = decode_device(text);
    REQUIRE_MESSAGE(back.ok(), vend::test::error_text(back));
    CHECK(*back == d);
  }
  CHECK(encode(device()).find("clock_skew_ms") == std::string::npos);  // absent when unknown
  json j = json::parse(kDeviceJson);
  j["clock_skew_ms"] = "2500";
  CHECK(decode_device(j.dump()).error().code == "wrong_type");
}

// The hot messages are written without a JSON tree: their bytes must be
// what nlohmann's dump() (sorted keys, invalid UTF-8 replaced) gives for
// the same fields, for every string an outsider could put in them.
TEST_CASE(
    "direct-written order events, device statuses and reconcile reports match the tree encoding") {
  auto tree = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
  const std::vector<std::string> strings = {
      "", "plain", "quote\"s", "back\\slash", "tab\tnew\nline\r", std::string("nul\0x", 5),
      "\x01\x1f\x7f", "caf\xc3\xa9 \xe2\x82\xac", "bad \xff\xfe utf8", "cut \xe2\x82",
      // Around the writer's buffers (a member's value up to 120 bytes,
      // append_string's 128):
      std::string(119, 'f'), std::string(120, 'g'), std::string(121, 'h'),
      std::string(119, 'i') + "\"", std::string(126, 'a'), std::string(127, 'b'),
      std::string(125, 'c') + "\"", std::string(300, 'd'), std::string(300, 'e') + "\xff"};
  for (const auto& text : strings) {
    CAPTURE(text);
    OrderEvents events{{{text, "vm-1", 3, "", "RESERVED", 150, text, 1700000001000},
                        {"ord-2", text, -1, "PAID", text, -7, "", -5}}};
    json expected_events = {{"v", 1}, {"events", json::array()}};
    for (const auto& e : events.events) {
      expected_events["events"].push_back({{"order_id", e.order_id},
                                           {"device", e.device},
                                           {"slot", e.slot},
                                           {"from_state", e.from_state},
                                           {"to_state", e.to_state},
                                           {"price_cents", e.price_cents},
                                           {"reason", e.reason},
                                           {"ts_ms", e.ts_ms}});
    }
    CHECK(encode(events) == tree(expected_events));

    DeviceStatus d = device();
    d.device = d.boot_id = d.last_verdict = d.slots[0].product = d.owner = text;
    d.clock_skew_ms = -12;
    d.last_seq = UINT64_MAX;
    json expected = {{"v", 1},
                     {"device", d.device},
                     {"online", d.online},
                     {"boot_id", d.boot_id},
                     {"last_seen_ms", d.last_seen_ms},
                     {"last_seq", d.last_seq},
                     {"unacked_events", d.unacked_events},
                     {"outbox_depth", d.outbox_depth},
                     {"snapshot_at_ms", d.snapshot_at_ms},
                     {"last_verdict", d.last_verdict},
                     {"slots", json::array()},
                     {"ts_ms", d.ts_ms},
                     {"clock_skew_ms", *d.clock_skew_ms}};
    if (!d.owner.empty()) expected["owner"] = d.owner;
    for (const auto& s : d.slots) {
      expected["slots"].push_back({{"slot", s.slot},
                                   {"product", s.product},
                                   {"price_cents", s.price_cents},
                                   {"capacity", s.capacity},
                                   {"pool", s.pool},
                                   {"reserved", s.reserved},
                                   {"dispatched", s.dispatched},
                                   {"sold", s.sold},
                                   {"burned", s.burned},
                                   {"physical_count", s.physical_count},
                                   {"device_tokens", s.device_tokens}});
    }
    CHECK(encode(d) == tree(expected));

    ReconcileReport r = reconcile();
    r.id = r.device = r.trigger = r.request_id = r.verdict = r.slots[1].verdict = text;
    r.slots[0].actions = {text, "", text};
    r.snapshot_seq = UINT64_MAX;
    r.ts_ms = -3;
    json expected_report = {{"v", 1},
                            {"id", r.id},
                            {"device", r.device},
                            {"ts_ms", r.ts_ms},
                            {"trigger", r.trigger},
                            {"request_id", r.request_id},
                            {"snapshot_seq", r.snapshot_seq},
                            {"full", r.full},
                            {"verdict", r.verdict},
                            {"slots", json::array()}};
    for (const auto& s : r.slots) {
      expected_report["slots"].push_back({{"slot", s.slot},
                                          {"pool", s.pool},
                                          {"reserved", s.reserved},
                                          {"dispatched", s.dispatched},
                                          {"physical_count", s.physical_count},
                                          {"device_tokens", s.device_tokens},
                                          {"digest_match", s.digest_match},
                                          {"verdict", s.verdict},
                                          {"actions", s.actions},
                                          {"tokens_added", s.tokens_added},
                                          {"tokens_removed", s.tokens_removed}});
    }
    CHECK(encode(r) == tree(expected_report));
  }
  ReconcileReport no_slots = reconcile();
  no_slots.slots.clear();
  CHECK(encode(no_slots) == tree(json::parse(encode(no_slots))));
}

TEST_CASE("ops decoding ignores unknown fields and accepts any key order and whitespace") {
  json j = json::parse(kDeviceJson);
  j["added_by_a_newer_agent"] = {{"x", 1}};
  j["slots"][0]["temperature_c"] = 4;
  auto d = decode_device(j.dump(2));
  REQUIRE_MESSAGE(d.ok(), vend::test::error_text(d));
  CHECK(*d == device());

  Alert fleet_wide = alert();
  fleet_wide.device = "";
  fleet_wide.slot = 0;
  auto a = decode_alert(encode(fleet_wide));
  REQUIRE(a.ok());
  CHECK(*a == fleet_wide);
}

// ---- Rejections -------------------------------------------------------------

enum class Kind { kFleet, kDevice, kOrder, kAlert, kReconcile };

struct Case {
  std::string what;
  Kind kind;
  std::string payload;
  std::string code;
  std::string needle;  // must appear in the error message
};

template <typename T>
std::optional<Error> error_of(const Result<T>& r) {
  return r.ok() ? std::nullopt : std::optional<Error>(r.error());
}

std::optional<Error> decode_error(Kind kind, std::string_view payload) {
  switch (kind) {
    case Kind::kFleet: return error_of(decode_fleet(payload));
    case Kind::kDevice: return error_of(decode_device(payload));
    case Kind::kOrder: return error_of(decode_order_events(payload));
    case Kind::kAlert: return error_of(decode_alert(payload));
    case Kind::kReconcile: return error_of(decode_reconcile(payload));
  }
  return std::nullopt;
}

std::string edit(const char* payload, const std::function<void(json&)>& change) {
  json j = json::parse(payload);
  change(j);
  return j.dump();
}
std::string with(const char* payload, const std::string& key, json value) {
  return edit(payload, [&](json& j) { j[key] = std::move(value); });
}
std::string without(const char* payload, const std::string& key) {
  return edit(payload, [&](json& j) { j.erase(key); });
}

std::vector<Case> cases() {
  using K = Kind;
  return {
      {"not JSON", K::kFleet, "fleet: 20 devices", "bad_json", "invalid JSON"},
      {"truncated", K::kOrder, std::string(kOrderJson).substr(0, 40), "bad_json", "invalid JSON"},
      {"an array", K::kAlert, "[1,2]", "bad_json", "not a JSON object"},
      {"duplicate key", K::kOrder, R"({"v":1,"v":1})", "bad_json", "duplicate key 'v'"},
      {"no v", K::kFleet, without(kFleetJson, "v"), "missing_field", "'v'"},
      {"v 2", K::kDevice, with(kDeviceJson, "v", 2), "bad_version", "only 1"},
      {"v as text", K::kAlert, with(kAlertJson, "v", "1"), "wrong_type", "'v'"},
      {"missing online", K::kFleet, without(kFleetJson, "online"), "missing_field",
       "'online' in fleet summary"},
      {"missing orders_by_state", K::kFleet, without(kFleetJson, "orders_by_state"),
       "missing_field", "'orders_by_state'"},
      {"orders_by_state a list", K::kFleet, with(kFleetJson, "orders_by_state", json::array()),
       "wrong_type", "'orders_by_state'"},
      {"a count as text", K::kFleet,
       edit(kFleetJson, [](json& j) { j["orders_by_state"]["PAID"] = "3"; }), "wrong_type",
       "'orders_by_state.PAID'"},
      {"storage_ok as 1", K::kFleet, with(kFleetJson, "storage_ok", 1), "wrong_type",
       "'storage_ok'"},
      {"online as text", K::kDevice, with(kDeviceJson, "online", "yes"), "wrong_type",
       "'online' in device status"},
      {"bad device id", K::kDevice, with(kDeviceJson, "device", "vm/1"), "out_of_range",
       "'device'"},
      {"slot entry missing pool", K::kDevice,
       edit(kDeviceJson, [](json& j) { j["slots"][1].erase("pool"); }), "missing_field",
       "'slots[1].pool'"},
      {"slot entry not an object", K::kDevice, with(kDeviceJson, "slots", json::array({3})),
       "wrong_type", "'slots[0]'"},
      {"negative last_seq", K::kDevice, with(kDeviceJson, "last_seq", -1), "out_of_range",
       "'last_seq'"},
      {"slot 0 in an order", K::kOrder,
       edit(kOrderJson, [](json& j) { j["events"][0]["slot"] = 0; }), "out_of_range",
       "'events[0].slot'"},
      {"price as float", K::kOrder,
       edit(kOrderJson, [](json& j) { j["events"][1]["price_cents"] = 1.5; }), "wrong_type",
       "'events[1].price_cents'"},
      {"missing to_state", K::kOrder,
       edit(kOrderJson, [](json& j) { j["events"][1].erase("to_state"); }), "missing_field",
       "'events[1].to_state'"},
      {"no events", K::kOrder, with(kOrderJson, "events", json::array()), "out_of_range",
       "'events'"},
      {"events not a list", K::kOrder, with(kOrderJson, "events", 1), "wrong_type", "'events'"},
      {"missing severity", K::kAlert, without(kAlertJson, "severity"), "missing_field",
       "'severity' in alert"},
      {"message too long", K::kAlert, with(kAlertJson, "message", std::string(513, 'x')),
       "out_of_range", "'message'"},
      {"actions with a number", K::kReconcile,
       edit(kReconcileJson, [](json& j) { j["slots"][1]["actions"][1] = 7; }), "wrong_type",
       "'slots[1].actions[1]'"},
      {"pool below 0", K::kReconcile,
       edit(kReconcileJson, [](json& j) { j["slots"][0]["pool"] = -1; }), "out_of_range",
       "'slots[0].pool'"},
      {"missing verdict", K::kReconcile, without(kReconcileJson, "verdict"), "missing_field",
       "'verdict' in reconcile report"},
      {"full as text", K::kReconcile, with(kReconcileJson, "full", "true"), "wrong_type", "'full'"},
  };
}

TEST_CASE("malformed ops messages are rejected naming the field") {
  for (const Case& c : cases()) {
    CAPTURE(c.what);
    CAPTURE(c.payload);
    auto error = decode_error(c.kind, c.payload);
    REQUIRE(error.has_value());
    CHECK(error->code == c.code);
    CHECK_MESSAGE(error->message.find(c.needle) != std::string::npos, error->message);
  }
}

}  // namespace
}  // namespace vend::ops
