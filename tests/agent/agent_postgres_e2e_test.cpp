// vend-agent --db postgresql://... end to end, with the real binaries: a
// real PostgreSQL 15 (tests/support PostgresServer), mosquitto, vend-agent
// and vend-firmware. A sale (order, payment, the device's dispense result)
// and kill -9 of the agent right after a payment was answered: the restarted
// agent still has the paid order, and the sale completes. A bad password
// fails the start with the cause and without the password.
#include <doctest/doctest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace vend::agent {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

bool eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// One vend-agent process on the PostgreSQL log; restartable on the same
// address, database and secrets.
class AgentOnPostgres {
 public:
  AgentOnPostgres(const test::TempDir& dir, std::string db_url, std::string mqtt_url)
      : dir_(dir),
        db_url_(std::move(db_url)),
        mqtt_url_(std::move(mqtt_url)),
        port_(test::free_port()) {}
  void start() {
    child_ = std::make_unique<test::Child>(
        std::vector<std::string>{test::binary_path("cloud-agent/vend-agent"), "--http",
                                 "127.0.0.1:" + std::to_string(port_), "--mqtt", mqtt_url_, "--db",
                                 db_url_, "--operator-token-file", dir_.file("operator.token"),
                                 "--gateway-secret-file", dir_.file("gateway.secret")},
        dir_.file("agent.log"));
    REQUIRE_MESSAGE(eventually(
                        [&] {
                          httplib::Client c("127.0.0.1", port_);
                          auto r = c.Get("/healthz");
                          return r && r->status == 200;
                        },
                        20s),
                    log());
  }
  void kill9() { child_->kill_now(); }
  std::string log() const { return test::read_file(dir_.file("agent.log")); }
  Json call(const std::string& method, const std::string& path, const std::string& body, int expect,
            httplib::Headers headers = {}) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    if (operator_) {
      headers.emplace("Authorization",
                      "Bearer " + trim(test::read_file(dir_.file("operator.token"))));
    }
    auto r = method == "GET" ? c.Get(path.c_str(), headers)
                             : c.Post(path.c_str(), headers, body, "application/json");
    REQUIRE_MESSAGE(r, "no HTTP response: " << httplib::to_string(r.error()));
    INFO(r->body);
    if (expect != 0) REQUIRE(r->status == expect);
    return Json::parse(r->body);
  }
  Json as_operator(const std::string& method, const std::string& path, const std::string& body,
                   int expect) {
    operator_ = true;
    Json j = call(method, path, body, expect);
    operator_ = false;
    return j;
  }
  // The gateway's signed notification (the signature as docs/agent.md makes it).
  void pay(const std::string& order_id, const std::string& payment_id) {
    std::string body = R"({"payment_id":")" + payment_id + R"(","amount_cents":150})";
    test::Child sig({"/bin/sh", "-c",
                     "t=$(date +%s); printf 't=%s,v1=' \"$t\"; printf '%s' \"$t.$2.$0\" | "
                     "\"$3\" dgst -sha256 -hmac \"$1\" | sed 's/^.* //'",
                     body, trim(test::read_file(dir_.file("gateway.secret"))), order_id,
                     test::require_program("openssl", "openssl")},
                    dir_.file("sig.out"));
    REQUIRE(sig.wait(20s) == 0);
    std::string signature = trim(test::read_file(dir_.file("sig.out")));
    std::remove(dir_.file("sig.out").c_str());
    call("POST", "/v1/orders/" + order_id + "/payment", body, 200, {{"Vend-Signature", signature}});
  }
  std::string order_state(const std::string& id) {
    return call("GET", "/v1/orders/" + id, "", 200)["state"];
  }

 private:
  const test::TempDir& dir_;
  std::string db_url_, mqtt_url_;
  int port_;
  bool operator_ = false;
  std::unique_ptr<test::Child> child_;
};

TEST_CASE("vend-agent on PostgreSQL: a sale, kill -9 after a payment, restart: nothing lost") {
  test::TempDir dir;
  test::PostgresServer postgres;
  postgres.create_database("vend");
  test::MosquittoServer broker;
  AgentOnPostgres agent(dir, postgres.url("vend"), broker.url());
  agent.start();
  CHECK(agent.log().find("PostgreSQL log at postgresql://vend:***@127.0.0.1") != std::string::npos);
  CHECK(agent.log().find("pg-secret-4711") == std::string::npos);  // the password

  Json device = agent.as_operator("POST", "/v1/devices", R"({"id":"vm-pg-1","slots":[{"slot":1,
      "product":"cola","price_cents":150,"capacity":10}]})",
                                  201);
  test::write_private_file(dir.file("device.key"), device["key"].get<std::string>() + "\n");
  Json config = {{"device_id", "vm-pg-1"},
                 {"key_file", "device.key"},
                 {"broker_url", broker.url()},
                 {"ledger_path", dir.file("ledger.db")},
                 {"slots", Json::array({{{"slot", 1}, {"capacity", 10}, {"product", "cola"}}})},
                 {"sim", {{"motor_run_ms", 100}}},
                 {"core", {{"reconnect_jitter_max_ms", 0}, {"auto_confirm_restock", true}}}};
  test::write_file(dir.file("device.json"), config.dump(2));
  test::Child firmware(
      {test::binary_path("firmware/vend-firmware"), "--config", dir.file("device.json")},
      dir.file("firmware.log"));
  auto logs = [&] {
    return agent.log() + "\n--- firmware ---\n" + test::read_file(dir.file("firmware.log"));
  };
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        Json d = agent.as_operator("GET", "/v1/devices", "", 200)["devices"];
                        return d.size() == 1 && d[0]["online"] == true;
                      },
                      20s),
                  logs());
  agent.as_operator("POST", "/v1/devices/vm-pg-1/restock", R"({"slot":1,"count":3})", 202);
  auto pool = [&] {
    return agent.as_operator("GET", "/v1/devices/vm-pg-1/slots", "", 200)["slots"][0]["pool"];
  };
  REQUIRE_MESSAGE(eventually([&] { return pool() == 3; }, 20s), logs());

  // A sale: order, payment, the device's dispense result.
  std::string first =
      agent.call("POST", "/v1/orders", R"({"device":"vm-pg-1","slot":1})", 201)["id"];
  agent.pay(first, "pay-pg-1");
  REQUIRE_MESSAGE(eventually([&] { return agent.order_state(first) == "COMPLETED"; }, 20s), logs());

  // A second one, and kill -9 the moment its payment is answered: the answer
  // promised durability, so the restarted agent must have it.
  std::string second =
      agent.call("POST", "/v1/orders", R"({"device":"vm-pg-1","slot":1})", 201)["id"];
  agent.pay(second, "pay-pg-2");
  agent.kill9();
  agent.start();
  std::string after = agent.order_state(second);
  CHECK_MESSAGE((after == "PAID" || after == "DISPATCHED" || after == "COMPLETED"), after);
  CHECK(agent.order_state(first) == "COMPLETED");
  REQUIRE_MESSAGE(eventually([&] { return agent.order_state(second) == "COMPLETED"; }, 30s),
                  logs());
  // A repeat of the payment is answered from the log, not applied twice.
  agent.pay(second, "pay-pg-2");
  Json slot = agent.as_operator("GET", "/v1/devices/vm-pg-1/slots", "", 200)["slots"][0];
  CHECK(slot["sold"] == 2);
  CHECK(slot["pool"] == 1);
}

TEST_CASE("vend-agent --db postgresql:// with a wrong password: exits with the cause") {
  test::TempDir dir;
  test::PostgresServer postgres;
  std::string url =
      "postgresql://vend:wrong-secret@127.0.0.1:" + std::to_string(postgres.port()) + "/postgres";
  test::Child agent({test::binary_path("cloud-agent/vend-agent"), "--http", "127.0.0.1:0", "--db",
                     url, "--operator-token-file", dir.file("operator.token"),
                     "--gateway-secret-file", dir.file("gateway.secret")},
                    dir.file("agent.log"));
  int code = agent.wait(30s);
  std::string log = test::read_file(dir.file("agent.log"));
  CHECK_MESSAGE(code != 0, log);
  CHECK_MESSAGE(code != -1, log);
  CHECK_MESSAGE(log.find("password authentication failed") != std::string::npos, log);
  CHECK(log.find("wrong-secret") == std::string::npos);
}

}  // namespace
}  // namespace vend::agent
