// The order rate limits of the HTTP API: POST /v1/orders over the machine's
// or the client's bucket is answered 429 with Retry-After and the limit's
// name, counted in /metrics; a dead Redis lets orders through (fail open).
// The limiter runs on a ManualClock, so waits are exact. Orders name
// machines the core knows but that are offline: an order the limits let
// through is answered 409 device_offline by the core, one they stop never
// reaches it. Machine ids the core does not know share one bucket and are
// answered 404 without the core.
#include <doctest/doctest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "core/agent_core.hpp"
#include "http/http_api.hpp"
#include "http/http_server.hpp"
#include "limits/embedded_rate_limiter.hpp"
#include "limits/redis_rate_limiter.hpp"
#include "repository/repository.hpp"
#include "shell/core_thread.hpp"
#include "shell/shell_options.hpp"
#include "test_support.hpp"
#include "vend/in_memory_bus.hpp"

namespace vend::agent {
namespace {

using Json = nlohmann::json;

// A core and its HTTP API on loopback, with `limiter` and the two limits.
class LimitedAgent {
 public:
  LimitedAgent(RateLimiter& limiter, RateLimit machine, RateLimit client)
      : transport_(bus_.make_client("vend-agent")) {
    auto repo = Repository::open(dir_.file("agent.db"), RepositoryOptions{}, log_);
    REQUIRE_MESSAGE(repo.ok(), vend::test::error_text(repo));
    repo_ = std::move(repo).value();
    // The core's one thread, as in vend-agent: HTTP workers hand it steps.
    core_ = std::make_unique<AgentCore>(*repo_, *transport_, clock_, random_, log_, AgentOptions{},
                                        &core_thread_);
    REQUIRE(core_->start().ok());
    // Connected to the broker (no reservation without it); the machines
    // never come online, so orders that pass the limits answer
    // device_offline.
    AgentCore& core = *core_;
    core_thread_.start(
        CoreThread::Handlers{nullptr, [&core](bool up) { core.on_connection(up); }, nullptr});
    transport_->on_connection([this](bool up) { core_thread_.push_connection(up); });
    REQUIRE(transport_->connect().ok());
    REQUIRE(core_thread_.run([] {}));  // after the connection change: the core knows
    for (const char* id : {"vm-x", "vm-y", "vm-z"}) {
      REQUIRE(core_->provision_device(id, {{1, "cola", 150, 10}}).ok());
    }
    HttpApiOptions options;
    options.operator_token = "operator-token-for-tests-0123456789";
    options.gateway_secret = "gateway-secret-for-tests";
    options.rate_limiter = &limiter;
    options.machine_limit = machine;
    options.client_limit = client;
    api_ = std::make_unique<HttpApi>(*core_, options, clock_, log_);
    server_ = std::make_unique<HttpServer>(HttpServerLimits{}, api_->handler(), clock_, log_);
    auto port = server_->bind("127.0.0.1", 0);
    REQUIRE_MESSAGE(port.ok(), vend::test::error_text(port));
    port_ = *port;
    REQUIRE(server_->start().ok());
  }
  ~LimitedAgent() {
    server_->stop();
    core_thread_.stop();
  }
  LimitedAgent(const LimitedAgent&) = delete;
  LimitedAgent& operator=(const LimitedAgent&) = delete;

  // POST /v1/orders for `device`, as X-Client-Id `client` ("": none).
  httplib::Result order(const std::string& device, const std::string& client = "",
                        const std::string& body = "") {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    httplib::Headers headers;
    if (!client.empty()) headers.emplace("X-Client-Id", client);
    std::string b = body.empty() ? R"({"device":")" + device + R"(","slot":1})" : body;
    return c.Post("/v1/orders", headers, b, "application/json");
  }
  std::string metrics() {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/metrics");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    return r->body;
  }

 private:
  test::TempDir dir_;
  MemoryLogger log_;
  SystemClock clock_;
  SecureRandom random_;
  InMemoryBus bus_;
  std::unique_ptr<InMemoryClient> transport_;
  std::unique_ptr<Repository> repo_;
  CoreThread core_thread_{CoreThread::Limits{}, std::chrono::milliseconds(0), log_};
  std::unique_ptr<AgentCore> core_;
  std::unique_ptr<HttpApi> api_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

// Let through by the limits: the core's answer for an offline machine.
void expect_passed(const httplib::Result& r) {
  REQUIRE(r);
  INFO(r->body);
  CHECK(r->status == 409);
  CHECK(Json::parse(r->body)["error"]["code"] == "device_offline");
  CHECK_FALSE(r->has_header("Retry-After"));
}

// 429 naming `limit`, with Retry-After `retry_after_s`.
void expect_limited(const httplib::Result& r, const std::string& limit,
                    const std::string& retry_after_s) {
  REQUIRE(r);
  INFO(r->body);
  CHECK(r->status == 429);
  CHECK(r->get_header_value("Retry-After") == retry_after_s);
  Json j = Json::parse(r->body);
  CHECK(j["error"]["code"] == "rate_limited");
  CHECK(j["error"]["limit"] == limit);
  CHECK(j["error"]["message"].get<std::string>().find("retry after " + retry_after_s + " s") !=
        std::string::npos);
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE("orders over the machine limit: 429, Retry-After, limit machine") {
  ManualClock clock;
  EmbeddedRateLimiter limiter(clock);
  LimitedAgent agent(limiter, RateLimit{1, 2}, RateLimit{1000, 1000});
  expect_passed(agent.order("vm-x", "phone-1"));
  expect_passed(agent.order("vm-x", "phone-2"));
  auto r = agent.order("vm-x", "phone-3");
  expect_limited(r, "machine", "1");
  CHECK(Json::parse(r->body)["error"]["message"].get<std::string>().find("machine 'vm-x'") !=
        std::string::npos);
  expect_passed(agent.order("vm-y", "phone-3"));  // another machine, another bucket
  clock.advance(1000);
  expect_passed(agent.order("vm-x", "phone-3"));
  expect_limited(agent.order("vm-x", "phone-4"), "machine", "1");
  std::string m = agent.metrics();
  CHECK(has_line(m, "vend_rate_limited_total{limit=\"machine\"} 2"));
  CHECK(has_line(m, "vend_rate_limited_total{limit=\"client\"} 0"));
  CHECK(has_line(m, "vend_rate_limiter_errors_total 0"));
}

TEST_CASE("orders over the client limit: per X-Client-Id, else per peer address") {
  ManualClock clock;
  EmbeddedRateLimiter limiter(clock);
  LimitedAgent agent(limiter, RateLimit{1000, 1000}, RateLimit{0.25, 2});
  expect_passed(agent.order("vm-x", "phone-a"));
  expect_passed(agent.order("vm-y", "phone-a"));
  expect_limited(agent.order("vm-z", "phone-a"), "client", "4");  // 1 token per 4 s
  clock.advance(1500);
  expect_limited(agent.order("vm-z", "phone-a"), "client", "3");  // 2.5 s, rounded up
  expect_passed(agent.order("vm-x", "phone-b"));
  // Without X-Client-Id the peer address is the client; an id that looks
  // like the address is another client.
  expect_passed(agent.order("vm-x"));
  expect_passed(agent.order("vm-x"));
  expect_limited(agent.order("vm-x"), "client", "4");
  expect_passed(agent.order("vm-x", "127.0.0.1"));
  std::string m = agent.metrics();
  CHECK(has_line(m, "vend_rate_limited_total{limit=\"client\"} 3"));
  CHECK(has_line(m, "vend_rate_limited_total{limit=\"machine\"} 0"));
}

TEST_CASE("shipped defaults: a flash sale of 100 customers on one machine passes") {
  ManualClock clock;  // all 100 at the same instant
  EmbeddedRateLimiter limiter(clock);
  HttpApiOptions defaults;
  LimitedAgent agent(limiter, defaults.machine_limit, defaults.client_limit);
  for (int i = 0; i < 100; ++i) expect_passed(agent.order("vm-x", "phone-" + std::to_string(i)));
  // Each may retry once at once as well; then the machine's burst of 200 is used up.
  for (int i = 0; i < 100; ++i) expect_passed(agent.order("vm-x", "phone-" + std::to_string(i)));
  expect_limited(agent.order("vm-x", "phone-0"), "machine", "1");
  // Without X-Client-Id all share the test's address: 20 at once.
  for (int i = 0; i < 20; ++i) expect_passed(agent.order("vm-y"));
  expect_limited(agent.order("vm-y"), "client", "1");
}

TEST_CASE("a client over its limit does not use up the machine's bucket") {
  ManualClock clock;
  EmbeddedRateLimiter limiter(clock);
  LimitedAgent agent(limiter, RateLimit{0.001, 3}, RateLimit{0.001, 1});
  expect_passed(agent.order("vm-x", "greedy"));
  for (int i = 0; i < 10; ++i) expect_limited(agent.order("vm-x", "greedy"), "client", "1000");
  expect_passed(agent.order("vm-x", "shopper-1"));
  expect_passed(agent.order("vm-x", "shopper-2"));
  expect_limited(agent.order("vm-x", "shopper-3"), "machine", "1000");
}

TEST_CASE("bad requests take no token; a limit with rate 0 is off") {
  ManualClock clock;
  EmbeddedRateLimiter limiter(clock);
  LimitedAgent agent(limiter, RateLimit{0, 1}, RateLimit{1, 2});
  for (int i = 0; i < 5; ++i) {
    auto r = agent.order("vm-x", "phone-a", R"({"device":"vm-x"})");
    REQUIRE(r);
    CHECK(r->status == 400);
  }
  expect_passed(agent.order("vm-x", "phone-a"));
  expect_passed(agent.order("vm-x", "phone-a"));
  expect_limited(agent.order("vm-x", "phone-a"), "client", "1");
  for (int i = 0; i < 20; ++i) expect_passed(agent.order("vm-x", "phone-" + std::to_string(i)));
}

TEST_CASE("machine ids the core does not know share one bucket; answered 404 without the core") {
  ManualClock clock;
  EmbeddedRateLimiter limiter(clock);
  LimitedAgent agent(limiter, RateLimit{1, 3}, RateLimit{1000, 1000});
  // Every new id would have held a full bucket of its own: a flood of random
  // ids was never limited, and each reached the core.
  for (int i = 0; i < 3; ++i) {
    auto r = agent.order("vm-random-" + std::to_string(i), "phone-" + std::to_string(i));
    REQUIRE(r);
    CHECK(r->status == 404);
    CHECK(Json::parse(r->body)["error"]["code"] == "not_found");
  }
  auto r = agent.order("vm-random-9", "phone-9");
  expect_limited(r, "machine", "1");
  CHECK(Json::parse(r->body)["error"]["message"].get<std::string>().find(
            "machines this agent does not know") != std::string::npos);
  CHECK(limiter.bucket_count() <= 1 + 4);  // the shared one and the clients'
  // A known machine keeps its own bucket.
  expect_passed(agent.order("vm-x", "phone-10"));
  clock.advance(1000);
  auto again = agent.order("vm-random-10", "phone-11");
  REQUIRE(again);
  CHECK(again->status == 404);
}

TEST_CASE("a dead Redis lets every order through, counted in /metrics") {
  SystemClock clock;
  NullLogger log;
  RedisLimiterOptions options;
  options.port = test::free_port();  // nothing listens there
  RedisRateLimiter limiter(options, clock, log);
  LimitedAgent agent(limiter, RateLimit{1, 1}, RateLimit{1, 1});
  for (int i = 0; i < 5; ++i) expect_passed(agent.order("vm-x", "phone-a"));
  std::string m = agent.metrics();
  CHECK(has_line(m, "vend_rate_limiter_errors_total 5"));
  CHECK(has_line(m, "vend_rate_limited_total{limit=\"machine\"} 0"));
}

TEST_CASE("a shared Redis: two agents enforce one machine bucket") {
  test::RedisServer server;
  SystemClock clock;
  NullLogger log;
  auto options = RedisLimiterOptions::parse_url(server.url());
  REQUIRE(options.ok());
  RedisRateLimiter limiter_a(*options, clock, log);
  RedisRateLimiter limiter_b(*options, clock, log);
  LimitedAgent a(limiter_a, RateLimit{0.001, 2}, RateLimit{1000, 1000});
  LimitedAgent b(limiter_b, RateLimit{0.001, 2}, RateLimit{1000, 1000});
  expect_passed(a.order("vm-x", "phone-1"));
  expect_passed(b.order("vm-x", "phone-2"));
  expect_limited(a.order("vm-x", "phone-3"), "machine", "1000");
  expect_limited(b.order("vm-x", "phone-4"), "machine", "1000");
  CHECK(has_line(b.metrics(), "vend_rate_limiter_errors_total 0"));
}

}  // namespace vend::agent

namespace vend::agent {

TEST_CASE("vend-agent options of the rate limits and --redis") {
  auto defaults = parse_options({});
  REQUIRE(defaults.ok());
  CHECK(defaults->machine_rate_per_s == 200);
  CHECK(defaults->machine_burst == 200);
  CHECK(defaults->client_rate_per_s == 10);
  CHECK(defaults->client_burst == 20);
  CHECK_FALSE(defaults->shared_redis.has_value());
  auto o = parse_options({"--machine-rate-per-s", "0", "--machine-burst=5", "--client-rate-per-s",
                          "3", "--client-burst", "7", "--redis", "redis://10.0.0.9:6390",
                          "--redis-timeout-ms", "20"});
  REQUIRE_MESSAGE(o.ok(), vend::test::error_text(o));
  CHECK(o->machine_rate_per_s == 0);
  CHECK(o->machine_burst == 5);
  CHECK(o->client_rate_per_s == 3);
  CHECK(o->client_burst == 7);
  REQUIRE(o->shared_redis.has_value());
  CHECK(o->shared_redis->address() == "10.0.0.9:6390");
  CHECK(o->redis_timeout_ms == 20);
  CHECK(parse_options({"--redis", "10.0.0.9"}).error().message.find("--redis: redis url") == 0);
  CHECK(parse_options({"--client-burst", "0"}).error().message.find("--client-burst") == 0);
  CHECK(parse_options({"--machine-rate-per-s", "-1"}).error().code == "bad_usage");
  CHECK(usage().find("--machine-rate-per-s") != std::string::npos);
  CHECK(usage().find("--redis redis://HOST:PORT") != std::string::npos);
}

}  // namespace vend::agent
