// The console's endpoints through the real HttpApi (http_api_rig.hpp):
// GET /v1/ops/stream (operator token, the core's own ops events, the cap
// answered 503), GET /v1/fleet (summary counts, pages, filters, bad
// parameters) and GET /v1/ops/series (a sale in the current minute, its
// payment -> result latency, the machine's availability).
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
  Json s;
  // The order events go out on the core's next tick; a device's statuses at
  // most once per second (its "online" may follow its "provisioned" later).
  for (int i = 0; i < 400; ++i) {
    s = body_of(agent.client().Get("/v1/ops/series", agent.operator_headers()));
    if (s["minutes"].back()["sales"] == 2 && s["availability"].size() == 1 &&
        s["availability"][0]["online"] == true) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
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

}  // namespace
}  // namespace vend::agent
