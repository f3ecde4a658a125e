// The agent's clock 6 minutes ahead of the payment gateway's, with the real
// binaries: mosquitto, vend-agent and vend-firmware, the last two under
// libfaketime (Debian package faketime; the wall clock only, the monotonic
// one is left alone). The machine shares the agent's clock; the gateway --
// this test -- signs with the real one. The notification is authentic, so
// it is recorded and honoured: the order completes, and the skew is counted
// and logged instead of every payment being refused.
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
#include "faketime.hpp"
#include "test_support.hpp"
#include "vend/webhook.hpp"

namespace vend::agent {
namespace {

using test_rig::eventually;
using test_rig::trim;

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr int64_t kAheadS = 360;

int64_t real_now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// argv run with its wall clock `ahead_s` seconds fast.
std::vector<std::string> ahead(int64_t ahead_s, std::vector<std::string> argv) {
  return test::faketime_command({"FAKETIME=+" + std::to_string(ahead_s)}, argv);
}

std::string device_config(const std::string& broker_url) {
  Json config = {{"device_id", "vm-skew-1"},
                 {"key_file", "device.key"},
                 {"broker_url", broker_url},
                 {"ledger_path", "ledger.db"},
                 {"slots", Json::array({{{"slot", 1}, {"capacity", 10}, {"product", "cola"}}})},
                 {"sim", {{"motor_run_ms", 200}}},
                 {"core", {{"reconnect_jitter_max_ms", 0}, {"auto_confirm_restock", true}}}};
  return config.dump(2);
}

TEST_CASE(
    "vend-agent 6 minutes ahead of the gateway: a payment is recorded and the order completes") {
  test::TempDir dir;
  test::MosquittoServer broker;
  int http_port = test::free_port();
  std::string http = "127.0.0.1:" + std::to_string(http_port);
  test::Child agent(ahead(kAheadS, {test::binary_path("cloud-agent/vend-agent"), "--http", http,
                                    "--mqtt", broker.url(), "--db", dir.file("agent.db"),
                                    "--operator-token-file", dir.file("operator.token"),
                                    "--gateway-secret-file", dir.file("gateway.secret")}),
                    dir.file("agent.log"));
  auto agent_log = [&] { return test::read_file(dir.file("agent.log")); };
  REQUIRE_MESSAGE(
      eventually([&] { return agent_log().find("HTTP API on") != std::string::npos; }, 10s),
      agent_log());
  test::AgentApi api(http_port);
  api.set_operator_token(trim(test::read_file(dir.file("operator.token"))));
  std::string secret = trim(test::read_file(dir.file("gateway.secret")));
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        auto r = api.send("GET", "/healthz");
                        return r && Json::parse(r->body)["mqtt_connected"] == true;
                      },
                      10s),
                  agent_log());

  Json device = api.post("/v1/devices", R"({"id":"vm-skew-1","slots":[{"slot":1,
      "product":"cola","price_cents":150,"capacity":10}]})",
                         201, {}, true);
  test::write_private_file(dir.file("device.key"), device["key"].get<std::string>() + "\n");
  test::write_file(dir.file("device.json"), device_config(broker.url()));
  test::Child firmware(ahead(kAheadS, {test::binary_path("firmware/vend-firmware"), "--config",
                                       dir.file("device.json")}),
                       dir.file("firmware.log"));
  auto logs = [&] {
    return agent_log() + "\n--- firmware ---\n" + test::read_file(dir.file("firmware.log"));
  };
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        auto r = api.send("GET", "/v1/devices/vm-skew-1", "", {}, true);
                        return r && r->status == 200 && Json::parse(r->body)["online"] == true;
                      },
                      15s),
                  logs());
  api.post("/v1/devices/vm-skew-1/restock", R"({"slot":1,"count":1})", 202, {}, true);
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        auto r = api.send("GET", "/v1/devices/vm-skew-1/slots", "", {}, true);
                        return r && r->status == 200 &&
                               Json::parse(r->body)["slots"][0]["pool"] == 1;
                      },
                      20s),
                  logs());

  Json order = api.post("/v1/orders", R"({"device":"vm-skew-1","slot":1})", 201);
  std::string id = order["id"];
  // The agent runs ahead indeed (its clock stamps the order).
  int64_t created_s = order["created_ms"].get<int64_t>() / 1000;
  CHECK(created_s - real_now_s() > kAheadS - 30);

  // The gateway signs with the real clock: 6 minutes behind the agent's.
  std::string body = R"({"payment_id":"pay-skew-e2e","amount_cents":150})";
  httplib::Headers signature = {{webhook::kHeader, webhook::sign(secret, real_now_s(), id, body)}};
  Json paid = api.post("/v1/orders/" + id + "/payment", body, 200, signature);
  CHECK(paid["payment_outcome"] == "applied");
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        auto r = api.send("GET", "/v1/orders/" + id);
                        return r && r->status == 200 &&
                               Json::parse(r->body)["state"] == "COMPLETED";
                      },
                      20s),
                  logs());
  // The same notification again (a gateway's retry): the recorded answer.
  Json again = api.post("/v1/orders/" + id + "/payment", body, 200, signature);
  CHECK(again["payment_outcome"] == "applied");
  CHECK(again["state"] == "COMPLETED");

  auto metrics = api.send("GET", "/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("vend_payment_clock_skew_total 2") != std::string::npos);
  CHECK(agent_log().find("s from the agent's clock (tolerance 300 s)") != std::string::npos);

  agent.signal(SIGTERM);
  CHECK_MESSAGE(agent.wait(10s) == 0, agent_log());
  firmware.signal(SIGTERM);
  CHECK(firmware.wait(10s) == 0);
}

}  // namespace
}  // namespace vend::agent
