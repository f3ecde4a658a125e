// The real vend-agent with its wall clock stepped while it runs (issue 36):
// libfaketime (Debian package faketime) preloaded into the agent alone, its
// offset read from a file on every call, the monotonic clock left alone
// (FAKETIME_DONT_FAKE_MONOTONIC), as an NTP step or a hand-set clock does.
// A real mosquitto and a real vend-firmware on the true clock. Stepped
// forward 40 minutes, a DISPATCHED order is not sent to review and a
// reservation does not expire early; stepped back 10 minutes, a new
// reservation lives its TTL instead of expiring on the next tick.
#include <doctest/doctest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent_api.hpp"
#include "faketime.hpp"
#include "test_support.hpp"
#include "vend/clock.hpp"
#include "vend/webhook.hpp"

namespace vend::agent {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr const char* kDevice = "vm-step-1";

bool eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

std::string state(test::AgentApi& api, const std::string& order) {
  return api.get("/v1/orders/" + order)["state"];
}
// How far the agent's wall clock is from the true one, in minutes, by the
// order's created_ms (the step did reach the agent).
int64_t offset_min(test::AgentApi& api, const std::string& order) {
  int64_t created = api.get("/v1/orders/" + order)["created_ms"];
  return (created - SystemClock().wall_ms()) / 60'000;
}

struct Fleet {
  test::TempDir dir;
  test::MosquittoServer broker;
  int http_port = test::free_port();
  std::string offset_file = dir.file("faketime.rc");
  std::unique_ptr<test::Child> agent;
  std::unique_ptr<test::Child> firmware;
  std::string token;
  std::string secret;

  std::string logs() {
    return test::read_file(dir.file("agent.log")) + "\n--- firmware ---\n" +
           test::read_file(dir.file("firmware.log"));
  }
  // The agent's wall clock from now on: "+0", "+40m", "+30m", ...
  void step_agent_clock(const std::string& offset) { test::write_file(offset_file, offset + "\n"); }

  void start_agent() {
    step_agent_clock("+0");
    std::string http = "127.0.0.1:" + std::to_string(http_port);
    agent = std::make_unique<test::Child>(
        test::faketime_command(
            {"FAKETIME_TIMESTAMP_FILE=" + offset_file, "FAKETIME_NO_CACHE=1"},
            {test::binary_path("cloud-agent/vend-agent"), "--http", http, "--mqtt", broker.url(),
             "--db", dir.file("agent.db"), "--operator-token-file", dir.file("operator.token"),
             "--gateway-secret-file", dir.file("gateway.secret"), "--reservation-ttl-s", "5"}),
        dir.file("agent.log"));
    test::AgentApi api(http_port);
    REQUIRE_MESSAGE(eventually(
                        [&] {
                          auto r = api.send("GET", "/healthz");
                          return r && r->status == 200 &&
                                 Json::parse(r->body)["mqtt_connected"] == true;
                        },
                        15s),
                    logs());
    token = test::read_file(dir.file("operator.token"));
    secret = test::read_file(dir.file("gateway.secret"));
    while (!token.empty() && token.back() == '\n') token.pop_back();
    while (!secret.empty() && secret.back() == '\n') secret.pop_back();
  }

  httplib::Headers op() { return {{"Authorization", "Bearer " + token}}; }

  void start_device() {
    test::AgentApi api(http_port);
    Json device = api.call("POST", "/v1/devices",
                           R"({"id":"vm-step-1","slots":[{"slot":1,"product":"cola",)"
                           R"("price_cents":150,"capacity":10}]})",
                           201, op());
    test::write_private_file(dir.file("device.key"), device["key"].get<std::string>() + "\n");
    Json config = {{"device_id", kDevice},
                   {"key_file", dir.file("device.key")},
                   {"broker_url", broker.url()},
                   {"ledger_path", dir.file("ledger.db")},
                   {"slots", Json::array({{{"slot", 1}, {"capacity", 10}, {"product", "cola"}}})},
                   {"sim", {{"motor_run_ms", 200}}},
                   {"core", {{"reconnect_jitter_max_ms", 0}, {"auto_confirm_restock", true}}}};
    test::write_file(dir.file("device.json"), config.dump(2));
    firmware = std::make_unique<test::Child>(
        std::vector<std::string>{test::binary_path("firmware/vend-firmware"), "--config",
                                 dir.file("device.json")},
        dir.file("firmware.log"));
    REQUIRE_MESSAGE(eventually(
                        [&] {
                          Json d = api.call("GET", "/v1/devices", "", 200, op())["devices"];
                          return d.size() == 1 && d[0]["online"] == true;
                        },
                        15s),
                    logs());
    api.call("POST", "/v1/devices/vm-step-1/restock", R"({"slot":1,"count":4})", 202, op());
    REQUIRE_MESSAGE(eventually(
                        [&] {
                          Json s = api.call("GET", "/v1/devices/vm-step-1/slots", "", 200, op());
                          return s["slots"][0]["pool"] == 4;
                        },
                        15s),
                    logs());
  }

  std::string reserve() {
    test::AgentApi api(http_port);
    return api.call("POST", "/v1/orders", R"({"device":"vm-step-1","slot":1})", 201)["id"];
  }
  // Paid as the gateway does, signed at the true time (the agent's clock is
  // not stepped yet when this is called).
  void pay(const std::string& order) {
    std::string body = R"({"payment_id":"pay-)" + order + R"(","amount_cents":150})";
    std::string sig = webhook::sign(secret, SystemClock().wall_ms() / 1000, order, body);
    test::AgentApi api(http_port);
    Json paid =
        api.call("POST", "/v1/orders/" + order + "/payment", body, 200, {{webhook::kHeader, sig}});
    REQUIRE(paid["state"] == "DISPATCHED");
  }
};

TEST_CASE("vend-agent under faketime: a clock step forward or back decides no order") {
  Fleet fleet;
  fleet.start_agent();
  fleet.start_device();
  test::AgentApi api(fleet.http_port);

  // Forward 40 minutes, past the 30-minute review time, with an order
  // DISPATCHED (its machine paused: no result yet) and one RESERVED.
  std::string dispatched = fleet.reserve();
  fleet.firmware->signal(SIGSTOP);
  fleet.pay(dispatched);
  std::string reserved = fleet.reserve();
  fleet.step_agent_clock("+40m");
  std::this_thread::sleep_for(100ms);
  REQUIRE_MESSAGE(offset_min(api, fleet.reserve()) >= 39, "the step did not reach the agent");
  std::this_thread::sleep_for(2s);
  CHECK_MESSAGE(state(api, dispatched) == "DISPATCHED", fleet.logs());
  CHECK_MESSAGE(state(api, reserved) == "RESERVED", fleet.logs());
  fleet.firmware->signal(SIGCONT);
  // The machine runs the command it holds (its clock never moved): served.
  CHECK_MESSAGE(eventually([&] { return state(api, dispatched) == "COMPLETED"; }, 20s),
                fleet.logs());
  // The reservation still expires, its 5 s measured on the monotonic clock.
  CHECK_MESSAGE(eventually([&] { return state(api, reserved) == "EXPIRED"; }, 10s), fleet.logs());

  // Back 10 minutes: a new reservation lives its TTL.
  fleet.step_agent_clock("+30m");
  std::this_thread::sleep_for(200ms);
  std::string fresh = fleet.reserve();
  CHECK(offset_min(api, fresh) >= 29);
  CHECK(offset_min(api, fresh) <= 30);
  auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(2s);
  CHECK_MESSAGE(state(api, fresh) == "RESERVED", fleet.logs());
  CHECK_MESSAGE(eventually([&] { return state(api, fresh) == "EXPIRED"; }, 10s), fleet.logs());
  CHECK(std::chrono::steady_clock::now() - t0 >= 4500ms);
  // The stepped clock is the agent's: its order timestamps moved, not the device's.
  CHECK(test::read_file(fleet.dir.file("agent.log")).find("NEEDS_REVIEW") == std::string::npos);

  fleet.agent->signal(SIGTERM);
  CHECK(fleet.agent->wait(10s) == 0);
  fleet.firmware->signal(SIGTERM);
  CHECK(fleet.firmware->wait(10s) == 0);
}

}  // namespace
}  // namespace vend::agent
