// The refund outbox against a real local HTTP server playing the payment
// gateway: it fails, delays past the agent's timeout (and so is told twice),
// refuses, and confirms. Every refund is delivered once as far as money
// goes (the gateway dedups by refund id), survives an agent crash while in
// flight, and one the gateway will not take ends in an alert.
#include <doctest/doctest.h>
#include <httplib.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent_rig.hpp"
#include "shell/refund_sender.hpp"
#include "vend/webhook.hpp"

using namespace vend;
using namespace vend::agent;
using vend::agent::test::AgentRig;

namespace {

constexpr const char* kSecret = "gateway-secret-for-refund-tests";

enum class Answer {
  kOk,
  kFail500,
  kSlowOk,
  kRefuse400,
  kKeyInUse409,     // another request with this idempotency key is being processed
  kTooMany429,      // Retry-After: 3
  kUnavailable503,  // no Retry-After
  kStatus,          // the next status of status_script()
};

// The gateway's refund endpoint: checks every request's signature and
// idempotency key, answers from a script (kOk once it runs out), and counts
// what it refunded by refund id. `on_request` runs at each request, before
// the answer.
class Gateway {
 public:
  explicit Gateway(const Clock& clock) : clock_(clock) {
    server_.Post("/refunds", [this](const httplib::Request& req, httplib::Response& res) {
      auto body = nlohmann::json::parse(req.body);
      std::string id = body.at("refund_id");
      // This gateway's policy: signed within 300 s of its clock.
      auto signed_s =
          webhook::authenticate(kSecret, req.get_header_value(webhook::kHeader), id, req.body);
      bool signed_ok = signed_s.ok() && std::llabs(clock_.wall_ms() / 1000 - *signed_s) <= 300 &&
                       req.get_header_value("Idempotency-Key") == id;
      Answer answer = next();
      if (on_request) on_request();
      std::lock_guard lock(mu_);
      ++requests_;
      if (!signed_ok) {
        ++bad_signatures_;
        res.status = 401;
        return;
      }
      if (answer == Answer::kKeyInUse409) {
        res.status = 409;
        res.set_content(R"({"error":"idempotency key in use"})", "application/json");
        return;
      }
      if (answer == Answer::kTooMany429) {
        res.status = 429;
        res.set_header("Retry-After", "3");
        return;
      }
      if (answer == Answer::kUnavailable503) {
        res.status = 503;
        return;
      }
      if (answer == Answer::kStatus) {
        res.status = statuses_.front();
        statuses_.pop_front();
        res.set_content(R"({"error":"no"})", "application/json");
        return;
      }
      if (answer == Answer::kFail500) {
        res.status = 500;
        return;
      }
      if (answer == Answer::kRefuse400) {
        res.status = 400;
        res.set_content(R"({"error":"payment not refundable"})", "application/json");
        return;
      }
      ++seen_[id];  // refunded (again: a repeat of a known id moves no money)
      if (answer == Answer::kSlowOk) {
        mu_.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(600));
        mu_.lock();
      }
      res.status = 200;
      res.set_content("{}", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Gateway() {
    server_.stop();
    thread_.join();
  }
  void script(std::initializer_list<Answer> answers) {
    std::lock_guard lock(mu_);
    script_.insert(script_.end(), answers);
  }
  void status_script(std::initializer_list<int> statuses) {
    std::lock_guard lock(mu_);
    for (int s : statuses) {
      script_.push_back(Answer::kStatus);
      statuses_.push_back(s);
    }
  }
  std::function<void()> on_request;  // set before the requests
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/refunds"; }
  int times_seen(const std::string& refund_id) {
    std::lock_guard lock(mu_);
    return seen_[refund_id];
  }
  int requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  int bad_signatures() {
    std::lock_guard lock(mu_);
    return bad_signatures_;
  }

 private:
  Answer next() {
    std::lock_guard lock(mu_);
    if (script_.empty()) return Answer::kOk;
    Answer a = script_.front();
    script_.pop_front();
    return a;
  }

  const Clock& clock_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::deque<Answer> script_;
  std::deque<int> statuses_;
  std::map<std::string, int> seen_;
  int requests_ = 0;
  int bad_signatures_ = 0;
};

std::unique_ptr<RefundSender> sender_for(AgentRig& rig, Gateway& gateway) {
  RefundSenderOptions o;
  o.url = gateway.url();
  o.secret = kSecret;
  o.timeout_ms = 300;
  auto s = RefundSender::create(*rig.core, o, rig.clock, rig.log);
  REQUIRE(s.ok());
  return std::move(s).value();
}

StoredRefund refund_of(AgentRig& rig, const std::string& payment_id) {
  auto all = rig.db().refunds(std::nullopt, 100);
  REQUIRE(all.ok());
  for (const auto& r : *all) {
    if (r.payment_id == payment_id) return r;
  }
  FAIL("no refund of " << payment_id);
  return {};
}

// A verified payment for an order the agent never had: refunded.
void refundable_payment(AgentRig& rig, const std::string& payment_id) {
  auto paid = rig.pay("ord-unknown-" + payment_id, payment_id, 150);
  REQUIRE(paid.ok());
  REQUIRE(paid->payment_outcome == "unknown_order_refunded");
}

}  // namespace

TEST_CASE("a refund is retried with backoff through failures and a lost answer, then delivered") {
  AgentRig rig;
  Gateway gateway(rig.clock);
  auto sender = sender_for(rig, gateway);
  gateway.script({Answer::kFail500, Answer::kSlowOk});
  refundable_payment(rig, "pay-a");
  CHECK(rig.core->take_metrics().refunds_pending == 1);

  CHECK(sender->run_once() == 1);  // 500
  StoredRefund r = refund_of(rig, "pay-a");
  CHECK(r.state == RefundState::kPending);
  CHECK(r.attempts == 1);
  CHECK(r.last_error.find("HTTP 500") != std::string::npos);
  CHECK(sender->run_once() == 0);  // backing off

  rig.clock.advance(1300);         // base 1 s + at most a quarter
  CHECK(sender->run_once() == 1);  // the gateway refunds, but answers too late
  CHECK(refund_of(rig, "pay-a").last_error.find("no answer") != std::string::npos);
  CHECK(gateway.times_seen(refund_id_of("pay-a")) == 1);

  rig.clock.advance(2600);
  CHECK(sender->run_once() == 1);  // told again: same refund id, so one refund
  CHECK(refund_of(rig, "pay-a").state == RefundState::kDelivered);
  CHECK(gateway.times_seen(refund_id_of("pay-a")) == 2);
  CHECK(gateway.bad_signatures() == 0);
  AgentMetrics m = rig.core->take_metrics();
  CHECK(m.refunds_pending == 0);
  CHECK(m.refund_attempts_total == 3);
  CHECK(m.refunds_delivered_total == 1);
  rig.clock.advance(600'000);
  CHECK(sender->run_once() == 0);  // delivered is done
}

// Issue 36: retry times were wall-clock, so a clock stepped back 10 minutes
// held every retry back 10 minutes.
TEST_CASE("a wall clock stepped back 10 minutes does not hold a refund's retry back") {
  AgentRig rig;
  Gateway gateway(rig.clock);
  auto sender = sender_for(rig, gateway);
  gateway.script({Answer::kFail500});
  refundable_payment(rig, "pay-s");
  CHECK(sender->run_once() == 1);  // 500
  rig.clock.set_wall_skew(-10 * 60 * 1000);
  rig.clock.advance(1300);  // base 1 s + at most a quarter, on the monotonic clock
  CHECK(sender->run_once() == 1);
  CHECK(refund_of(rig, "pay-s").state == RefundState::kDelivered);
}

TEST_CASE("a refund the gateway refuses, or that keeps failing, is given up to an alert") {
  AgentOptions options = vend::agent::test::test_agent_options();
  options.refund_max_attempts = 3;
  AgentRig rig(options);
  Gateway gateway(rig.clock);
  auto sender = sender_for(rig, gateway);
  gateway.script({Answer::kRefuse400});
  refundable_payment(rig, "pay-refused");
  CHECK(sender->run_once() == 1);
  CHECK(refund_of(rig, "pay-refused").state == RefundState::kGaveUp);

  gateway.script({Answer::kFail500, Answer::kFail500, Answer::kFail500});
  refundable_payment(rig, "pay-flaky");
  for (int i = 0; i < 3; ++i) {
    CHECK(sender->run_once() == 1);
    rig.clock.advance(10'000);
  }
  StoredRefund flaky = refund_of(rig, "pay-flaky");
  CHECK(flaky.state == RefundState::kGaveUp);
  CHECK(flaky.attempts == 3);
  AgentMetrics m = rig.core->take_metrics();
  CHECK(m.refunds_given_up_total == 2);
  CHECK(m.refunds_pending == 0);
  // One active alert per device (here: no device, the orders were unknown);
  // GET /v1/refunds?state=GAVE_UP lists each refund.
  bool alerted = false;
  for (const auto& [code, n] : m.alerts_active) alerted |= code == "refund_undeliverable" && n == 1;
  CHECK(alerted);
  CHECK(rig.db().refunds(RefundState::kGaveUp, 10)->size() == 2);
}

TEST_CASE("a refund in flight when the agent dies is delivered after the restart") {
  AgentRig rig;
  Gateway gateway(rig.clock);
  refundable_payment(rig, "pay-crash");
  auto taken = rig.core->take_due_refunds(10);  // the sender took it ...
  REQUIRE(taken.size() == 1);
  rig.crash_agent();  // ... and the process died before the answer
  rig.start_agent();
  auto sender = sender_for(rig, gateway);
  CHECK(sender->run_once() == 1);
  CHECK(refund_of(rig, "pay-crash").state == RefundState::kDelivered);
  CHECK(gateway.times_seen(refund_id_of("pay-crash")) == 1);
}

TEST_CASE("the refund URL must be http(s) with a host") {
  AgentRig rig;
  for (const char* bad : {"ftp://x/y", "127.0.0.1:80/refunds", "http:///refunds", ""}) {
    RefundSenderOptions o;
    o.url = bad;
    auto s = RefundSender::create(*rig.core, o, rig.clock, rig.log);
    CHECK(s.error().code == "bad_request");
  }
}

// Issue 36: a gateway's 409 "idempotency key in use" was refused for good.
TEST_CASE("409 key in use, 429 with its Retry-After and 503 are retried; refunded once") {
  AgentRig rig;
  Gateway gateway(rig.clock);
  auto sender = sender_for(rig, gateway);
  gateway.script({Answer::kKeyInUse409, Answer::kTooMany429, Answer::kUnavailable503});
  refundable_payment(rig, "pay-r");

  CHECK(sender->run_once() == 1);  // 409
  StoredRefund r = refund_of(rig, "pay-r");
  CHECK(r.state == RefundState::kPending);
  CHECK(r.last_error.find("HTTP 409 (conflict: idempotency key in use)") == 0);
  rig.clock.advance(1300);
  CHECK(sender->run_once() == 1);  // 429, Retry-After: 3
  CHECK(refund_of(rig, "pay-r").last_error.find("HTTP 429") == 0);
  rig.clock.advance(2600);         // past the backoff (2 s + at most 0.5 s) ...
  CHECK(sender->run_once() == 0);  // ... not past the gateway's 3 s
  rig.clock.advance(500);
  CHECK(sender->run_once() == 1);  // 503
  CHECK(refund_of(rig, "pay-r").last_error.find("HTTP 503") == 0);
  rig.clock.advance(5100);  // 4 s + at most 1 s
  CHECK(sender->run_once() == 1);
  r = refund_of(rig, "pay-r");
  CHECK(r.state == RefundState::kDelivered);
  CHECK(r.attempts == 4);
  CHECK(gateway.requests() == 4);
  CHECK(gateway.times_seen(refund_id_of("pay-r")) == 1);
  CHECK(rig.core->take_metrics().refunds_given_up_total == 0);
}

TEST_CASE("a definite refusal (400, 401, 403, 404, 422) is given up at once, saying why") {
  AgentRig rig;
  Gateway gateway(rig.clock);
  auto sender = sender_for(rig, gateway);
  // Delivered in payment id order: pay-d1 gets 400, pay-d2 401 ...
  gateway.status_script({400, 401, 403, 404, 422});
  for (int i = 1; i <= 5; ++i) refundable_payment(rig, "pay-d" + std::to_string(i));
  CHECK(sender->run_once() == 5);
  const std::pair<const char*, const char*> expected[] = {
      {"pay-d1", "HTTP 400 (bad request): {\"error\":\"no\"}"},
      {"pay-d2", "HTTP 401 (unauthorized: check the gateway secret)"},
      {"pay-d3", "HTTP 403 (forbidden)"},
      {"pay-d4", "HTTP 404 (not found: the gateway knows no such payment)"},
      {"pay-d5", "HTTP 422 (unprocessable)"}};
  for (const auto& [payment, why] : expected) {
    StoredRefund r = refund_of(rig, payment);
    CHECK(r.state == RefundState::kGaveUp);
    CHECK(r.attempts == 1);
    CHECK_MESSAGE(r.last_error.find(why) == 0, r.last_error);
  }
  CHECK(rig.core->take_metrics().refunds_given_up_total == 5);
  rig.clock.advance(600'000);
  CHECK(sender->run_once() == 0);
}

// Issue 36: an outcome the core refused (its call queue full) was dropped,
// and the refund stayed in flight -- never sent again -- until a restart.
TEST_CASE("an outcome the core cannot take is offered again, never dropped nor left in flight") {
  AgentRig rig;
  Gateway gateway(rig.clock);
  auto sender = sender_for(rig, gateway);
  refundable_payment(rig, "pay-held");
  // The core's inbox fills while the request is at the gateway.
  gateway.on_request = [&] { rig.gate->refusing = true; };
  CHECK(sender->run_once() == 1);
  CHECK(sender->held() == 1);
  CHECK(sender->run_once() == 0);  // still refused: offered again, nothing new sent
  CHECK(sender->held() == 1);
  CHECK(gateway.requests() == 1);
  CHECK(rig.log.contains("the core cannot record the gateway's answer now"));

  rig.gate->refusing = false;
  gateway.on_request = nullptr;
  CHECK(refund_of(rig, "pay-held").state == RefundState::kPending);
  CHECK(sender->run_once() == 0);  // the held answer is taken; nothing else is due
  CHECK(sender->held() == 0);
  StoredRefund r = refund_of(rig, "pay-held");
  CHECK(r.state == RefundState::kDelivered);
  CHECK(r.attempts == 1);
  CHECK(gateway.requests() == 1);
  AgentMetrics m = rig.core->take_metrics();
  CHECK(m.refunds_pending == 0);
  CHECK(m.refunds_delivered_total == 1);
}

// The same, when what the core cannot take is a retry: it is retried.
TEST_CASE("a held retry is taken later and the refund is tried again") {
  AgentRig rig;
  Gateway gateway(rig.clock);
  auto sender = sender_for(rig, gateway);
  gateway.script({Answer::kUnavailable503});
  refundable_payment(rig, "pay-held-retry");
  gateway.on_request = [&] { rig.gate->refusing = true; };
  CHECK(sender->run_once() == 1);
  rig.gate->refusing = false;
  gateway.on_request = nullptr;
  CHECK(sender->run_once() == 0);  // taken: PENDING, attempt 1, backing off
  StoredRefund r = refund_of(rig, "pay-held-retry");
  CHECK(r.state == RefundState::kPending);
  CHECK(r.attempts == 1);
  rig.clock.advance(1300);
  CHECK(sender->run_once() == 1);
  CHECK(refund_of(rig, "pay-held-retry").state == RefundState::kDelivered);
}

// Between the gateway's answer and its commit: the answer is held (the
// core refused it) when the process dies. The refund is still PENDING in
// the log: sent again after the restart, under the same idempotency key.
TEST_CASE("killed between the gateway's answer and its commit: the same key again, one refund") {
  AgentRig rig;
  Gateway gateway(rig.clock);
  refundable_payment(rig, "pay-kill");
  {
    auto sender = sender_for(rig, gateway);
    gateway.on_request = [&] { rig.gate->refusing = true; };
    CHECK(sender->run_once() == 1);
    CHECK(sender->held() == 1);
  }
  gateway.on_request = nullptr;
  rig.crash_agent();
  rig.start_agent();
  CHECK(refund_of(rig, "pay-kill").state == RefundState::kPending);
  auto sender = sender_for(rig, gateway);
  CHECK(sender->run_once() == 1);
  CHECK(refund_of(rig, "pay-kill").state == RefundState::kDelivered);
  CHECK(gateway.requests() == 2);
  CHECK(gateway.times_seen(refund_id_of("pay-kill")) == 2);  // the same refund id twice
  CHECK(gateway.bad_signatures() == 0);                      // each with the key the gateway checks
}
