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

enum class Answer { kOk, kFail500, kSlowOk, kRefuse400 };

// The gateway's refund endpoint: checks every request's signature and
// idempotency key, answers from a script (kOk once it runs out), and counts
// what it refunded by refund id.
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
      std::lock_guard lock(mu_);
      ++requests_;
      if (!signed_ok) {
        ++bad_signatures_;
        res.status = 401;
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
