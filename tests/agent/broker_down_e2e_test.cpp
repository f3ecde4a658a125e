// New reservations while the agent has no broker connection, with the real
// binaries (mosquitto, vend-agent, vend-firmware; issue 36): refused with
// 503 broker_unreachable and a Retry-After, counted; accepted again once
// the broker is back and the machine with it.
#include <doctest/doctest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "e2e_support.hpp"
#include "test_support.hpp"

namespace vend::agent {
namespace {

using test_rig::eventually;
using test_rig::trim;

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr const char* kDevice = "vm-nobroker-1";

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

TEST_CASE("vend-agent without its broker: new orders 503 broker_unreachable, then accepted") {
  test::TempDir dir;
  test::MosquittoServer broker;
  int http_port = test::free_port();
  test::Child agent({test::binary_path("cloud-agent/vend-agent"), "--http",
                     "127.0.0.1:" + std::to_string(http_port), "--mqtt", broker.url(), "--db",
                     dir.file("agent.db"), "--operator-token-file", dir.file("operator.token"),
                     "--gateway-secret-file", dir.file("gateway.secret")},
                    dir.file("agent.log"));
  auto logs = [&] {
    return test::read_file(dir.file("agent.log")) + "\n--- firmware ---\n" +
           test::read_file(dir.file("firmware.log"));
  };
  httplib::Client api("127.0.0.1", http_port);
  api.set_read_timeout(10, 0);
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        auto r = api.Get("/healthz");
                        return r && Json::parse(r->body)["mqtt_connected"] == true;
                      },
                      15s),
                  logs());
  httplib::Headers op = {
      {"Authorization", "Bearer " + trim(test::read_file(dir.file("operator.token")))}};
  auto provisioned = api.Post("/v1/devices", op,
                              R"({"id":"vm-nobroker-1","slots":[{"slot":1,"product":"cola",
                                  "price_cents":150,"capacity":10}]})",
                              "application/json");
  REQUIRE(provisioned);
  REQUIRE(provisioned->status == 201);
  test::write_private_file(dir.file("device.key"),
                           Json::parse(provisioned->body)["key"].get<std::string>() + "\n");
  test::write_file(dir.file("device.json"), device_config(broker.url()));
  test::Child firmware(
      {test::binary_path("firmware/vend-firmware"), "--config", dir.file("device.json")},
      dir.file("firmware.log"));
  auto slot_pool = [&] {
    auto r = api.Get("/v1/devices/vm-nobroker-1/slots", op);
    return r && r->status == 200 ? Json::parse(r->body)["slots"][0]["pool"].get<int>() : -1;
  };
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        auto r = api.Post("/v1/devices/vm-nobroker-1/restock", op,
                                          R"({"slot":1,"count":3})", "application/json");
                        return r && r->status == 202;
                      },
                      20s),
                  logs());
  REQUIRE_MESSAGE(eventually([&] { return slot_pool() == 3; }, 20s), logs());
  auto order = [&] {
    return api.Post("/v1/orders", R"({"device":"vm-nobroker-1","slot":1})", "application/json");
  };

  broker.stop();
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        auto r = api.Get("/healthz");
                        return r && Json::parse(r->body)["mqtt_connected"] == false;
                      },
                      15s),
                  logs());
  auto refused = order();
  REQUIRE(refused);
  INFO(refused->body);
  CHECK(refused->status == 503);
  CHECK(Json::parse(refused->body)["error"]["code"] == "broker_unreachable");
  CHECK(refused->get_header_value("Retry-After") == "5");
  CHECK(slot_pool() == 3);  // nothing reserved
  auto metrics = api.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->body.find("vend_reservations_broker_unreachable_total 1\n") != std::string::npos);

  broker.start();
  // The agent and the machine reconnect; orders are taken again.
  int status = 0;
  CHECK_MESSAGE(eventually(
                    [&] {
                      auto r = order();
                      status = r ? r->status : 0;
                      return status == 201;
                    },
                    40s),
                "last status " << status << "\n"
                               << logs());
  CHECK(slot_pool() == 2);

  agent.signal(SIGTERM);
  CHECK(agent.wait(10s) == 0);
  firmware.signal(SIGTERM);
  CHECK(firmware.wait(10s) == 0);
}

}  // namespace
}  // namespace vend::agent
