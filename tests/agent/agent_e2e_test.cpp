// The walkthrough of docs/agent.md, step by step, with the real binaries: a
// real mosquitto, the real vend-agent and the real vend-firmware (simulated
// HAL, restocks confirmed at once). Provision, restock, order, pay with an
// `openssl dgst` signature, and the order ends COMPLETED with the item
// dispensed by the device. If this test changes, change the document too.
#include <doctest/doctest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent_api.hpp"
#include "e2e_support.hpp"
#include "test_support.hpp"

namespace vend::agent {
namespace {

using test_rig::eventually;
using test_rig::trim;

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr const char* kDevice = "vm-demo-1";

// A finished command's exit code and output (stdout + stderr).
struct Run {
  int code = -1;
  std::string output;
};

Run run(const std::vector<std::string>& argv, const std::string& log) {
  test::Child child(argv, log);
  int code = child.wait(20s);
  return Run{code, test::read_file(log)};
}

// Step 5's device.json: the sim HAL, a short rotation, restocks confirmed at once.
std::string device_config(const std::string& broker_url) {
  Json config = {{"device_id", kDevice},
                 {"key_file", "device.key"},
                 {"broker_url", broker_url},
                 {"ledger_path", "ledger.db"},
                 {"slots", Json::array({{{"slot", 1}, {"capacity", 10}, {"product", "cola"}}})},
                 {"sim", {{"motor_run_ms", 200}}},
                 {"core", {{"reconnect_jitter_max_ms", 0}, {"auto_confirm_restock", true}}}};
  return config.dump(2);
}

// Lines of docs/agent.md run word for word through /bin/sh (they are
// checked to be in the document).
constexpr const char* kDocOperatorHeader =
    R"sh(OP="Authorization: Bearer $(cat operator.token)")sh";
constexpr const char* kDocCatalog = "curl -s $API/v1/machines/vm-demo-1/catalog";
constexpr const char* kDocReconcile =
    R"sh(curl -s -X POST -H "$OP" $API/v1/devices/vm-demo-1/reconcile)sh";

// A shell script: in the walkthrough's directory, the document's variables,
// then `line`.
std::string doc_shell(const test::TempDir& dir, const std::string& http, const std::string& line) {
  const char* source = std::getenv("VEND_SOURCE_DIR");
  REQUIRE_MESSAGE(source != nullptr, "run through ctest (VEND_SOURCE_DIR unset)");
  std::string doc = test::read_file(std::string(source) + "/docs/agent.md");
  for (const std::string& l : {std::string(kDocOperatorHeader), line}) {
    REQUIRE_MESSAGE(doc.find("\n" + l + "\n") != std::string::npos, "not in docs/agent.md: " << l);
  }
  return "cd '" + dir.path() + "' && API=http://" + http + " && " + kDocOperatorHeader + " && " +
         line;
}

Json slot1(test::AgentApi& api) {
  return api.get("/v1/devices/vm-demo-1/slots", 200, true)["slots"][0];
}

// One long case on purpose: it reads top to bottom like the document's steps,
// which is what it checks.
TEST_CASE("docs/agent.md walkthrough: provision, restock, order, pay, dispensed, COMPLETED") {
  test::TempDir dir;
  // 1. mosquitto, and an operator watching the ops topics with mosquitto_sub.
  test::MosquittoServer broker;
  test::Child watcher(
      {test::require_program("mosquitto_sub", "mosquitto-clients"), "-h", "127.0.0.1", "-p",
       std::to_string(broker.port()), "-t", "vend/v1/ops/#", "-v"},
      dir.file("ops.log"));

  // 2. vend-agent; it creates the missing secret files and says where.
  int http_port = test::free_port();
  std::string http = "127.0.0.1:" + std::to_string(http_port);
  test::Child agent(
      {test::binary_path("cloud-agent/vend-agent"), "--http", http, "--mqtt", broker.url(), "--db",
       dir.file("agent.db"), "--operator-token-file", dir.file("operator.token"),
       "--gateway-secret-file", dir.file("gateway.secret"), "--log-level", "debug"},
      dir.file("agent.log"));
  auto agent_log = [&] { return test::read_file(dir.file("agent.log")); };
  // The start line comes once the agent serves (its port is bound a little earlier).
  std::string start_line = "HTTP API on http://" + http + ", MQTT broker " + broker.url();
  REQUIRE_MESSAGE(
      eventually([&] { return agent_log().find(start_line) != std::string::npos; }, 10s),
      agent_log());
  CHECK(agent_log().find("generated a new operator token in " + dir.file("operator.token")) !=
        std::string::npos);
  test::AgentApi api(http_port);
  api.set_operator_token(trim(test::read_file(dir.file("operator.token"))));
  std::string secret = trim(test::read_file(dir.file("gateway.secret")));
  REQUIRE_MESSAGE(eventually([&] { return api.get("/healthz")["mqtt_connected"] == true; }, 10s),
                  agent_log());
  // A second agent on the same address fails before it touches MQTT (where
  // its client id would take the first agent's session over).
  Run second =
      run({test::binary_path("cloud-agent/vend-agent"), "--http", http, "--mqtt", broker.url(),
           "--db", dir.file("second.db"), "--operator-token-file", dir.file("operator.token"),
           "--gateway-secret-file", dir.file("gateway.secret")},
          dir.file("second.log"));
  CHECK_MESSAGE(second.code == 1, second.output);
  CHECK(second.output.find("http_bind") != std::string::npos);
  CHECK(second.output.find("mqtt") == std::string::npos);

  // 3. Provision the device; its key goes into the firmware's key file.
  Json device = api.as_operator("POST", "/v1/devices", R"({"id":"vm-demo-1","slots":[{"slot":1,
      "product":"cola","price_cents":150,"capacity":10}]})",
                                201);
  test::write_private_file(dir.file("device.key"), device["key"].get<std::string>() + "\n");

  // 4. Start vend-firmware with a config whose device_id matches.
  test::write_file(dir.file("device.json"), device_config(broker.url()));
  std::string firmware = test::binary_path("firmware/vend-firmware");
  test::Child device_daemon({firmware, "--config", dir.file("device.json")},
                            dir.file("firmware.log"));
  auto logs = [&] {
    return agent_log() + "\n--- firmware ---\n" + test::read_file(dir.file("firmware.log"));
  };
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        Json d = api.get("/v1/devices", 200, true)["devices"];
                        return d.size() == 1 && d[0]["online"] == true;
                      },
                      15s),
                  logs());

  // 5. Restock: the simulated operator confirms at once; two tokens reach the pool.
  Json restock =
      api.as_operator("POST", "/v1/devices/vm-demo-1/restock", R"({"slot":1,"count":2})", 202);
  CHECK(restock["restock_id"].is_string());
  REQUIRE_MESSAGE(eventually([&] { return slot1(api)["pool"] == 2; }, 15s), logs());
  // The customer's app reads the public catalog, with the document's curl.
  Run catalog_run = run({"/bin/sh", "-c", doc_shell(dir, http, kDocCatalog)}, dir.file("cat.out"));
  REQUIRE_MESSAGE(catalog_run.code == 0, catalog_run.output);
  INFO(catalog_run.output);
  Json catalog = Json::parse(catalog_run.output);
  CHECK(catalog == Json::parse(R"({"machine":"vm-demo-1","online":true,"slots":[{"available":2,
      "price_cents":150,"product":"cola","sellable":true,"slot":1}]})"));

  // 6. A customer orders.
  Json order = api.post("/v1/orders", R"({"device":"vm-demo-1","slot":1})", 201,
                        {{"Idempotency-Key", "demo-order-1"}});
  CHECK(order["state"] == "RESERVED");
  CHECK_FALSE(order.contains("token"));
  std::string id = order["id"];

  // 7. The gateway's notification, signed as the document does it with openssl.
  std::string body = R"({"payment_id":"pay-demo-1","amount_cents":150})";
  Run sig = run({"/bin/sh", "-c",
                 "t=$(date +%s); printf 't=%s,v1=' \"$t\"; printf '%s' \"$t.$2.$0\" | "
                 "\"$3\" dgst -sha256 -hmac \"$1\" | sed 's/^.* //'",
                 body, secret, id, test::require_program("openssl", "openssl")},
                dir.file("openssl.out"));
  REQUIRE_MESSAGE(sig.code == 0, sig.output);
  REQUIRE(trim(sig.output).find(",v1=") != std::string::npos);
  api.post("/v1/orders/" + id + "/payment", body, 200, {{"Vend-Signature", trim(sig.output)}});

  // 8. The device dispenses; the order completes.
  REQUIRE_MESSAGE(
      eventually([&] { return api.get("/v1/orders/" + id)["state"] == "COMPLETED"; }, 15s), logs());
  Json slot = slot1(api);
  CHECK(slot["pool"] == 1);
  CHECK(slot["sold"] == 1);
  Run status = run({firmware, "status", "--config", dir.file("device.json"), "--json"},
                   dir.file("status.out"));
  REQUIRE_MESSAGE(status.code == 0, status.output);
  CHECK(Json::parse(status.output)["dispenses"]["dispensed"] == 1);

  // 9. Reconcile on demand: the device's full snapshot matches the cloud. The
  // document's own lines, run by /bin/sh with curl (a bodiless POST).
  Run asked_run = run({"/bin/sh", "-c", doc_shell(dir, http, kDocReconcile)}, dir.file("curl.out"));
  REQUIRE_MESSAGE(asked_run.code == 0, asked_run.output);
  INFO(asked_run.output);
  Json asked = Json::parse(asked_run.output);
  CHECK(asked["device"] == "vm-demo-1");
  CHECK(asked["full"] == true);
  std::string request_id = asked["request_id"];
  Json report;
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        auto r = api.get("/v1/reconcile/vm-demo-1", 0, true);
                        if (!r.contains("request_id") || r["request_id"] != request_id) {
                          return false;
                        }
                        report = r;
                        return true;
                      },
                      15s),
                  logs());
  CHECK(report["verdict"] == "ok");
  CHECK(report["slots"][0]["verdict"] == "match");
  CHECK(report["slots"][0]["pool"] == 1);
  CHECK(report["slots"][0]["device_tokens"] == 1);

  // 10. The operator saw the order's transitions and the report on the ops topics.
  auto ops = [&] { return test::read_file(dir.file("ops.log")); };
  CHECK_MESSAGE(eventually(
                    [&] {
                      return ops().find("vend/v1/ops/orders {") != std::string::npos &&
                             ops().find("\"to_state\":\"COMPLETED\"") != std::string::npos &&
                             ops().find("vend/v1/ops/reconcile/vm-demo-1 {") != std::string::npos &&
                             ops().find("vend/v1/ops/devices/vm-demo-1 {") != std::string::npos &&
                             ops().find("vend/v1/ops/fleet {") != std::string::npos;
                    },
                    10s),
                ops() << "\n--- agent ---\n"
                      << agent_log());

  // 11. Both stop cleanly on SIGTERM.
  agent.signal(SIGTERM);
  CHECK_MESSAGE(agent.wait(10s) == 0, agent_log());
  device_daemon.signal(SIGTERM);
  CHECK(device_daemon.wait(10s) == 0);
}

// /healthz tells the truth about the broker: 503 broker_down once it has
// been unreachable past --broker-down-grace-s, 200 again after it returns.
TEST_CASE("vend-agent /healthz: 503 broker_down past the grace, 200 once the broker is back") {
  test::TempDir dir;
  test::MosquittoServer broker;
  int http_port = test::free_port();
  std::string http = "127.0.0.1:" + std::to_string(http_port);
  test::Child agent(
      {test::binary_path("cloud-agent/vend-agent"), "--http", http, "--mqtt", broker.url(), "--db",
       dir.file("agent.db"), "--operator-token-file", dir.file("operator.token"),
       "--gateway-secret-file", dir.file("gateway.secret"), "--broker-down-grace-s", "1"},
      dir.file("agent.log"));
  auto agent_log = [&] { return test::read_file(dir.file("agent.log")); };
  test::AgentApi api(http_port);
  auto status_is = [&](int want) {
    httplib::Client c("127.0.0.1", http_port);
    auto r = c.Get("/healthz");
    return r && r->status == want;
  };
  REQUIRE_MESSAGE(eventually([&] { return status_is(200); }, 10s), agent_log());
  // Polled with any status: before the first connect the 1 s grace can run out (503).
  REQUIRE(eventually([&] { return api.get("/healthz", 0)["mqtt_connected"] == true; }, 10s));
  REQUIRE(status_is(200));
  broker.stop();
  REQUIRE_MESSAGE(eventually([&] { return status_is(503); }, 10s), agent_log());
  Json down = api.get("/healthz", 503);
  CHECK(down["reason"] == "broker_down");
  CHECK(down["mqtt_down_ms"].get<int64_t>() > 1000);
  broker.start();
  CHECK_MESSAGE(eventually([&] { return status_is(200); }, 40s), agent_log());
}

TEST_CASE("vend-agent refuses bad options (2) and starting without secrets (2)") {
  test::TempDir dir;
  std::string agent = test::binary_path("cloud-agent/vend-agent");
  Run bad = run({agent, "--http", "nowhere"}, dir.file("bad.log"));
  CHECK(bad.code == 2);
  // One line naming the option; the usage only on --help.
  CHECK_MESSAGE(bad.output.rfind("vend-agent: --http", 0) == 0, bad.output);
  CHECK(bad.output.find("usage: vend-agent") == std::string::npos);
  CHECK(bad.output.find('\n') == bad.output.size() - 1);
  Run no_secret = run({agent, "--db", dir.file("a.db")}, dir.file("nosecret.log"));
  CHECK(no_secret.code == 2);
  CHECK(no_secret.output.find("no operator token") != std::string::npos);
}

}  // namespace
}  // namespace vend::agent
