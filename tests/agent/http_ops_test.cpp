// The console's endpoints through the real HttpApi (http_api_rig.hpp):
// GET /v1/ops/stream (operator token, the core's own ops events, the cap
// answered 503), GET /v1/fleet (summary counts, pages, filters, bad
// parameters) and GET /v1/ops/series (a sale in the current minute, its
// payment -> result latency, the machine's availability), and the console's
// per-device and per-order reads: GET /v1/devices/{id}, .../faults,
// /v1/orders?device=, /v1/orders/{id}/history and GET /v1/alerts.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "http_api_rig.hpp"
#include "sse_client.hpp"

namespace vend::agent {
namespace {

using test_sse::SseClient;

// Sends the machine's dispense result for `order_id` (DISPENSED).
void dispensed(Agent& agent, Machine& m, const std::string& order_id) {
  auto order = agent.core().get_order(order_id);
  REQUIRE(order.ok());
  proto::DeviceEvent e{kDevice, ++m.seq, m.boot_id, 1,
                       proto::DispenseResult{order_id, order->slot, order->token,
                                             proto::DispenseStatus::kDispensed, "", true}};
  std::string mac = crypto::sign(m.key, proto::encode_canonical(e));
  agent.core().on_message(Message{topics::device_evt(kDevice), proto::encode(e, mac), 1, false});
}

// Orders, pays and completes one sale; returns its id.
std::string sell_one(Agent& agent, Machine& m) {
  Json order = body_of(post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})"));
  std::string id = order["id"];
  std::string body = R"({"payment_id":"pay-)" + id + R"(","amount_cents":250})";
  auto paid = post_json(agent, "/v1/orders/" + id + "/payment", body, signed_for(id, body));
  REQUIRE(paid);
  REQUIRE_MESSAGE(paid->status == 200, paid->body);
  for (int i = 0; i < 200; ++i) {
    auto o = agent.core().get_order(id);
    if (o.ok() && o->state == OrderState::kDispatched) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  dispensed(agent, m, id);
  for (int i = 0; i < 200; ++i) {
    auto o = agent.core().get_order(id);
    if (o.ok() && o->state == OrderState::kCompleted) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FAIL("order " << id << " did not complete");
  return id;
}

// GET `path` (operator) every 10 ms, at most `tries` times, until `done`
// holds for its body; returns the last body (the caller checks it).
template <typename Done>
Json poll_json(Agent& agent, const std::string& path, Done done, int tries = 200) {
  Json body;
  for (int i = 0; i < tries; ++i) {
    body = body_of(agent.client().Get(path.c_str(), agent.operator_headers()));
    if (done(body)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return body;
}

TEST_CASE("GET /v1/ops/stream: operator token; the core's ops events; 503 beyond the cap") {
  Agent agent;
  SUBCASE("without the token, or with a wrong one: 401, no stream") {
    SseClient none(agent.port(), "/v1/ops/stream", "");
    REQUIRE(none.wait_for("\r\n\r\n"));
    CHECK(none.status() == 401);
    CHECK(none.text().find("text/event-stream") == std::string::npos);
    SseClient wrong(agent.port(), "/v1/ops/stream", "not-the-token");
    REQUIRE(wrong.wait_for("\r\n\r\n"));
    CHECK(wrong.status() == 401);
    CHECK(agent.hub().stats().subscribers == 0);
  }
  SUBCASE("with the token: the machine's status, the order events, then the fleet") {
    SseClient c(agent.port(), "/v1/ops/stream", kToken);
    REQUIRE(c.wait_for("event: hello"));
    CHECK(c.status() == 200);
    Machine m;
    stock_machine(agent, m);
    Json order = body_of(post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})"));
    std::string id = order["id"];
    REQUIRE(c.wait_for("event: device\ndata: {"));
    REQUIRE(c.wait_for("\"order_id\":\"" + id + "\""));
    REQUIRE(c.wait_for("event: fleet\ndata: {"));
    CHECK(c.text().find("\"to_state\":\"RESERVED\"") != std::string::npos);
  }
  SUBCASE("the stream beyond the cap is answered 503, counted in /metrics") {
    std::vector<std::unique_ptr<SseClient>> open;
    for (size_t i = 0; i < Agent::kMaxStreams; ++i) {
      open.push_back(std::make_unique<SseClient>(agent.port(), "/v1/ops/stream", kToken));
      REQUIRE(open.back()->wait_for("event: hello"));
    }
    SseClient more(agent.port(), "/v1/ops/stream", kToken);
    REQUIRE(more.wait_for("\r\n\r\n"));
    CHECK(more.status() == 503);
    CHECK(more.text().find("too many event streams open") != std::string::npos);
    auto metrics = agent.client().Get("/metrics");
    REQUIRE(metrics);
    CHECK(metrics->body.find("vend_ops_stream_refused_total 1") != std::string::npos);
    CHECK(metrics->body.find("vend_ops_stream_subscribers 3") != std::string::npos);
    CHECK(metrics->body.find("vend_http_open_streams 3") != std::string::npos);
  }
}

TEST_CASE("GET /v1/fleet: summary counts, one page of the table, server-side filters") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  for (const char* id : {"vm-a", "vm-b", "vm-c"}) {
    Json body = {
        {"id", id},
        {"slots", {{{"slot", 1}, {"product", "tea"}, {"price_cents", 100}, {"capacity", 5}}}}};
    auto r = agent.client().Post("/v1/devices", agent.operator_headers(), body.dump(),
                                 "application/json");
    REQUIRE(r);
    REQUIRE(r->status == 201);
  }
  auto get = [&](const std::string& path) {
    return agent.client().Get(path.c_str(), agent.operator_headers());
  };
  // The mint is in the pool, but the machine's report of it may still count
  // as unacknowledged for a moment (backlogged 1, unacked_total 1: seen under
  // ASan). Every view below is then read from the same quiet fleet.
  Json quiet = poll_json(agent, "/v1/fleet/summary", [](const Json& s) {
    return s["unacked_total"] == 0 && s["backlogged"] == 0;
  });
  REQUIRE(quiet["unacked_total"] == 0);
  Json all = body_of(get("/v1/fleet"));
  CHECK(all["summary"]["devices"] == 4);
  CHECK(all["summary"]["online"] == 1);
  CHECK(all["summary"]["offline"] == 3);
  CHECK(all["summary"]["out_of_stock"] == 3);  // the new ones have empty slots
  CHECK(all["summary"]["mismatches"] == 0);
  CHECK(all["total"] == 4);
  REQUIRE(all["devices"].size() == 4);
  CHECK(all["devices"][0]["id"] == "vm-a");  // sorted by id
  CHECK(all["devices"][3]["id"] == "vm-http-1");
  CHECK(all["devices"][3]["pool"] == 3);
  REQUIRE(all["devices"][3]["stock"].size() == 1);
  CHECK(all["devices"][3]["stock"][0] == Json{{"slot", 1}, {"pool", 3}, {"capacity", 10}});
  CHECK(all["devices"][0]["stock"][0]["pool"] == 0);
  CHECK(all["devices"][3]["online"] == true);

  Json page = body_of(get("/v1/fleet?offset=1&limit=2"));
  CHECK(page["total"] == 4);
  REQUIRE(page["devices"].size() == 2);
  CHECK(page["devices"][0]["id"] == "vm-b");
  CHECK(page["devices"][1]["id"] == "vm-c");

  Json online = body_of(get("/v1/fleet?filter=online"));
  CHECK(online["total"] == 1);
  CHECK(online["devices"][0]["id"] == "vm-http-1");
  CHECK(body_of(get("/v1/fleet?filter=out_of_stock"))["total"] == 3);
  CHECK(body_of(get("/v1/fleet?q=vm-b"))["devices"][0]["id"] == "vm-b");
  CHECK(online["summary"]["devices"] == 4);  // the summary is the whole fleet
  CHECK(body_of(get("/v1/fleet/summary")) == all["summary"]);

  expect_error(get("/v1/fleet?limit=0"), 400, "bad_request", "'limit'");
  expect_error(get("/v1/fleet?limit=501"), 400, "bad_request", "'limit'");
  expect_error(get("/v1/fleet?offset=-1"), 400, "bad_request", "'offset'");
  expect_error(get("/v1/fleet?filter=broken"), 400, "bad_request", "'filter'");
  expect_error(get("/v1/fleet?colour=red"), 400, "bad_request", "unknown query parameter");
  expect_error(agent.client().Get("/v1/fleet"), 401, "unauthorized");
}

TEST_CASE("GET /v1/ops/series: orders, sales and their latency this minute; availability") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  sell_one(agent, m);
  sell_one(agent, m);
  // The order events go out on the core's next tick; a device's statuses at
  // most once per second (its "online" may follow its "provisioned" later).
  Json s = poll_json(
      agent, "/v1/ops/series",
      [](const Json& b) {
        return b["minutes"].back()["sales"] == 2 && b["availability"].size() == 1 &&
               b["availability"][0]["online"] == true;
      },
      400);
  REQUIRE(s["minutes"].size() == 60);
  Json now = s["minutes"].back();
  CHECK(now["orders"] == 2);
  CHECK(now["sales"] == 2);
  CHECK(now["failed"] == 0);
  REQUIRE(now["latency_ms"].is_object());
  CHECK(now["latency_ms"]["count"] == 2);
  CHECK(now["latency_ms"]["p50"].get<int64_t>() <= now["latency_ms"]["p99"].get<int64_t>());
  CHECK(s["minutes"][0]["orders"] == 0);
  REQUIRE(s["availability"].size() == 1);
  CHECK(s["availability"][0]["device"] == kDevice);
  CHECK(s["availability"][0]["online"] == true);
  expect_error(agent.client().Get("/v1/ops/series"), 401, "unauthorized");
}

// A second machine with one order, so ?device= has something to leave out.
void provision_other(Agent& agent) {
  Json body = {
      {"id", "vm-other"},
      {"slots", {{{"slot", 1}, {"product", "tea"}, {"price_cents", 100}, {"capacity", 5}}}}};
  auto r =
      agent.client().Post("/v1/devices", agent.operator_headers(), body.dump(), "application/json");
  REQUIRE(r);
  REQUIRE(r->status == 201);
}

TEST_CASE("the device page's reads: one device, its orders, its faults; never the whole fleet") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  provision_other(agent);
  auto get = [&](const std::string& path) {
    return agent.client().Get(path.c_str(), agent.operator_headers());
  };
  std::string sold = sell_one(agent, m);
  Json reserved = body_of(post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})"));

  Json device = body_of(get("/v1/devices/vm-http-1"));
  CHECK(device["id"] == kDevice);
  CHECK(device["online"] == true);
  CHECK(body_of(get("/v1/devices/vm-other"))["online"] == false);
  expect_error(get("/v1/devices/vm-nobody"), 404, "not_found", "vm-nobody");
  expect_error(get("/v1/devices/vm-http-1?x=1"), 400, "bad_request", "no parameters");
  expect_error(agent.client().Get("/v1/devices/vm-http-1"), 401, "unauthorized");

  Json mine = body_of(get("/v1/orders?device=vm-http-1"));
  REQUIRE(mine["orders"].size() == 2);
  CHECK(mine["orders"][0]["id"] == reserved["id"]);  // newest first
  CHECK(mine["orders"][1]["id"] == sold);
  CHECK(body_of(get("/v1/orders?device=vm-http-1&limit=1"))["orders"].size() == 1);
  Json done = body_of(get("/v1/orders?device=vm-http-1&state=COMPLETED"));
  REQUIRE(done["orders"].size() == 1);
  CHECK(done["orders"][0]["id"] == sold);
  CHECK(body_of(get("/v1/orders?device=vm-other"))["orders"].empty());
  expect_error(get("/v1/orders?device=bad%20id"), 400, "bad_request", "'device'");
  expect_error(get("/v1/orders?device=a&device=b"), 400, "bad_request", "more than once");
  // Refunds take no device filter: it is the orders' alone.
  expect_error(get("/v1/refunds?device=vm-http-1"), 400, "bad_request", "unknown query parameter");

  // A dispense reported for a cancelled order: a fault row and an alert.
  std::string cancelled = reserved["id"];
  REQUIRE(body_of(post_json(agent, "/v1/orders/" + cancelled + "/cancel", ""))["state"] ==
          "CANCELLED");
  dispensed(agent, m, cancelled);
  Json faults = poll_json(agent, "/v1/devices/vm-http-1/faults",
                          [](const Json& b) { return !b["faults"].empty(); });
  CHECK(faults["device"] == kDevice);
  REQUIRE(faults["faults"].size() == 1);
  CHECK(faults["faults"][0]["code"] == "dispense_contradiction");
  CHECK(faults["faults"][0]["slot"] == 1);
  CHECK(faults["faults"][0]["message"].get<std::string>().find(cancelled) != std::string::npos);
  CHECK(body_of(get("/v1/devices/vm-other/faults"))["faults"].empty());
  expect_error(get("/v1/devices/vm-nobody/faults"), 404, "not_found");
  expect_error(get("/v1/devices/vm-http-1/faults?limit=0"), 400, "bad_request", "'limit'");
  expect_error(get("/v1/devices/vm-http-1/faults?limit=101"), 400, "bad_request", "'limit'");
  expect_error(get("/v1/devices/vm-http-1/faults?since=1"), 400, "bad_request", "'limit'");

  // A status stamped an hour ahead of the agent's clock: clock_skew is
  // active too (the machine's events, stamped 1970, only lower the
  // estimate); the list is ordered by device, slot and code.
  int64_t hour_ahead = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count() +
                       3'600'000;
  proto::PresenceStatus ahead{kDevice, m.boot_id, true, hour_ahead};
  agent.core().on_message(
      Message{topics::device_status(kDevice),
              proto::encode(ahead, crypto::sign(m.key, proto::encode_canonical(ahead))), 1, false});
  Json alerts = body_of(get("/v1/alerts"));
  REQUIRE_MESSAGE(alerts["alerts"].size() == 2, alerts.dump());
  CHECK(alerts["alerts"][0]["code"] == "clock_skew");
  CHECK(alerts["alerts"][0]["slot"] == 0);
  Json a = alerts["alerts"][1];
  CHECK(a["code"] == "dispense_contradiction");
  CHECK(a["severity"] == "critical");
  CHECK(a["state"] == "raised");
  CHECK(a["device"] == kDevice);
  CHECK(a["slot"] == 1);
  CHECK(a["ts_ms"].get<int64_t>() > 0);
  expect_error(get("/v1/alerts?code=x"), 400, "bad_request", "no parameters");
  expect_error(agent.client().Get("/v1/alerts"), 401, "unauthorized");
}

TEST_CASE("GET /v1/orders/{id}/history: every state change with who decided, payments, refunds") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  auto get = [&](const std::string& path) {
    return agent.client().Get(path.c_str(), agent.operator_headers());
  };
  std::string id = sell_one(agent, m);
  // From the log: once the completion is committed.
  Json h = poll_json(agent, "/v1/orders/" + id + "/history",
                     [](const Json& b) { return b["events"].size() == 4; });
  CHECK(h["order_id"] == id);
  std::vector<std::string> to;
  for (const Json& e : h["events"]) to.push_back(e["to_state"]);
  const std::vector<std::string> sale = {"RESERVED", "PAID", "DISPATCHED", "COMPLETED"};
  CHECK_MESSAGE(to == sale, h.dump());
  CHECK(h["events"][0]["from_state"].is_null());
  CHECK(h["events"][1]["from_state"] == "RESERVED");
  REQUIRE(h["payments"].size() == 1);
  CHECK(h["payments"][0]["payment_id"] == "pay-" + id);
  CHECK(h["payments"][0]["amount_cents"] == 250);
  CHECK(h["payments"][0]["outcome"] == "applied");
  CHECK(h["refunds"].empty());

  // A second payment of the same order is refunded: the refund shows here.
  std::string body = R"({"payment_id":"pay-again","amount_cents":250})";
  auto again = post_json(agent, "/v1/orders/" + id + "/payment", body, signed_for(id, body));
  REQUIRE(again);
  REQUIRE_MESSAGE(again->status == 200, again->body);
  Json h2 = body_of(get("/v1/orders/" + id + "/history"));
  CHECK(h2["payments"].size() == 2);
  REQUIRE(h2["refunds"].size() == 1);
  CHECK(h2["refunds"][0]["payment_id"] == "pay-again");
  CHECK(h2["refunds"][0]["state"] == "PENDING");

  expect_error(get("/v1/orders/ord-nobody/history"), 404, "not_found");
  expect_error(get("/v1/orders/" + id + "/history?x=1"), 400, "bad_request");
  // Operator only: the history names who resolved a review (GET of the
  // order itself stays public).
  expect_error(agent.client().Get(("/v1/orders/" + id + "/history").c_str()), 401, "unauthorized");
}

}  // namespace
}  // namespace vend::agent
