// The refund outbox with the real vend-agent (and a real mosquitto) against
// a fake payment gateway in this test (issue 36): the gateway answers 409
// "idempotency key in use", 429 with a Retry-After and 503 in turn, and the
// refund is tried again until it is confirmed; a 400 is given up at once,
// its reason stored; and an agent killed with SIGKILL after the gateway
// refunded, before it recorded the answer, sends the refund again after
// its restart under the same idempotency key, which the gateway
// deduplicates.
#include <doctest/doctest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "e2e_support.hpp"
#include "test_support.hpp"
#include "vend/webhook.hpp"

namespace vend::agent {
namespace {

using test_rig::eventually;
using test_rig::trim;

using namespace std::chrono_literals;
using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One answer of the gateway: a status, and a Retry-After ("" = none).
struct Reply {
  int status = 200;
  std::string retry_after;
};

// One request the gateway received.
struct Seen {
  std::string refund_id;
  std::string idempotency_key;
  bool signed_ok = false;
  SteadyClock::time_point at;
};

// The gateway's refund endpoint: answers each refund id from its script
// (200 once it runs out), counts a refund id as refunded once (a repeat of
// a known one moves no money), and runs `before_answer` (if set) after it
// has refunded and before it answers.
class Gateway {
 public:
  Gateway() {
    server_.Post("/refunds", [this](const httplib::Request& req, httplib::Response& res) {
      std::string id = Json::parse(req.body).at("refund_id");
      std::function<void()> hook;
      Reply reply;
      {
        std::lock_guard lock(mu_);
        bool ok =
            webhook::authenticate(secret_, req.get_header_value(webhook::kHeader), id, req.body)
                .ok();
        seen_.push_back(Seen{id, req.get_header_value("Idempotency-Key"), ok, SteadyClock::now()});
        auto& script = scripts_[id];
        if (!script.empty()) {
          reply = script.front();
          script.pop_front();
        }
        if (reply.status == 200) {
          refunded_[id] = true;
          hook = std::move(before_answer_[id]);
          before_answer_.erase(id);
        }
      }
      if (hook) hook();
      res.status = reply.status;
      if (!reply.retry_after.empty()) res.set_header("Retry-After", reply.retry_after);
      res.set_content(reply.status == 400 ? R"({"error":"payment not refundable"})" : "{}",
                      "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    REQUIRE(port_ > 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Gateway() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/refunds"; }
  void set_secret(const std::string& secret) {
    std::lock_guard lock(mu_);
    secret_ = secret;
  }
  void script(const std::string& refund_id, std::vector<Reply> replies) {
    std::lock_guard lock(mu_);
    scripts_[refund_id].insert(scripts_[refund_id].end(), replies.begin(), replies.end());
  }
  void before_answer(const std::string& refund_id, std::function<void()> hook) {
    std::lock_guard lock(mu_);
    before_answer_[refund_id] = std::move(hook);
  }
  std::vector<Seen> seen(const std::string& refund_id) {
    std::lock_guard lock(mu_);
    std::vector<Seen> out;
    for (const auto& s : seen_) {
      if (s.refund_id == refund_id) out.push_back(s);
    }
    return out;
  }
  int refunds() {
    std::lock_guard lock(mu_);
    return static_cast<int>(refunded_.size());
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::string secret_;
  std::map<std::string, std::deque<Reply>> scripts_;
  std::map<std::string, std::function<void()>> before_answer_;
  std::vector<Seen> seen_;
  std::map<std::string, bool> refunded_;
};

// vend-agent with --refund-url, on its own database in `dir`.
class Agent {
 public:
  Agent(test::TempDir& dir, const std::string& broker_url, const std::string& refund_url)
      : dir_(dir), port_(test::free_port()) {
    std::string http = "127.0.0.1:" + std::to_string(port_);
    argv_ = {test::binary_path("cloud-agent/vend-agent"),
             "--http",
             http,
             "--mqtt",
             broker_url,
             "--db",
             dir.file("agent.db"),
             "--operator-token-file",
             dir.file("operator.token"),
             "--gateway-secret-file",
             dir.file("gateway.secret"),
             "--refund-url",
             refund_url};
  }
  void start() {
    child_ = std::make_unique<test::Child>(argv_, dir_.file("agent.log"));
    REQUIRE_MESSAGE(eventually(
                        [&] {
                          httplib::Client c("127.0.0.1", port_);
                          auto r = c.Get("/healthz");
                          return r && r->status == 200;
                        },
                        15s),
                    log());
    token_ = trim(test::read_file(dir_.file("operator.token")));
  }
  pid_t pid() const { return child_->pid(); }
  int wait(std::chrono::milliseconds timeout) { return child_->wait(timeout); }
  void stop() {
    child_->signal(SIGTERM);
    CHECK_MESSAGE(child_->wait(10s) == 0, log());
  }
  std::string log() const { return test::read_file(dir_.file("agent.log")); }
  std::string secret() const { return trim(test::read_file(dir_.file("gateway.secret"))); }

  // A verified payment for an order no agent has: recorded and refunded.
  void pay_unknown_order(const std::string& order_id, const std::string& payment_id) {
    std::string body = R"({"payment_id":")" + payment_id + R"(","amount_cents":150})";
    httplib::Headers headers = {
        {webhook::kHeader, webhook::sign(secret(), now_s(), order_id, body)}};
    httplib::Client c("127.0.0.1", port_);
    auto r =
        c.Post(("/v1/orders/" + order_id + "/payment").c_str(), headers, body, "application/json");
    REQUIRE_MESSAGE(r, httplib::to_string(r.error()));
    INFO(r->body);
    REQUIRE(r->status == 200);
    CHECK(Json::parse(r->body)["payment_outcome"] == "unknown_order_refunded");
  }
  // The refund of `payment_id` as GET /v1/refunds lists it (null: none).
  Json refund(const std::string& payment_id) {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/v1/refunds?limit=100", {{"Authorization", "Bearer " + token_}});
    if (!r || r->status != 200) return nullptr;
    Json list = Json::parse(r->body);
    for (const auto& f : list["refunds"]) {
      if (f["payment_id"] == payment_id) return f;
    }
    return nullptr;
  }
  bool refund_state_is(const std::string& payment_id, const std::string& state) {
    Json f = refund(payment_id);
    return !f.is_null() && f["state"] == state;
  }
  std::string metrics() {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/metrics");
    return r ? r->body : "";
  }

 private:
  test::TempDir& dir_;
  int port_;
  std::vector<std::string> argv_;
  std::unique_ptr<test::Child> child_;
  std::string token_;
};

TEST_CASE("vend-agent: 409, 429 with Retry-After and 503 are retried to one refund; 400 gives up") {
  test::TempDir dir;
  test::MosquittoServer broker;
  Gateway gateway;
  Agent agent(dir, broker.url(), gateway.url());
  gateway.script("rfd-pay-e2e-a", {{409, ""}, {429, "3"}, {503, ""}});  // then 200
  gateway.script("rfd-pay-e2e-b", {{400, ""}});
  agent.start();
  gateway.set_secret(agent.secret());

  agent.pay_unknown_order("ord-e2e-a", "pay-e2e-a");
  agent.pay_unknown_order("ord-e2e-b", "pay-e2e-b");
  // 1 s, then the gateway's 3 s (over the 2 s backoff), then 4 s: ~9 s.
  REQUIRE_MESSAGE(eventually([&] { return agent.refund_state_is("pay-e2e-a", "DELIVERED"); }, 30s),
                  agent.log());
  Json a = agent.refund("pay-e2e-a");
  CHECK(a["attempts"] == 4);
  auto seen = gateway.seen("rfd-pay-e2e-a");
  REQUIRE(seen.size() == 4);
  for (const auto& s : seen) {
    CHECK(s.idempotency_key == "rfd-pay-e2e-a");
    CHECK(s.signed_ok);
  }
  CHECK(seen[2].at - seen[1].at >= 3s);  // the 429's Retry-After was honoured

  REQUIRE(eventually([&] { return agent.refund_state_is("pay-e2e-b", "GAVE_UP"); }, 10s));
  Json b = agent.refund("pay-e2e-b");
  CHECK(b["attempts"] == 1);
  CHECK(b["last_error"].get<std::string>().find("HTTP 400 (bad request)") == 0);
  CHECK(gateway.seen("rfd-pay-e2e-b").size() == 1);
  CHECK(gateway.refunds() == 1);

  std::string m = agent.metrics();
  CHECK(m.find("vend_refunds_delivered_total 1\n") != std::string::npos);
  CHECK(m.find("vend_refunds_given_up_total 1\n") != std::string::npos);
  CHECK(m.find("vend_refunds_pending 0\n") != std::string::npos);
  CHECK(agent.log().find("rfd-pay-e2e-b refused by the gateway: HTTP 400") != std::string::npos);
  agent.stop();
}

TEST_CASE("vend-agent killed after the gateway refunded, before it recorded: the same key again") {
  test::TempDir dir;
  test::MosquittoServer broker;
  Gateway gateway;
  Agent agent(dir, broker.url(), gateway.url());
  agent.start();
  gateway.set_secret(agent.secret());
  // The gateway refunds, then the agent dies before the answer is recorded.
  pid_t pid = agent.pid();
  gateway.before_answer("rfd-pay-e2e-k", [pid] { ::kill(pid, SIGKILL); });
  agent.pay_unknown_order("ord-e2e-k", "pay-e2e-k");
  CHECK(agent.wait(15s) == 128 + SIGKILL);
  REQUIRE(gateway.seen("rfd-pay-e2e-k").size() == 1);

  agent.start();  // the same database: the refund is still PENDING there
  REQUIRE_MESSAGE(eventually([&] { return agent.refund_state_is("pay-e2e-k", "DELIVERED"); }, 20s),
                  agent.log());
  auto seen = gateway.seen("rfd-pay-e2e-k");
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].idempotency_key == "rfd-pay-e2e-k");
  CHECK(seen[1].idempotency_key == "rfd-pay-e2e-k");
  CHECK(seen[1].signed_ok);
  CHECK(gateway.refunds() == 1);  // deduplicated by the key: refunded once
  agent.stop();
}

}  // namespace
}  // namespace vend::agent
