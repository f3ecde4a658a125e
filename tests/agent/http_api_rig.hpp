// The HTTP API test rig (http_api_test.cpp, http_ops_test.cpp): a real
// in-process AgentCore (temp-dir SQLite, in-memory MQTT through the ops tee
// of the console's event stream) behind a real HttpServer on loopback, and
// a simulated machine played by signed messages handed to the core.
#pragma once

#include <doctest/doctest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "accounts/accounts.hpp"
#include "core/agent_core.hpp"
#include "http/http_api.hpp"
#include "http/http_server.hpp"
#include "http/ops_series.hpp"
#include "http/ops_stream.hpp"
#include "repository/repository.hpp"
#include "shell/core_thread.hpp"
#include "test_support.hpp"
#include "vend/crypto.hpp"
#include "vend/in_memory_bus.hpp"
#include "vend/protocol.hpp"
#include "vend/topics.hpp"
#include "vend/webhook.hpp"

namespace vend::agent {
namespace {

using Json = nlohmann::json;

constexpr const char* kToken = "operator-token-for-tests-0123456789";
constexpr const char* kSecret = "gateway-secret-for-tests";
constexpr const char* kDevice = "vm-http-1";

// InMemoryBus is single-threaded; HTTP workers publish through the core
// concurrently, so every call into the client goes through one mutex.
class LockedTransport final : public Transport {
 public:
  explicit LockedTransport(InMemoryBus& bus) : client_(bus.make_client("vend-agent")) {}
  void on_message(MessageHandler h) override { client_->on_message(std::move(h)); }
  void on_connection(ConnectionHandler h) override { client_->on_connection(std::move(h)); }
  Status connect() override {
    return locked([&] { return client_->connect(); });
  }
  void disconnect() override {
    std::lock_guard lock(mu_);
    client_->disconnect();
  }
  bool connected() const override {
    std::lock_guard lock(mu_);
    return client_->connected();
  }
  Status publish(const Message& m) override {
    return locked([&] { return client_->publish(m); });
  }
  Status subscribe(const std::string& f, int qos) override {
    return locked([&] { return client_->subscribe(f, qos); });
  }

 private:
  template <typename Fn>
  Status locked(Fn fn) {
    std::lock_guard lock(mu_);
    return fn();
  }
  mutable std::mutex mu_;
  std::unique_ptr<InMemoryClient> client_;
};

// An agent core behind a real HTTP server on an ephemeral loopback port.
class Agent {
 public:
  // What the shell would report; a test may change them.
  struct ShellState {
    std::atomic<int64_t> mqtt_down_ms{0};
    std::atomic<size_t> inbound_messages{0};
  };

  // `workers`: the API's handler threads (HttpApiOptions::worker_threads);
  // `repo_options`: the repository's (a small queue_max fills it at will).
  explicit Agent(size_t workers = 32, RepositoryOptions repo_options = {}) : transport_(bus_) {
    auto repo = Repository::open(dir_.file("agent.db"), repo_options, log_);
    REQUIRE_MESSAGE(repo.ok(), vend::test::error_text(repo));
    repo_ = std::move(repo).value();
    accounts_ = std::make_unique<Accounts>(*repo_, clock_, log_);
    hub_.add_listener([this](const std::string& kind, const std::string& payload) {
      series_.offer(kind, payload);
    });
    core_ = std::make_unique<AgentCore>(*repo_, tee_, clock_, random_, log_, AgentOptions{},
                                        &core_thread_);
    REQUIRE(core_->start().ok());
    AgentCore& core = *core_;
    core_thread_.start(CoreThread::Handlers{nullptr, [&core](bool up) { core.on_connection(up); },
                                            [&core] { core.tick(); }});
    transport_.on_connection([this](bool up) { core_thread_.push_connection(up); });
    REQUIRE(transport_.connect().ok());
    REQUIRE(core_thread_.run([] {}));  // after the connection change: the core knows
    HttpApiOptions options;
    options.operator_token = kToken;
    options.accounts = accounts_.get();
    options.gateway_secret = kSecret;
    options.mqtt_connected = [this] { return transport_.connected(); };
    options.mqtt_down_ms = [this] { return shell.mqtt_down_ms.load(); };
    options.broker_down_grace_ms = 30'000;
    options.inbound_fill = [this] {
      return HttpApiOptions::InboundFill{shell.inbound_messages.load(), 10'000, 0, 1 << 26};
    };
    options.server_stats = [this] { return server_->stats(); };
    options.worker_threads = workers;
    options.ops_hub = &hub_;
    options.ops_series = &series_;
    api_ = std::make_unique<HttpApi>(*core_, options, clock_, log_);
    server_ = std::make_unique<HttpServer>(HttpServerLimits{}, api_->handler(), clock_, log_);
    auto port = server_->bind("127.0.0.1", 0);
    REQUIRE_MESSAGE(port.ok(), vend::test::error_text(port));
    port_ = *port;
    REQUIRE(server_->start().ok());
  }
  ~Agent() {
    server_->stop();
    core_thread_.stop();
  }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    return c;
  }
  httplib::Headers operator_headers() const {
    return {{"Authorization", std::string("Bearer ") + kToken}};
  }
  AgentCore& core() { return *core_; }
  int port() const { return port_; }
  std::string db_path() const { return dir_.file("agent.db"); }
  Repository& repo() { return *repo_; }
  Accounts& accounts() { return *accounts_; }
  const HttpApi& api() const { return *api_; }
  // A new account of `role` and its API token (the bearer headers).
  httplib::Headers bearer_of(const std::string& name, Role role,
                             std::vector<std::string> machines = {}) {
    auto added = accounts_->add_account({name, role, std::move(machines), ""}, {"rig", "local"});
    REQUIRE_MESSAGE(added.ok(), added.error().to_string());
    auto issued = accounts_->issue_token(name, "rig", 0, {"rig", "local"});
    REQUIRE_MESSAGE(issued.ok(), issued.error().to_string());
    return {{"Authorization", "Bearer " + issued->token}};
  }
  const MemoryLogger& log() const { return log_; }
  void disconnect_broker() { transport_.disconnect(); }
  OpsHub& hub() { return hub_; }
  OpsSeries& series() { return series_; }
  // The hub's subscriber cap (a test opens one more).
  static constexpr size_t kMaxStreams = 3;
  ShellState shell;

 private:
  test::TempDir dir_;
  MemoryLogger log_;
  SystemClock clock_;
  SecureRandom random_;
  InMemoryBus bus_;
  LockedTransport transport_;
  OpsHub hub_{OpsHubOptions{kMaxStreams, 256, 1 << 20, 15'000}, clock_};
  OpsSeries series_{OpsSeriesOptions{}, clock_};
  OpsTee tee_{transport_, hub_};  // the core publishes through it, as in vend-agent
  std::unique_ptr<Repository> repo_;
  std::unique_ptr<Accounts> accounts_;
  // The core's one thread, as in vend-agent: HTTP workers hand it their steps.
  CoreThread core_thread_{CoreThread::Limits{}, std::chrono::milliseconds(10), log_};
  std::unique_ptr<AgentCore> core_;
  std::unique_ptr<HttpApi> api_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

int64_t now_s() { return SystemClock().wall_ms() / 1000; }

// The gateway's signature of a notification about `order_id`.
[[maybe_unused]] httplib::Headers signed_for(const std::string& order_id, const std::string& body,
                                             int64_t t_s = now_s(),
                                             const std::string& secret = kSecret) {
  return {{webhook::kHeader, webhook::sign(secret, t_s, order_id, body)}};
}

Json body_of(const httplib::Result& r) {
  REQUIRE(r);
  INFO(r->body);
  REQUIRE(r->get_header_value("Content-Type").find("application/json") == 0);
  return Json::parse(r->body);
}

// Asserts an error reply: status, error.code, and a message containing `part`.
void expect_error(const httplib::Result& r, int status, const std::string& code,
                  const std::string& part = "") {
  REQUIRE_MESSAGE(r, "no response: " << httplib::to_string(r.error()));
  INFO(r->body);
  CHECK(r->status == status);
  Json j = body_of(r);
  REQUIRE(j.contains("error"));
  CHECK(j["error"]["code"] == code);
  CHECK(j["error"]["message"].get<std::string>().find(part) != std::string::npos);
}

// The simulated machine: provisioned over HTTP, then online with `count`
// tokens in slot 1 through signed messages handed to the core.
struct Machine {
  crypto::Key key;
  std::string boot_id = crypto::random_id128();
  uint64_t seq = 0;

  void provision(Agent& agent) {
    Json body = {
        {"id", kDevice},
        {"slots", {{{"slot", 1}, {"product", "cola"}, {"price_cents", 250}, {"capacity", 10}}}}};
    auto r = agent.client().Post("/v1/devices", agent.operator_headers(), body.dump(),
                                 "application/json");
    REQUIRE(r);
    REQUIRE_MESSAGE(r->status == 201, r->body);
    Json j = Json::parse(r->body);
    CHECK(j["id"] == kDevice);
    auto k = crypto::Key::from_hex(j["key"].get<std::string>());
    REQUIRE(k.ok());
    key = *k;
  }
  void go_online(Agent& agent) {
    proto::PresenceStatus s{kDevice, boot_id, true, 1};
    std::string mac = crypto::sign(key, proto::encode_canonical(s));
    agent.core().on_message(
        Message{topics::device_status(kDevice), proto::encode(s, mac), 1, true});
  }
  void mint(Agent& agent, const std::string& restock_id, int count) {
    proto::TokensMinted t{restock_id, 1, {}, count};
    for (int i = 0; i < count; ++i) t.tokens.push_back(crypto::random_id128());
    proto::DeviceEvent e{kDevice, ++seq, boot_id, 1, t};
    std::string mac = crypto::sign(key, proto::encode_canonical(e));
    agent.core().on_message(Message{topics::device_evt(kDevice), proto::encode(e, mac), 1, false});
  }
};

std::string pool_of_slot1(Agent& agent) {
  auto r = agent.client().Get("/v1/devices/vm-http-1/slots", agent.operator_headers());
  Json j = body_of(r);
  REQUIRE(r->status == 200);
  return std::to_string(j["slots"][0]["pool"].get<int64_t>());
}

// A device with 3 tokens in slot 1, ready to sell.
void stock_machine(Agent& agent, Machine& m) {
  m.provision(agent);
  m.go_online(agent);
  auto r = agent.client().Post("/v1/devices/vm-http-1/restock", agent.operator_headers(),
                               R"({"slot":1,"count":3})", "application/json");
  Json j = body_of(r);
  REQUIRE(r->status == 202);
  m.mint(agent, j["restock_id"].get<std::string>(), 3);
  for (int i = 0; i < 200 && pool_of_slot1(agent) != "3"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(pool_of_slot1(agent) == "3");
}

[[maybe_unused]] httplib::Result post_json(Agent& agent, const std::string& path,
                                           const std::string& body, httplib::Headers headers = {}) {
  return agent.client().Post(path.c_str(), headers, body, "application/json");
}
}  // namespace
}  // namespace vend::agent
