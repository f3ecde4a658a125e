// Payment notifications over HTTP (http_api_rig.hpp): every notification
// whose signature verifies is recorded before anything is judged of its
// time, and a notification sent again (the gateway's retry after a 503 or
// a lost answer, a replay, a header with extra v1 entries) gets the
// recorded answer: the payment id, not the signature, makes it idempotent.
#include <doctest/doctest.h>

#include <string>

#include "http_api_rig.hpp"
#include "write_gate.hpp"

namespace vend::agent {
namespace {

std::string new_order(Agent& agent) {
  auto created = post_json(agent, "/v1/orders", R"({"device":"vm-http-1","slot":1})");
  Json order = body_of(created);
  REQUIRE(created->status == 201);
  return order["id"];
}

std::string pay_path(const std::string& id) { return "/v1/orders/" + id + "/payment"; }

std::string metrics_of(Agent& agent) {
  auto r = agent.client().Get("/metrics");
  REQUIRE(r);
  return r->body;
}

// The gateway's clock and the agent's are 6 minutes apart (one of them lost
// NTP): the notifications are authentic and the money was taken, so each is
// recorded and honoured or refunded like any other; the skew is counted and
// logged for an operator.
TEST_CASE("a notification signed 6 minutes off the agent's clock is recorded and honoured") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  std::string id = new_order(agent);
  std::string body = R"({"payment_id":"pay-skew-1","amount_cents":250})";
  auto paid = post_json(agent, pay_path(id), body, signed_for(id, body, now_s() - 360));
  Json j = body_of(paid);
  CHECK(paid->status == 200);
  CHECK(j["payment_outcome"] == "applied");
  CHECK((j["state"] == "PAID" || j["state"] == "DISPATCHED"));

  // The agent's clock behind the gateway's: an amount that is not the price
  // is recorded and refunded, as it would be on time.
  std::string other = new_order(agent);
  std::string wrong = R"({"payment_id":"pay-skew-2","amount_cents":1})";
  Json refunded =
      body_of(post_json(agent, pay_path(other), wrong, signed_for(other, wrong, now_s() + 360)));
  CHECK(refunded["payment_outcome"] == "amount_mismatch_refunded");
  CHECK(refunded["state"] == "RESERVED");

  // Both are in the log (the answers came after the commit).
  auto applied = agent.repo().find_payment("pay-skew-1");
  REQUIRE(applied.ok());
  REQUIRE(applied->has_value());
  CHECK((*applied)->order_id == id);
  auto refunds = agent.repo().refunds_of(other);
  REQUIRE(refunds.ok());
  REQUIRE(refunds->size() == 1);
  CHECK((*refunds)[0].payment_id == "pay-skew-2");

  CHECK(metrics_of(agent).find("vend_payment_clock_skew_total 2") != std::string::npos);
  CHECK(agent.log().contains("from the agent's clock", LogLevel::kWarn));
  // Within the tolerance: not counted.
  std::string third = new_order(agent);
  std::string on_time = R"({"payment_id":"pay-on-time","amount_cents":250})";
  CHECK(post_json(agent, pay_path(third), on_time, signed_for(third, on_time, now_s() - 299))
            ->status == 200);
  CHECK(metrics_of(agent).find("vend_payment_clock_skew_total 2") != std::string::npos);
}

// The agent answers 503 while its write queue is full; the gateway sends
// the very same request again (same signature) and the payment is applied.
TEST_CASE("a payment refused with 503 (write queue full) is applied when the gateway retries") {
  RepositoryOptions repo_options;
  repo_options.queue_max = 2;
  Agent agent(32, repo_options);
  Machine m;
  stock_machine(agent, m);
  std::string id = new_order(agent);
  std::string body = R"({"payment_id":"pay-retried","amount_cents":250})";
  httplib::Headers signature = signed_for(id, body);

  vend::test::WriteGate gate;  // holds the writer: what is submitted meanwhile waits
  REQUIRE(agent.repo().submit(gate.write()).ok());
  gate.wait_started();
  while (agent.repo().accepting()) {
    (void)agent.repo().submit([](WriteContext&) { return Status{}; });
  }
  expect_error(post_json(agent, pay_path(id), body, signature), 503, "unavailable",
               "write queue full");
  gate.open();
  agent.repo().flush();

  auto retried = post_json(agent, pay_path(id), body, signature);
  Json j = body_of(retried);
  CHECK(retried->status == 200);
  CHECK(j["payment_outcome"] == "applied");
  CHECK(j["payment_id"] == "pay-retried");
  // Its answer lost on the way (a timeout): the next retry gets the recorded answer.
  Json again = body_of(post_json(agent, pay_path(id), body, signature));
  CHECK(again["payment_outcome"] == "applied");
  auto payments = agent.repo().payments_of(id);
  REQUIRE(payments.ok());
  CHECK(payments->size() == 1);
  CHECK(agent.core().health().ok());
}

// The replay control of a signature keyed on its first v1 entry let a junk
// entry in front make "another" signature. Idempotency by payment id has
// no such gap: every copy gets the recorded answer and changes nothing.
TEST_CASE("a notification sent again, with or without junk v1 entries, gets the recorded answer") {
  Agent agent;
  Machine m;
  stock_machine(agent, m);
  std::string id = new_order(agent);
  std::string body = R"({"payment_id":"pay-once","amount_cents":250})";
  std::string header = webhook::sign(kSecret, now_s(), id, body);
  std::string t = header.substr(0, header.find(','));
  std::string mac = header.substr(header.find(",v1=") + 4);
  auto send = [&](const std::string& h) {
    return post_json(agent, pay_path(id), body, {{webhook::kHeader, h}});
  };
  Json first = body_of(send(header));
  REQUIRE(first["payment_outcome"] == "applied");
  const std::string copies[] = {
      header,
      t + ",v1=" + std::string(64, '0') + ",v1=" + mac,
      t + ",v1=" + std::string(64, '1') + ",v1=" + mac,
      t + ",v1=" + mac + ",v1=" + std::string(64, '2'),
  };
  for (const std::string& copy : copies) {
    INFO(copy);
    auto r = send(copy);
    Json j = body_of(r);
    CHECK(r->status == 200);
    CHECK(j["payment_outcome"] == "applied");
    CHECK(j["payment_id"] == "pay-once");
  }
  // A junk entry alone is no signature: refused, counted, logged once per
  // caller and minute.
  for (int i = 0; i < 3; ++i) {
    expect_error(send(t + ",v1=" + std::string(64, '0')), 401, "bad_signature", "does not match");
  }
  CHECK(metrics_of(agent).find("vend_payment_bad_signatures_total 3") != std::string::npos);
  int logged = 0;
  for (const auto& r : agent.log().records()) {
    logged += r.message.find("payment notification /v1/orders/" + id +
                             "/payment from 127.0.0.1 "
                             "refused: Vend-Signature does not match") != std::string::npos;
  }
  CHECK(logged == 1);
  auto payments = agent.repo().payments_of(id);
  REQUIRE(payments.ok());
  CHECK(payments->size() == 1);
  auto refunds = agent.repo().refunds_of(id);
  REQUIRE(refunds.ok());
  CHECK(refunds->empty());
  CHECK(pool_of_slot1(agent) == "2");
}

}  // namespace
}  // namespace vend::agent
