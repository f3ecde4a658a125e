// The clock_skew alert with the real vend-agent, vend-firmware and mosquitto
// (issue 36): a kill -9 of the agent while the machine keeps sending (a
// periodic snapshot a second) leaves a backlog in the agent's broker session
// and the machine's outbox, stamped seconds ago; the restarted agent drains
// it without a clock_skew alert. A machine whose clock really runs 10 s
// behind (libfaketime on vend-firmware alone) is alerted, once.
#include <doctest/doctest.h>
#include <httplib.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent_api.hpp"
#include "e2e_support.hpp"
#include "faketime.hpp"
#include "test_support.hpp"

namespace vend::agent {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
using test_rig::eventually;

constexpr const char* kDevice = "vm-skew-1";

struct Fleet {
  test::TempDir dir;
  test::MosquittoServer broker;
  int http_port = test::free_port();
  std::unique_ptr<test::Child> agent;
  std::unique_ptr<test::Child> firmware;
  std::string token;

  std::string agent_log() const { return test::read_file(dir.file("agent.log")); }
  std::string logs() const {
    return agent_log() + "\n--- firmware ---\n" + test::read_file(dir.file("firmware.log"));
  }
  Json get(const std::string& path) {
    test::AgentApi api(http_port);
    api.set_operator_token(token);
    return api.get(path, 200, true);
  }

  void start_agent() {
    agent = std::make_unique<test::Child>(
        std::vector<std::string>{test::binary_path("cloud-agent/vend-agent"), "--http",
                                 "127.0.0.1:" + std::to_string(http_port), "--mqtt", broker.url(),
                                 "--db", dir.file("agent.db"), "--operator-token-file",
                                 dir.file("operator.token"), "--gateway-secret-file",
                                 dir.file("gateway.secret")},
        dir.file("agent.log"));
    REQUIRE_MESSAGE(eventually(
                        [&] {
                          httplib::Client c("127.0.0.1", http_port);
                          auto r = c.Get("/healthz");
                          return r && r->status == 200 &&
                                 Json::parse(r->body)["mqtt_connected"] == true;
                        },
                        15s),
                    logs());
    token = test_rig::trim(test::read_file(dir.file("operator.token")));
  }

  // Provisions the machine and starts its firmware (a snapshot every
  // second), under libfaketime with FAKETIME=`faketime` unless empty.
  void start_device(const std::string& faketime = "") {
    httplib::Client c("127.0.0.1", http_port);
    auto r = c.Post("/v1/devices", {{"Authorization", "Bearer " + token}},
                    R"({"id":"vm-skew-1","slots":[{"slot":1,"product":"cola",)"
                    R"("price_cents":150,"capacity":10}]})",
                    "application/json");
    REQUIRE(r);
    REQUIRE_MESSAGE(r->status == 201, r->body);
    test::write_private_file(dir.file("device.key"),
                             Json::parse(r->body)["key"].get<std::string>() + "\n");
    Json config = {{"device_id", kDevice},
                   {"key_file", dir.file("device.key")},
                   {"broker_url", broker.url()},
                   {"ledger_path", dir.file("ledger.db")},
                   {"slots", Json::array({{{"slot", 1}, {"capacity", 10}, {"product", "cola"}}})},
                   {"core", {{"reconnect_jitter_max_ms", 0}, {"snapshot_interval_ms", 1000}}}};
    test::write_file(dir.file("device.json"), config.dump(2));
    std::vector<std::string> argv = {test::binary_path("firmware/vend-firmware"), "--config",
                                     dir.file("device.json")};
    if (!faketime.empty()) argv = test::faketime_command({"FAKETIME=" + faketime}, argv);
    firmware = std::make_unique<test::Child>(argv, dir.file("firmware.log"));
    REQUIRE_MESSAGE(
        eventually([&] { return get("/v1/devices")["devices"][0]["online"] == true; }, 15s),
        logs());
  }

  bool skew_alert_active() {
    Json alerts = get("/v1/alerts");
    for (const auto& a : alerts["alerts"]) {
      if (a["code"] == "clock_skew") return true;
    }
    return false;
  }
  size_t alerts_raised() const {
    std::string log = agent_log();
    size_t n = 0;
    for (size_t at = log.find("ALERT clock_skew"); at != std::string::npos;
         at = log.find("ALERT clock_skew", at + 1)) {
      ++n;
    }
    return n;
  }
};

}  // namespace

TEST_CASE("vend-agent killed and restarted under a machine's backlog: no clock_skew alert") {
  Fleet fleet;
  fleet.start_agent();
  fleet.start_device();
  REQUIRE_MESSAGE(
      eventually([&] { return !fleet.get("/v1/devices")["devices"][0]["clock_skew_ms"].is_null(); },
                 10s),
      fleet.logs());
  int64_t seq = fleet.get("/v1/devices")["devices"][0]["last_processed_seq"];
  fleet.agent->kill_now();
  std::this_thread::sleep_for(6s);  // six snapshots wait for the agent
  fleet.start_agent();
  // The backlog drained (the six snapshots processed), and then some.
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        Json d = fleet.get("/v1/devices")["devices"][0];
                        return d["online"] == true && d["last_processed_seq"] >= seq + 6;
                      },
                      20s),
                  fleet.logs());
  std::this_thread::sleep_for(4s);
  CHECK_MESSAGE(fleet.alerts_raised() == 0, fleet.logs());
  CHECK_FALSE(fleet.skew_alert_active());
  Json device = fleet.get("/v1/devices")["devices"][0];
  REQUIRE_FALSE(device["clock_skew_ms"].is_null());
  CHECK(device["clock_skew_ms"].get<int64_t>() > -1000);  // one clock: delivery delay at most
}

TEST_CASE("a machine whose clock runs 10 s behind is alerted once") {
  Fleet fleet;
  fleet.start_agent();
  fleet.start_device("-10");
  CHECK_MESSAGE(eventually([&] { return fleet.skew_alert_active(); }, 20s), fleet.logs());
  CHECK(fleet.agent_log().find("device clock behind by at least") != std::string::npos);
  std::this_thread::sleep_for(3s);
  CHECK_MESSAGE(fleet.alerts_raised() == 1, fleet.logs());
}

}  // namespace vend::agent
