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

#include "agent_on_postgres.hpp"
#include "test_support.hpp"

namespace vend::agent {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
using test_rig::AgentOnPostgres;
using test_rig::eventually;

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
