// Floods against the real vend-agent (tests/support: mosquitto, PostgreSQL;
// vend-agent and vend-firmware as child processes): for a few seconds,
// clients send POST /v1/orders for random machine ids with fresh
// idempotency keys and client ids, and GET /v1/orders/<id> for ids that
// cannot exist and for well-formed random ones, while a junk publisher
// floods one machine's event topic. Meanwhile a customer buys on a real
// machine. The agent stays up, answers every flood request with 404, 429 or
// 503 (never 5xx otherwise, never a dropped connection), keeps its shards
// (one instance of a cluster: memory is never complete there, so a
// well-formed id is read from the log, off the core thread), and the
// customer's orders are answered and completed.
#include <doctest/doctest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "agent_on_postgres.hpp"
#include "test_support.hpp"

namespace vend::agent {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
using test_rig::AgentOnPostgres;
using test_rig::eventually;

constexpr auto kFloodFor = 5s;
constexpr int kFloodThreads = 3;

std::string hex(std::mt19937_64& rng, size_t digits) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < digits; ++i) out += kHex[rng() & 0xf];
  return out;
}

// What the flood clients were answered, by status (0: no answer).
struct Tally {
  std::mutex mu;
  std::map<int, int> by_status;
  void add(int status) {
    std::lock_guard lock(mu);
    ++by_status[status];
  }
  int total() {
    std::lock_guard lock(mu);
    int n = 0;
    for (auto& [s, c] : by_status) n += c;
    return n;
  }
  std::string text() {
    std::lock_guard lock(mu);
    std::string out;
    for (auto& [s, c] : by_status) out += std::to_string(s) + ":" + std::to_string(c) + " ";
    return out;
  }
};

// Three kinds of request in turn, on one keep-alive connection, until `stop`.
void flood(int port, int seed, std::atomic<bool>& stop, Tally& tally) {
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  httplib::Client c("127.0.0.1", port);
  c.set_keep_alive(true);
  c.set_read_timeout(10, 0);
  for (int i = 0; !stop; ++i) {
    auto send = [&]() -> httplib::Result {
      if (i % 3 == 0) {
        httplib::Headers h = {{"Idempotency-Key", "k-" + hex(rng, 16)},
                              {"X-Client-Id", "c-" + hex(rng, 12)}};
        std::string body = R"({"device":"vm-)" + hex(rng, 10) + R"(","slot":1})";
        return c.Post("/v1/orders", h, body, "application/json");
      } else if (i % 3 == 1) {
        // Well-formed: made now, with a random tail.
        auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
        char time_hex[16];
        std::snprintf(time_hex, sizeof time_hex, "%012llx",
                      static_cast<unsigned long long>(now_ms));
        return c.Get(("/v1/orders/ord-" + std::string(time_hex) + hex(rng, 32)).c_str());
      }
      return c.Get(("/v1/orders/ord-" + hex(rng, 7)).c_str());  // no order has this shape
    };
    auto r = send();
    tally.add(r ? r->status : 0);
  }
}

// Junk on one machine's event topic, as fast as mosquitto_pub sends it.
std::unique_ptr<test::Child> junk_publisher(const test::TempDir& dir, int broker_port) {
  std::string lines;
  for (int i = 0; i < 20'000; ++i) lines += R"({"v":1,"junk":)" + std::to_string(i) + "}\n";
  test::write_file(dir.file("junk.txt"), lines);
  std::string pub = test::require_program("mosquitto_pub", "mosquitto-clients");
  return std::make_unique<test::Child>(
      std::vector<std::string>{"/bin/sh", "-c",
                               "\"$0\" -h 127.0.0.1 -p \"$1\" -q 1 -t vend/v1/dev/vm-junk/evt -l "
                               "< \"$2\"",
                               pub, std::to_string(broker_port), dir.file("junk.txt")},
      dir.file("junk.log"));
}

// One machine, provisioned, running and stocked with `items`.
std::unique_ptr<test::Child> start_machine(AgentOnPostgres& agent, const test::TempDir& dir,
                                           const test::MosquittoServer& broker, int items) {
  Json device = agent.as_operator("POST", "/v1/devices", R"({"id":"vm-f1","slots":[{"slot":1,
      "product":"cola","price_cents":150,"capacity":20}]})",
                                  201);
  test::write_private_file(dir.file("device.key"), device["key"].get<std::string>() + "\n");
  Json config = {{"device_id", "vm-f1"},
                 {"key_file", "device.key"},
                 {"broker_url", broker.url()},
                 {"ledger_path", dir.file("ledger.db")},
                 {"slots", Json::array({{{"slot", 1}, {"capacity", 20}, {"product", "cola"}}})},
                 {"sim", {{"motor_run_ms", 50}}},
                 {"core", {{"reconnect_jitter_max_ms", 0}, {"auto_confirm_restock", true}}}};
  test::write_file(dir.file("device.json"), config.dump(2));
  auto firmware = std::make_unique<test::Child>(
      std::vector<std::string>{test::binary_path("firmware/vend-firmware"), "--config",
                               dir.file("device.json")},
      dir.file("firmware.log"));
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        Json d = agent.as_operator("GET", "/v1/devices/vm-f1", "", 200);
                        return d["online"] == true;
                      },
                      20s),
                  agent.log());
  agent.as_operator("POST", "/v1/devices/vm-f1/restock",
                    R"({"slot":1,"count":)" + std::to_string(items) + "}", 202);
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        Json s = agent.as_operator("GET", "/v1/devices/vm-f1/slots", "", 200);
                        return s["slots"][0]["pool"] == items;
                      },
                      20s),
                  agent.log());
  return firmware;
}

// The value of an unlabelled metric on /metrics; -1 when absent.
int64_t metric(AgentOnPostgres& agent, const std::string& name) {
  httplib::Client c("127.0.0.1", agent.port());
  auto r = c.Get("/metrics");
  REQUIRE(r);
  size_t at = r->body.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(r->body.substr(at + name.size() + 2));
}

// The flood, the junk publisher and a customer buying `sales` items at
// once. Every sale must complete.
void flood_while_buying(AgentOnPostgres& agent, const test::TempDir& dir,
                        const test::MosquittoServer& broker, int sales) {
  std::atomic<bool> stop{false};
  Tally tally;
  auto junk = junk_publisher(dir, broker.port());
  std::vector<std::thread> threads;
  for (int t = 0; t < kFloodThreads; ++t) {
    threads.emplace_back([&, t] { flood(agent.port(), 100 + t, stop, tally); });
  }
  auto flood_end = std::chrono::steady_clock::now() + kFloodFor;
  std::vector<std::string> sold;
  for (int i = 0; i < sales; ++i) {
    std::string id = agent.call("POST", "/v1/orders", R"({"device":"vm-f1","slot":1})", 201,
                                {{"Idempotency-Key", "buy-" + std::to_string(i)}})["id"];
    agent.pay(id, "pay-f-" + std::to_string(i));
    sold.push_back(id);
  }
  std::this_thread::sleep_until(flood_end);
  stop = true;
  for (auto& t : threads) t.join();

  INFO("flood answers: " << tally.text());
  CHECK(tally.total() > 100);
  {
    std::lock_guard lock(tally.mu);
    for (auto& [status, n] : tally.by_status) {
      CHECK_MESSAGE((status == 404 || status == 429 || status == 503), status << " x" << n);
    }
    CHECK(tally.by_status[404] > 0);
  }
  CHECK(agent.child().running());
  for (const auto& id : sold) {
    CHECK_MESSAGE(eventually([&] { return agent.order_state(id) == "COMPLETED"; }, 30s),
                  agent.log());
  }
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        httplib::Client c("127.0.0.1", agent.port());
                        auto r = c.Get("/healthz");
                        return r && r->status == 200;
                      },
                      20s),
                  agent.log());
  Json slot = agent.as_operator("GET", "/v1/devices/vm-f1/slots", "", 200)["slots"][0];
  CHECK(slot["sold"] == sales);
}

TEST_CASE("flood on one agent (SQLite): up, the customer served, floods answered 404/429/503") {
  test::TempDir dir;
  test::MosquittoServer broker;
  AgentOnPostgres agent(dir, dir.file("agent.db"), broker.url());
  agent.start();
  auto firmware = start_machine(agent, dir, broker, 10);
  flood_while_buying(agent, dir, broker, 5);
}

TEST_CASE(
    "flood on one instance of a cluster (PostgreSQL): up, its shards kept, the customer "
    "served") {
  test::TempDir dir;
  test::PostgresServer postgres;
  postgres.create_database("vend");
  test::MosquittoServer broker;
  AgentOnPostgres agent(dir, postgres.url("vend"), broker.url(),
                        {"--instance-id", "a", "--log-level", "info"}, "agent-a");
  agent.start();
  auto shards = [&] { return agent.as_operator("GET", "/v1/cluster", "", 200)["shards_held"]; };
  REQUIRE_MESSAGE(eventually([&] { return shards() == 64; }, 20s), agent.log());
  auto firmware = start_machine(agent, dir, broker, 10);
  int64_t lost = metric(agent, "vend_cluster_shards_lost_total");
  int64_t rebuilds = metric(agent, "vend_cluster_rebuilds_total");
  flood_while_buying(agent, dir, broker, 5);
  // Its shards never left it: none lost, no rebuild.
  CHECK(shards() == 64);
  CHECK(metric(agent, "vend_cluster_shards_lost_total") == lost);
  CHECK(metric(agent, "vend_cluster_rebuilds_total") == rebuilds);
}

}  // namespace
}  // namespace vend::agent
