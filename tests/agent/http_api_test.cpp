// The HTTP API over a real in-process AgentCore (temp-dir SQLite, in-memory
// MQTT) on a real HttpServer on loopback (http_api_rig.hpp): every
// class of bad input gets its status and an error code and message naming
// the problem; the happy path never shows the sale token; /metrics parses.
// The simulated device is played by signed messages handed to the core.
#include "http/http_api.hpp"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/agent_core.hpp"
#include "http/http_json.hpp"
#include "http/http_server.hpp"
#include "http/metrics.hpp"
#include "http_api_rig.hpp"
#include "repository/repository.hpp"
#include "shell/core_thread.hpp"
#include "test_support.hpp"
#include "vend/crypto.hpp"
#include "vend/in_memory_bus.hpp"
#include "vend/protocol.hpp"
#include "vend/sqlite.hpp"
#include "vend/topics.hpp"
#include "vend/update_signature.hpp"
#include "vend/webhook.hpp"

namespace vend::agent {
namespace {

TEST_CASE("happy path: order, payment; the sale token never leaves the agent") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);

  auto created = post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})",
                           {{"Idempotency-Key", "key-1"}});
  Json order = body_of(created);
  REQUIRE(created->status == 201);
  CHECK(order["state"] == "RESERVED");
  CHECK(order["price_cents"] == 250);
  CHECK_FALSE(order.contains("token"));
  CHECK(created->body.find("idempotency") == std::string::npos);
  std::string id = order["id"];

  SUBCASE("the same idempotency key returns the same order") {
    auto again = post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})",
                           {{"Idempotency-Key", "key-1"}});
    CHECK(body_of(again)["id"] == id);
  }
  SUBCASE("a signed payment is accepted; the order shows no token") {
    // The wrong amount is recorded and refunded; the order stays payable.
    std::string wrong = R"({"payment_id":"pay-0","amount_cents":1})";
    Json refunded =
        body_of(post_json(agent, "/v1/orders/" + id + "/payment", wrong, signed_for(id, wrong)));
    CHECK(refunded["payment_outcome"] == "amount_mismatch_refunded");
    CHECK(refunded["state"] == "RESERVED");
    std::string body = R"({"payment_id":"pay-1","amount_cents":250})";
    auto paid = post_json(agent, "/v1/orders/" + id + "/payment", body, signed_for(id, body));
    Json j = body_of(paid);
    CHECK(paid->status == 200);
    CHECK((j["state"] == "PAID" || j["state"] == "DISPATCHED"));
    CHECK_FALSE(j.contains("token"));
    auto got = agent.client().Get(("/v1/orders/" + id).c_str());
    CHECK(body_of(got)["payment_id"] == "pay-1");
    expect_error(post_json(agent, "/v1/orders/" + id + "/cancel", ""), 409, "invalid_state");
    auto listed = agent.client().Get("/v1/orders?limit=10", agent.operator_headers());
    Json list = body_of(listed);
    REQUIRE(list["orders"].size() == 1);
    CHECK_FALSE(list["orders"][0].contains("token"));
  }
  SUBCASE("cancel puts the token back") {
    auto cancelled = post_json(agent, "/v1/orders/" + id + "/cancel", "");
    CHECK(body_of(cancelled)["state"] == "CANCELLED");
    CHECK(pool_of_slot1(agent) == "3");
    auto again = post_json(agent, "/v1/orders/" + id + "/cancel", "{}");  // idempotent
    CHECK(body_of(again)["state"] == "CANCELLED");
    expect_error(post_json(agent, "/v1/orders/" + id + "/cancel", R"({"why":1})"), 400,
                 "bad_request", "unknown field 'why'");
  }
}

TEST_CASE("bad bodies are 400 with a message naming the field") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  struct Case {
    const char* body;
    const char* part;
  };
  const Case cases[] = {
      {R"({"device":"vm-http-1","slot":1)", "malformed JSON"},
      {"not json", "malformed JSON"},
      {R"([1,2])", "must be a JSON object"},
      {R"({"device":"vm-http-1","slot":1,"slot":2})", "duplicate key 'slot'"},
      {R"({"slot":1})", "missing field 'device'"},
      {R"({"device":"vm-http-1"})", "missing field 'slot'"},
      {R"({"device":"vm-http-1","slot":"1"})", "'slot' must be an integer, not a string"},
      {R"({"device":"vm-http-1","slot":1.0})", "'slot' must be an integer, not a float"},
      {R"({"device":"vm-http-1","slot":true})", "'slot' must be an integer, not a boolean"},
      {R"({"device":7,"slot":1})", "'device' must be a string"},
      {R"({"device":"vm-http-1","slot":0})", "'slot' must be 1..255"},
      {R"({"device":"vm-http-1","slot":256})", "'slot' must be 1..255"},
      {R"({"device":"vm-http-1","slot":18446744073709551615})", "'slot' must be 1..255"},
      {R"({"device":"vm/1","slot":1})", "'device' must be 1..64 characters"},
      {R"({"device":"vm-http-1","slot":1,"qty":2})", "unknown field 'qty'"},
      {R"({"a":[[[[[[[[[1]]]]]]]]]})", "nested deeper"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.body);
    expect_error(post_json(agent, "/v1/orders", c.body), 400, "bad_request", c.part);
  }
  expect_error(post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})",
                         {{"Idempotency-Key", "has space"}}),
               400, "bad_request", "Idempotency-Key");
}

TEST_CASE("provisioning validates nested slot fields") {
  Agent agent;
  auto provision = [&](const std::string& body) {
    return post_json(agent, "/v1/devices", body, agent.operator_headers());
  };
  expect_error(provision(R"({"id":"vm-2","slots":[]})"), 400, "bad_request",
               "'slots' must have 1..255 elements");
  expect_error(provision(R"({"id":"vm-2","slots":[{"slot":1,"product":"a","price_cents":1}]})"),
               400, "bad_request", "missing field 'slots[0].capacity'");
  expect_error(provision(R"({"id":"vm-2","slots":[{"slot":1,"product":"a","price_cents":1,
                 "capacity":1},{"slot":2,"product":"b","price_cents":-1,"capacity":1}]})"),
               400, "bad_request", "'slots[1].price_cents' must be 0..10000000");
  expect_error(provision(R"({"id":"vm-2","slots":[{"slot":1,"product":"a","price_cents":1,
                 "capacity":1},{"slot":1,"product":"b","price_cents":1,"capacity":1}]})"),
               400, "bad_request", "listed twice");
  expect_error(provision(R"({"id":"vm-2","slots":[7]})"), 400, "bad_request",
               "'slots[0]' must be an object");
  auto ok = provision(R"({"id":"vm-2","slots":[{"slot":1,"product":"a","price_cents":1,
                 "capacity":1}]})");
  CHECK(ok->status == 201);
  CHECK(body_of(ok)["key"].get<std::string>().size() == 64);
}

TEST_CASE("auth: operator bearer token and payment signature") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  expect_error(agent.client().Get("/v1/devices"), 401, "unauthorized", "Bearer");
  expect_error(agent.client().Get("/v1/devices", {{"Authorization", "Bearer wrong"}}), 401,
               "unauthorized", "wrong bearer token");
  expect_error(post_json(agent, "/v1/devices/vm-http-1/restock", R"({"slot":1,"count":1})"), 401,
               "unauthorized");
  expect_error(agent.client().Get("/v1/orders"), 401, "unauthorized");
  CHECK(agent.client().Get("/v1/devices", agent.operator_headers())->status == 200);

  auto created = post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})");
  std::string path = "/v1/orders/" + body_of(created)["id"].get<std::string>() + "/payment";
  std::string body = R"({"payment_id":"pay-9","amount_cents":250})";
  std::string id = body_of(created)["id"];
  expect_error(post_json(agent, path, body), 401, "bad_signature", "Vend-Signature");
  expect_error(post_json(agent, path, body,
                         {{"Vend-Signature",
                           "t=" + std::to_string(now_s()) + ",v1=" + std::string(64, '0')}}),
               401, "bad_signature", "does not match");
  expect_error(post_json(agent, path, body, {{"Vend-Signature", "v1=abc"}}), 401, "bad_signature",
               "expected 't=");
  expect_error(post_json(agent, path, body, signed_for(id, body, now_s(), "another-secret-xxxx")),
               401, "bad_signature");
  // Signed for another order: a captured notification cannot pay this one.
  expect_error(post_json(agent, path, body, signed_for("ord-another", body)), 401, "bad_signature");
  // Signed but malformed is a 400, after the signature.
  std::string bad = R"({"payment_id":"pay-9"})";
  expect_error(post_json(agent, path, bad, signed_for(id, bad)), 400, "bad_request",
               "missing field 'amount_cents'");
  // Uppercase hex is the same signature. The very same request again, or
  // signed anew, gets the payment's recorded answer
  // (http_payments_test.cpp).
  httplib::Headers good = signed_for(id, body);
  std::string sig = good.begin()->second;
  for (char& c : sig) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  sig[0] = 't';
  sig[sig.find("V1=")] = 'v';
  CHECK(post_json(agent, path, body, {{"Vend-Signature", sig}})->status == 200);
  CHECK(body_of(post_json(agent, path, body, {{"Vend-Signature", sig}}))["payment_id"] == "pay-9");
  CHECK(body_of(post_json(agent, path, body, signed_for(id, body, now_s() - 1)))["payment_id"] ==
        "pay-9");
}

// Every verified notification is recorded; one for an order the agent never
// had is refunded, and its repeat gets the same answer.
TEST_CASE("a payment for an unknown order is recorded and refunded") {
  Agent agent;
  std::string body = R"({"payment_id":"pay-lost","amount_cents":250})";
  std::string path = "/v1/orders/ord-never-made/payment";
  Json j = body_of(post_json(agent, path, body, signed_for("ord-never-made", body)));
  CHECK(j["payment_outcome"] == "unknown_order_refunded");
  CHECK(j["payment_id"] == "pay-lost");
  Json again =
      body_of(post_json(agent, path, body, signed_for("ord-never-made", body, now_s() - 2)));
  CHECK(again["payment_outcome"] == "unknown_order_refunded");
  // Its refund is in the outbox, waiting for delivery (no refund URL here).
  Json refunds = body_of(agent.client().Get("/v1/refunds?state=PENDING", agent.operator_headers()));
  REQUIRE(refunds["refunds"].size() == 1);
  CHECK(refunds["refunds"][0]["refund_id"] == "rfd-pay-lost");
  CHECK(refunds["refunds"][0]["amount_cents"] == 250);
  CHECK(refunds["refunds"][0]["reason"] == "unknown_order");
  CHECK(refunds["refunds"][0]["device"] == "");  // no machine: the order never existed
  expect_error(agent.client().Get("/v1/refunds"), 401, "unauthorized");
  expect_error(agent.client().Get("/v1/refunds?state=LOST", agent.operator_headers()), 400,
               "bad_request", "PENDING, DELIVERED or GAVE_UP");
}

TEST_CASE("resolving a review: operators only, a strict body, NEEDS_REVIEW only") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  auto created = post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})");
  std::string path = "/v1/orders/" + body_of(created)["id"].get<std::string>() + "/resolve";
  std::string body = R"({"dispensed":true,"note":"seen on camera"})";
  expect_error(post_json(agent, path, body), 401, "unauthorized");
  auto op = agent.operator_headers();
  expect_error(post_json(agent, path, R"({"dispensed":1})", op), 400, "bad_request",
               "'dispensed' must be true or false");
  // Who decides is the calling account, never a typed name.
  expect_error(post_json(agent, path, R"({"dispensed":true,"by":"alice"})", op), 400, "bad_request",
               "the resolver is the calling account");
  expect_error(post_json(agent, path, R"({"dispensed":true,"x":1})", op), 400, "bad_request", "x");
  expect_error(post_json(agent, path, body, op), 409, "invalid_state", "only NEEDS_REVIEW");
  expect_error(post_json(agent, "/v1/orders/ord-none/resolve", body, op), 404, "not_found");
}

TEST_CASE("not found, unknown routes, oversize bodies, conflicts") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  expect_error(agent.client().Get("/v1/orders/no-such-order"), 404, "not_found");
  expect_error(agent.client().Get("/v1/nothing"), 404, "not_found", "no route for GET /v1/nothing");
  expect_error(agent.client().Delete("/v1/orders/x"), 404, "not_found");
  expect_error(agent.client().Get("/v1/devices/vm-nope/slots", agent.operator_headers()), 404,
               "not_found");
  expect_error(post_json(agent, "/v1/orders", R"({"device":"vm-nope","slot":1})"), 404,
               "not_found");
  expect_error(post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":9})"), 404,
               "unknown_slot");

  std::string big =
      R"({"device":"vm-http-1","slot":1,"pad":")" + std::string(17 * 1024, 'x') + "\"}";
  expect_error(post_json(agent, "/v1/orders", big), 413, "payload_too_large");

  for (int i = 0; i < 3; ++i) {
    CHECK(post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})")->status == 201);
  }
  expect_error(post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})"), 409,
               "sold_out");
  expect_error(post_json(agent, "/v1/devices", R"({"id":"vm-http-1","slots":[{"slot":1,
                 "product":"a","price_cents":1,"capacity":1}]})",
                         agent.operator_headers()),
               409, "conflict");
  expect_error(agent.client().Get("/v1/orders?state=NOPE", agent.operator_headers()), 400,
               "bad_request", "unknown state 'NOPE'");
  expect_error(agent.client().Get("/v1/orders?limit=0", agent.operator_headers()), 400,
               "bad_request", "'limit'");
  expect_error(agent.client().Get("/v1/orders?colour=red", agent.operator_headers()), 400,
               "bad_request", "unknown query parameter 'colour'");
}

TEST_CASE("reconcile: on-demand request and the report of a snapshot") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  expect_error(post_json(agent, "/v1/devices/vm-http-1/reconcile", ""), 401, "unauthorized");
  expect_error(post_json(agent, "/v1/devices/vm-nope/reconcile", "", agent.operator_headers()), 404,
               "not_found");
  expect_error(post_json(agent, "/v1/devices/vm-http-1/reconcile", R"({"full":false})",
                         agent.operator_headers()),
               400, "bad_request", "unknown field 'full'");
  expect_error(agent.client().Get("/v1/reconcile/vm-http-1", agent.operator_headers()), 404,
               "not_found", "no reconciliation report");
  auto r = post_json(agent, "/v1/devices/vm-http-1/reconcile", "", agent.operator_headers());
  Json j = body_of(r);
  REQUIRE(r->status == 202);
  CHECK(j["device"] == "vm-http-1");
  CHECK(j["full"] == true);
  std::string request_id = j["request_id"];

  // The device answers with a full snapshot holding the cloud's 3 tokens' count
  // but other ids: the report names the difference.
  proto::SlotSnapshot slot{1, 3, 1, crypto::token_digest({std::string(32, 'a')}),
                           std::vector<std::string>{std::string(32, 'a')}};
  proto::DeviceEvent e{kDevice, ++m.seq, m.boot_id, 1, proto::Snapshot{request_id, {slot}, 0}};
  std::string mac = crypto::sign(m.key, proto::encode_canonical(e));
  agent.core().on_message(Message{topics::device_evt(kDevice), proto::encode(e, mac), 1, false});
  auto report = agent.client().Get("/v1/reconcile/vm-http-1", agent.operator_headers());
  Json rep = body_of(report);
  REQUIRE(report->status == 200);
  CHECK(rep["request_id"] == request_id);
  CHECK(rep["trigger"] == "on_demand");
  CHECK(rep["slots"][0]["tokens_removed"] == 3);
  CHECK(rep["slots"][0]["tokens_added"] == 1);
  CHECK(rep["slots"][0]["physical_count"] == 3);
  CHECK(rep["verdict"] == "alert");  // 3 items, 1 token
  CHECK(pool_of_slot1(agent) == "1");
  auto metrics = agent.client().Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("vend_reconcile_tokens_added_total 1") != std::string::npos);
  CHECK(metrics->body.find("vend_alerts_active{code=\"physical_mismatch\"} 1") !=
        std::string::npos);
}

TEST_CASE("slots: update price, restock validation") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  auto put = [&](const std::string& path, const std::string& body) {
    return agent.client().Put(path.c_str(), agent.operator_headers(), body, "application/json");
  };
  auto r = put("/v1/devices/vm-http-1/slots/1", R"({"product":"lemonade","price_cents":300})");
  Json j = body_of(r);
  CHECK(r->status == 200);
  CHECK(j["product"] == "lemonade");
  CHECK(j["price_cents"] == 300);
  CHECK(j["capacity"] == 10);
  expect_error(put("/v1/devices/vm-http-1/slots/7", R"({"product":"x","price_cents":1})"), 404,
               "unknown_slot");
  expect_error(put("/v1/devices/vm-http-1/slots/0", R"({"product":"x","price_cents":1})"), 400,
               "bad_request", "slot in the path");
  expect_error(put("/v1/devices/vm-http-1/slots/1", R"({"product":"x\u0001","price_cents":1})"),
               400, "bad_request", "control characters");
  expect_error(post_json(agent, "/v1/devices/vm-http-1/restock", R"({"slot":1,"count":0})",
                         agent.operator_headers()),
               400, "bad_request", "'count' must be 1..1000");
}

// Parses one Prometheus sample line `name{label="value"} number`; returns
// {series, value} or nullopt. (No std::regex: GCC 12 warns inside <regex>
// under -O1 -fsanitize, and warnings are errors.)
std::optional<std::pair<std::string, std::string>> parse_sample(const std::string& line) {
  auto is_name = [](char c, bool first) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
           (!first && std::isdigit(static_cast<unsigned char>(c)));
  };
  size_t i = 0;
  while (i < line.size() && is_name(line[i], i == 0)) ++i;
  if (i == 0) return std::nullopt;
  if (i < line.size() && line[i] == '{') {
    size_t close = line.find("\"}", i);
    size_t eq = line.find("=\"", i);
    if (close == std::string::npos || eq == std::string::npos || eq > close) return std::nullopt;
    for (size_t k = i + 1; k < eq; ++k) {
      if (!is_name(line[k], k == i + 1)) return std::nullopt;
    }
    i = close + 2;
  }
  if (i >= line.size() || line[i] != ' ') return std::nullopt;
  std::string value = line.substr(i + 1);
  if (value.empty() || value.find(' ') != std::string::npos) return std::nullopt;
  if (value != "+Inf" && value != "NaN") {
    char* end = nullptr;
    std::strtod(value.c_str(), &end);
    if (*end != '\0') return std::nullopt;
  }
  return std::make_pair(line.substr(0, i), value);
}

// `name{labels} value` or a comment; every histogram is cumulative.
TEST_CASE("metrics: Prometheus text format, healthz") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  CHECK(post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})")->status == 201);

  auto r = agent.client().Get("/metrics");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->get_header_value("Content-Type").find("text/plain; version=0.0.4") == 0);
  std::map<std::string, std::string> values;
  std::istringstream lines(r->body);
  for (std::string line; std::getline(lines, line);) {
    CAPTURE(line);
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) continue;
    auto sample = parse_sample(line);
    REQUIRE(sample.has_value());
    values[sample->first] = sample->second;
  }
  CHECK_FALSE(parse_sample("bad name 1").has_value());
  CHECK_FALSE(parse_sample("x{le=\"1\"} one").has_value());
  CHECK(values["vend_orders{state=\"RESERVED\"}"] == "1");
  CHECK(values["vend_stock_items"] == "2");
  CHECK(values["vend_devices_online"] == "1");
  CHECK(values["vend_reservations_total"] == "1");
  CHECK(values.count("vend_dispatch_latency_seconds_bucket{le=\"+Inf\"}") == 1);
  CHECK(values.count("vend_dispatch_latency_seconds_bucket{le=\"0.005\"}") == 1);

  Json health = body_of(agent.client().Get("/healthz"));
  CHECK(health["status"] == "ok");
  CHECK(health["mqtt_connected"] == true);
  CHECK_FALSE(health.contains("stock_store"));
  CHECK(values["vend_healthy"] == "1");
  CHECK(values["vend_storage_failed"] == "0");
  CHECK(values["vend_broker_down"] == "0");
  CHECK(values["vend_inbound_saturated"] == "0");
}

// The value of one sample in a /metrics scrape ("" if absent).
std::string metric(Agent& agent, const std::string& name) {
  auto r = agent.client().Get("/metrics");
  REQUIRE(r);
  std::istringstream lines(r->body);
  for (std::string line; std::getline(lines, line);) {
    auto sample = parse_sample(line);
    if (sample && sample->first == name) return sample->second;
  }
  return "";
}

TEST_CASE("healthz: 503 with a reason once the broker is down past the grace") {
  Agent agent;
  agent.disconnect_broker();
  agent.shell.mqtt_down_ms = 29'000;  // within the grace: degraded, still 200
  auto r = agent.client().Get("/healthz");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(body_of(r)["mqtt_connected"] == false);
  agent.shell.mqtt_down_ms = 31'000;
  r = agent.client().Get("/healthz");
  REQUIRE(r);
  CHECK(r->status == 503);
  Json body = body_of(r);
  CHECK(body["status"] == "unavailable");
  CHECK(body["reason"] == "broker_down");
  CHECK(body["mqtt_down_ms"] == 31'000);
  CHECK(metric(agent, "vend_broker_down") == "1");
  CHECK(metric(agent, "vend_mqtt_down_seconds") == "31");
  CHECK(metric(agent, "vend_healthy") == "0");
}

TEST_CASE("healthz: 503 inbound_saturated at 90% of the inbound queue") {
  Agent agent;
  agent.shell.inbound_messages = 8'999;
  CHECK(agent.client().Get("/healthz")->status == 200);
  agent.shell.inbound_messages = 9'000;
  auto r = agent.client().Get("/healthz");
  REQUIRE(r);
  CHECK(r->status == 503);
  CHECK(body_of(r)["reasons"] == Json::array({"inbound_saturated"}));
  CHECK(metric(agent, "vend_inbound_saturated") == "1");
  CHECK(metric(agent, "vend_inbound_queue_messages") == "9000");
}

TEST_CASE("healthz: 503 storage_failed once the repository fail-stopped") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  auto created = post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})");
  REQUIRE(created->status == 201);
  std::string id = Json::parse(created->body)["id"];
  {
    // Someone changes the log behind the core's back: the next write fails.
    agent.repo().flush();
    auto db = sql::Database::open(agent.db_path());
    REQUIRE(db.ok());
    REQUIRE(db->exec("UPDATE orders SET state = 'CANCELLED' WHERE id = '" + id + "'").ok());
  }
  REQUIRE(agent.core().cancel(id).ok());
  agent.repo().flush();
  REQUIRE_FALSE(agent.core().health().ok());
  auto r = agent.client().Get("/healthz");
  REQUIRE(r);
  CHECK(r->status == 503);
  CHECK(body_of(r)["reason"] == "storage_failed");
  CHECK(body_of(r)["storage_failed"] == true);
  CHECK(metric(agent, "vend_storage_failed") == "1");
}

// Pins down a ~40 ms stall per request (docs/benchmarks.md #2): httplib
// writes a response's headers and body separately, and without TCP_NODELAY
// the body waits for the client's delayed ACK of the headers.
TEST_CASE("keep-alive requests are not stalled by Nagle: the server sets TCP_NODELAY") {
  Agent agent;
  httplib::Client c = agent.client();
  c.set_keep_alive(true);
  c.set_tcp_nodelay(true);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) REQUIRE(c.Get("/healthz"));
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(took < std::chrono::milliseconds(400));  // with the stall: 20 x ~40 ms
}

// A backlog of 5 (httplib's) makes a burst of connections beyond it wait a
// SYN retransmit (1 s). HttpServer listens with HttpServerLimits::listen_backlog;
// `ss` shows a listening socket's backlog as its Send-Q.
TEST_CASE("the listening socket's backlog is widened to HttpServerLimits::listen_backlog") {
  Agent agent;
  REQUIRE(agent.client().Get("/healthz"));  // the accept loop (and the re-listen) has run
  std::string cmd = test::require_program("ss", "iproute2") +
                    " -ltnH 'sport = :" + std::to_string(agent.port()) + "'";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char line[512] = {0};
  bool got = std::fgets(line, sizeof line, pipe) != nullptr;
  ::pclose(pipe);
  REQUIRE_MESSAGE(got, "no output from: " << cmd);
  std::istringstream fields(line);
  std::string state;
  long recv_q = -1, send_q = -1;
  fields >> state >> recv_q >> send_q;
  INFO(line);
  CHECK(state == "LISTEN");
  CHECK(send_q >= 128);  // the kernel caps it at net.core.somaxconn
}

// A guessed Idempotency-Key never returns another client's order: keys are
// scoped per X-Client-Id, else per peer address.
TEST_CASE("idempotency keys are scoped per client (X-Client-Id, else the peer address)") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  std::string body = R"({"device":"vm-http-1","slot":1})";
  auto order_as = [&](httplib::Headers headers) {
    headers.emplace("Idempotency-Key", "same-key");
    auto r = post_json(agent, "/v1/orders", body, headers);
    Json j = body_of(r);
    REQUIRE(r->status == 201);
    CHECK(r->body.find("same-key") == std::string::npos);  // no key in any answer
    return j["id"].get<std::string>();
  };
  std::string a = order_as({{"X-Client-Id", "phone-a"}});
  REQUIRE(body_of(post_json(agent, "/v1/orders/" + a + "/cancel", ""))["state"] == "CANCELLED");
  std::string b = order_as({{"X-Client-Id", "phone-b"}});
  std::string by_addr = order_as({});
  std::string as_addr_text = order_as({{"X-Client-Id", "127.0.0.1"}});  // an id is no address
  CHECK(a != b);
  CHECK(by_addr != a);
  CHECK(by_addr != b);
  CHECK(as_addr_text != by_addr);
  CHECK(order_as({{"X-Client-Id", "phone-a"}}) == a);
  CHECK(order_as({{"X-Client-Id", "phone-b"}}) == b);
  CHECK(order_as({}) == by_addr);
  CHECK(pool_of_slot1(agent) == "0");  // three live orders, no more

  for (const char* bad : {"has space", "a/b", "\xc3\xa9"}) {
    CAPTURE(bad);
    expect_error(post_json(agent, "/v1/orders", body, {{"X-Client-Id", bad}}), 400, "bad_request",
                 "X-Client-Id");
  }
  expect_error(post_json(agent, "/v1/orders", body, {{"X-Client-Id", std::string(65, 'x')}}), 400,
               "bad_request", "X-Client-Id");
  expect_error(post_json(agent, "/v1/orders", body, {{"X-Client-Id", "a"}, {"X-Client-Id", "b"}}),
               400, "bad_request", "X-Client-Id");
}

Json catalog_of(const httplib::Result& r) {
  REQUIRE(r);
  INFO(r->body);
  REQUIRE(r->status == 200);
  CHECK(r->get_header_value("Cache-Control") == "no-cache");
  CHECK(r->body.find("token") == std::string::npos);
  return body_of(r);
}

TEST_CASE("GET /v1/machines/{id}/catalog: public, sellable slots, ETag and 304") {
  Agent agent;
  Machine m;
  m.provision(agent);
  // Provisioned but never seen: offline, nothing sellable.
  Json offline = catalog_of(agent.client().Get("/v1/machines/vm-http-1/catalog"));
  CHECK(offline["machine"] == "vm-http-1");
  CHECK(offline["online"] == false);
  REQUIRE(offline["slots"].size() == 1);
  CHECK(offline["slots"][0] == Json{{"slot", 1},
                                    {"product", "cola"},
                                    {"price_cents", 250},
                                    {"available", 0},
                                    {"sellable", false}});

  m.go_online(agent);
  Json empty = catalog_of(agent.client().Get("/v1/machines/vm-http-1/catalog"));
  CHECK(empty["online"] == true);
  CHECK(empty["slots"][0]["sellable"] == false);  // online, but no token yet

  auto r = agent.client().Post("/v1/devices/vm-http-1/restock", agent.operator_headers(),
                               R"({"slot":1,"count":3})", "application/json");
  m.mint(agent, body_of(r)["restock_id"].get<std::string>(), 3);
  for (int i = 0; i < 200 && pool_of_slot1(agent) != "3"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto stocked = agent.client().Get("/v1/machines/vm-http-1/catalog");
  Json j = catalog_of(stocked);
  CHECK(j["slots"][0]["available"] == 3);
  CHECK(j["slots"][0]["sellable"] == true);
  CHECK(j["slots"][0].size() == 5);  // nothing of the operator's view
  std::string etag = stocked->get_header_value("ETag");
  REQUIRE(etag.size() == 34);
  CHECK(etag.front() == '"');
  CHECK(etag == "\"" + crypto::sha256_hex(stocked->body).substr(0, 32) + "\"");

  // Revalidation: the same ETag is a 304 without a body; a change is a 200.
  auto same = agent.client().Get("/v1/machines/vm-http-1/catalog", {{"If-None-Match", etag}});
  REQUIRE(same);
  CHECK(same->status == 304);
  CHECK(same->body.empty());
  CHECK(same->get_header_value("ETag") == etag);
  auto listed = agent.client().Get("/v1/machines/vm-http-1/catalog",
                                   {{"If-None-Match", "\"other\", W/" + etag}});
  CHECK(listed->status == 304);
  CHECK(agent.client()
            .Get("/v1/machines/vm-http-1/catalog", {{"If-None-Match", "\"other\""}})
            ->status == 200);
  REQUIRE(post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})")->status == 201);
  auto changed = agent.client().Get("/v1/machines/vm-http-1/catalog", {{"If-None-Match", etag}});
  CHECK(catalog_of(changed)["slots"][0]["available"] == 2);
  CHECK(changed->get_header_value("ETag") != etag);

  expect_error(agent.client().Get("/v1/machines/vm-nowhere/catalog"), 404, "not_found",
               "vm-nowhere");
}

// Sends `request` as is on a fresh connection and reads until the server
// closes it (the request says Connection: close). Status and body, and how
// long the answer took.
struct RawReply {
  int status = 0;
  std::string body;
  std::chrono::milliseconds took{0};
};
RawReply raw_request(int port, const std::string& request) {
  auto start = std::chrono::steady_clock::now();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) answer.append(buf, n);
  ::close(fd);
  RawReply r;
  r.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
  INFO(answer);
  REQUIRE(answer.rfind("HTTP/1.1 ", 0) == 0);
  r.status = std::stoi(answer.substr(9, 3));
  size_t end = answer.find("\r\n\r\n");
  if (end != std::string::npos) r.body = answer.substr(end + 4);
  return r;
}

// What `curl -X POST` without -d sends: no Content-Length, no body.
std::string bodiless_post(const std::string& path, const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n" + extra_headers +
         "Connection: close\r\n\r\n";
}

TEST_CASE("POST without Content-Length: an empty body, answered at once") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  std::string id =
      body_of(post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})"))["id"];

  RawReply cancelled = raw_request(agent.port(), bodiless_post("/v1/orders/" + id + "/cancel"));
  INFO(cancelled.body);
  CHECK(cancelled.status == 200);
  CHECK(Json::parse(cancelled.body)["state"] == "CANCELLED");
  CHECK(cancelled.took < std::chrono::milliseconds(2000));  // not after the read timeout

  std::string bearer = std::string("Authorization: Bearer ") + kToken + "\r\n";
  RawReply asked =
      raw_request(agent.port(), bodiless_post("/v1/devices/vm-http-1/reconcile", bearer));
  INFO(asked.body);
  CHECK(asked.status == 202);
  CHECK(Json::parse(asked.body)["full"] == true);
  CHECK(asked.took < std::chrono::milliseconds(2000));

  // Still authorized, still routed; an endpoint that needs a body says so.
  CHECK(raw_request(agent.port(), bodiless_post("/v1/devices/vm-http-1/reconcile")).status == 401);
  RawReply nowhere = raw_request(agent.port(), bodiless_post("/v1/nowhere"));
  CHECK(nowhere.status == 404);
  CHECK(Json::parse(nowhere.body)["error"]["code"] == "not_found");
  RawReply order = raw_request(agent.port(), bodiless_post("/v1/orders"));
  CHECK(order.status == 400);
  CHECK(Json::parse(order.body)["error"]["code"] == "bad_request");
  CHECK(order.took < std::chrono::milliseconds(2000));
}

// Issue 13: with httplib's thread per connection, eight clients that kept
// their keep-alive connection open made the ninth wait ~2 s (their timeout).
TEST_CASE("keep-alive clients that stay connected do not delay anyone else") {
  Agent agent;
  std::vector<std::unique_ptr<httplib::Client>> idle;
  for (int i = 0; i < 32; ++i) {
    idle.push_back(std::make_unique<httplib::Client>("127.0.0.1", agent.port()));
    idle.back()->set_keep_alive(true);
    REQUIRE(idle.back()->Get("/healthz"));
  }
  auto start = std::chrono::steady_clock::now();
  auto r = agent.client().Get("/healthz");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(500));
  CHECK(std::stoi(metric(agent, "vend_http_open_connections")) >= 32);
  CHECK(metric(agent, "vend_http_rejected_total{limit=\"max_connections\"}") == "0");
}

// The operators' console: the embedded files (cloud-agent/console/), public,
// with their content type, a strong ETag and 304 on a match.
TEST_CASE("GET /console/: the embedded console files, ETag and 304") {
  Agent agent;
  auto moved = agent.client().Get("/console");
  REQUIRE(moved);
  CHECK(moved->status == 308);
  CHECK(moved->get_header_value("Location") == "/console/");

  auto index = agent.client().Get("/console/");
  REQUIRE(index);
  CHECK(index->status == 200);
  CHECK(index->get_header_value("Content-Type") == "text/html; charset=utf-8");
  CHECK(index->body.find("<script src=\"console.js\"") != std::string::npos);
  CHECK(index->get_header_value("Cache-Control") == "no-cache");
  CHECK(index->get_header_value("X-Content-Type-Options") == "nosniff");
  std::string etag = index->get_header_value("ETag");
  CHECK(etag.size() == 34);
  auto same = agent.client().Get("/console/index.html", {{"If-None-Match", etag}});
  REQUIRE(same);
  CHECK(same->status == 304);
  CHECK(same->body.empty());

  std::string source = std::getenv("VEND_SOURCE_DIR") ? std::getenv("VEND_SOURCE_DIR") : "";
  REQUIRE_MESSAGE(!source.empty(), "run through ctest (VEND_SOURCE_DIR unset)");
  for (auto [file, type] : {std::pair{"console.js", "text/javascript; charset=utf-8"},
                            std::pair{"pages.js", "text/javascript; charset=utf-8"},
                            std::pair{"plots.js", "text/javascript; charset=utf-8"},
                            std::pair{"console.css", "text/css; charset=utf-8"}}) {
    auto r = agent.client().Get(std::string("/console/") + file);
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->get_header_value("Content-Type") == type);
    CHECK(r->body == test::read_file(source + "/cloud-agent/console/" + file));
    CHECK(r->get_header_value("ETag") != etag);
  }
  expect_error(agent.client().Get("/console/nothing.js"), 404, "not_found", "nothing.js");
  expect_error(agent.client().Get("/console/../metrics"), 404, "not_found", "");
}

}  // namespace
}  // namespace vend::agent

namespace vend::agent {
namespace {

// Holds the repository's writer until release(): every commit after it waits.
class WriterHold {
 public:
  explicit WriterHold(Agent& agent) {
    auto blocker = agent.repo().submit([released = released_](WriteContext&) {
      released.wait();
      return Status{};
    });
    REQUIRE(blocker.ok());
  }
  void release() { release_.set_value(); }

 private:
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
};

TEST_CASE("orders and payments waiting for their group commit hold no handler thread") {
  Agent agent(1);  // one handler thread: a blocked one would stall everything
  Machine m;
  stock_machine(agent, m);
  WriterHold hold(agent);  // every commit after this waits
  std::vector<std::thread> customers;
  std::atomic<int> created{0};
  for (int i = 0; i < 3; ++i) {
    customers.emplace_back([&] {
      auto r = post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})");
      if (r && r->status == 201) ++created;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(created == 0);  // not answered before they are durable
  // The one handler thread is free: another request is answered at once.
  auto start = std::chrono::steady_clock::now();
  auto health = agent.client().Get("/healthz");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(500));
  hold.release();
  for (auto& c : customers) c.join();
  CHECK(created == 3);
  CHECK(pool_of_slot1(agent) == "0");
}

TEST_CASE("orders and payments never queue behind a busy handler thread") {
  Agent agent(1);
  Machine m;
  stock_machine(agent, m);
  // The one handler thread waits for an operator write's commit, which
  // waits for the held writer.
  WriterHold hold(agent);
  std::thread op([&] {
    auto r = agent.client().Put("/v1/devices/vm-http-1/slots/1", agent.operator_headers(),
                                R"({"product":"cola","price_cents":150})", "application/json");
    CHECK((r && r->status == 200));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Answers that need no commit come at once: the customers' calls run on
  // the server's event thread, not behind the handler thread.
  auto start = std::chrono::steady_clock::now();
  expect_error(post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":9})"), 404,
               "unknown_slot");
  std::string body = R"({"payment_id":"p-1","amount_cents":100})";
  expect_error(post_json(agent, "/v1/orders/o-1/payment", body), 401, "bad_signature");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(500));
  hold.release();
  op.join();
}

TEST_CASE("order and error bodies, written directly, match the tree encoding") {
  auto tree = [](const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); };
  const std::vector<std::string> strings = {"",
                                            "plain",
                                            "quote\"s",
                                            "back\\slash",
                                            "tab\tnl\n",
                                            std::string("nul\0x", 5),
                                            "\x01\x7f",
                                            "caf\xc3\xa9",
                                            "bad \xff utf8",
                                            "cut \xe2\x82"};
  for (const auto& text : strings) {
    CAPTURE(text);
    Order o;
    o.id = o.device = o.token = o.idempotency_key = text;
    o.slot = -3;
    o.price_cents = 150;
    o.state = OrderState::kRefunded;
    o.created_ms = 1700000000000;
    o.updated_ms = -1;
    o.reserve_deadline_ms = INT64_MAX;
    Json expected = {{"id", text},         {"device", text},
                     {"slot", -3},         {"state", "REFUNDED"},
                     {"price_cents", 150}, {"created_ms", 1700000000000},
                     {"updated_ms", -1},   {"reserve_deadline_ms", INT64_MAX}};
    CHECK(http::order_text(o) == tree(expected));
    o.dispatch_expires_at_ms = 5;
    o.payment_id = o.reason = o.payment_outcome = text;
    expected["dispatch_expires_at_ms"] = 5;
    if (!text.empty()) {  // an empty one is left out
      expected["payment_id"] = expected["reason"] = expected["payment_outcome"] = text;
    }
    CHECK(http::order_text(o) == tree(expected));
    CHECK(http::order_list_text({o, o}) == tree(Json{{"orders", {expected, expected}}}));
    CHECK(http::error_body(text, text) ==
          tree(Json{{"error", {{"code", text}, {"message", text}}}}));
    CHECK(limit_error_body(text, text, "max_body_bytes") ==
          tree(Json{{"error", {{"code", text}, {"message", text}, {"limit", "max_body_bytes"}}}}));
    CHECK(limit_error_body(text, text, "") ==
          tree(Json{{"error", {{"code", text}, {"message", text}}}}));
  }
  CHECK(http::order_list_text({}) == R"({"orders":[]})");
}

// ---- POST /v1/devices/{id}/update ----

constexpr const char* kSha = "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef";

Json update_body() {
  auto key = crypto::generate_update_key();
  std::string signature =
      crypto::sign_update(key.private_hex, crypto::update_manifest("0.2.0", 1843200, kSha)).value();
  return Json{{"version", "0.2.0"},
              {"url", "https://updates.example.com/vend-firmware_0.2.0_arm64.deb"},
              {"size_bytes", 1843200},
              {"sha256", kSha},
              {"signature", signature}};
}

Json with(Json body, const std::string& key, Json value) {
  body[key] = std::move(value);
  return body;
}

TEST_CASE("update: operators only, a strict body, an online device") {
  Agent agent;
  Machine m;
  m.provision(agent);
  const std::string path = "/v1/devices/vm-http-1/update";
  expect_error(post_json(agent, path, update_body().dump()), 401, "unauthorized");
  auto ops = agent.operator_headers();
  expect_error(post_json(agent, "/v1/devices/vm-nope/update", update_body().dump(), ops), 404,
               "not_found");
  expect_error(post_json(agent, path, with(update_body(), "version", "1.2-rc1").dump(), ops), 400,
               "bad_request", "'version'");
  expect_error(post_json(agent, path, with(update_body(), "url", "ftp://x/y").dump(), ops), 400,
               "bad_request", "'url'");
  expect_error(post_json(agent, path, with(update_body(), "signature", "abc").dump(), ops), 400,
               "bad_request", "'signature'");
  expect_error(post_json(agent, path, with(update_body(), "sha256", "ABC").dump(), ops), 400,
               "bad_request", "'sha256'");
  expect_error(post_json(agent, path, with(update_body(), "size_bytes", 0).dump(), ops), 400,
               "bad_request", "size_bytes");
  expect_error(post_json(agent, path, with(update_body(), "force", true).dump(), ops), 400,
               "bad_request", "'force'");
  expect_error(post_json(agent, path, update_body().dump(), ops), 409, "device_offline");

  m.go_online(agent);
  auto r = post_json(agent, path, update_body().dump(), ops);
  Json j = body_of(r);
  REQUIRE(r->status == 202);
  CHECK(j["device"] == "vm-http-1");
  CHECK(j["version"] == "0.2.0");
  const std::string update_id = j["update_id"];
  CHECK(update_id.rfind("upd-", 0) == 0);
  CHECK(agent.log().contains("update " + update_id + " of vm-http-1 to 0.2.0 sent"));
}

TEST_CASE("update_status events are kept with the device's faults") {
  Agent agent;
  Machine m;
  m.provision(agent);
  m.go_online(agent);
  for (auto state : {proto::UpdateState::kDownloading, proto::UpdateState::kRolledBack}) {
    std::string reason = state == proto::UpdateState::kRolledBack ? "crash loop" : "";
    proto::DeviceEvent e{kDevice, ++m.seq, m.boot_id, 1,
                         proto::UpdateStatus{"upd-7", state, "0.2.0", reason}};
    std::string mac = crypto::sign(m.key, proto::encode_canonical(e));
    agent.core().on_message(Message{topics::device_evt(kDevice), proto::encode(e, mac), 1, false});
  }
  Json faults;
  for (int i = 0; i < 200; ++i) {
    faults = body_of(agent.client().Get("/v1/devices/vm-http-1/faults", agent.operator_headers()));
    if (faults["faults"].size() == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(faults["faults"].size() == 2);
  CHECK(faults["faults"][0]["code"] == "update_rolled_back");  // most recent first
  CHECK(faults["faults"][0]["message"] == "version 0.2.0 (upd-7): crash loop");
  CHECK(faults["faults"][1]["code"] == "update_downloading");
}

}  // namespace
}  // namespace vend::agent
