// docs/operations.md "Replacing a board or its SD card, rotating a key,
// decommissioning" with the real binaries: mosquitto, vend-agent,
// vend-firmware (simulated HAL, restocks confirmed at once) and vendctl.
// The SD card is wiped (a new ledger, seq from 1) and every event of the new
// ledger reaches the pools; the key is rotated by file; the machine is
// decommissioned. An older copy of ledger.db is put back (a restored card):
// the device goes on as a new ledger, no event is lost, a paid order completes.
#include <doctest/doctest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent_api.hpp"
#include "e2e_support.hpp"
#include "test_support.hpp"
#include "vend/webhook.hpp"

namespace vend::agent {
namespace {

using test_rig::eventually;
using test_rig::trim;

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr const char* kDevice = "vm-swap-1";

// The operator's HTTP calls (what curl does in docs/operations.md).
class OperatorApi {
 public:
  OperatorApi(int port, const std::string& token) : api_(port) { api_.set_operator_token(token); }
  Json get(const std::string& path) { return api_.get(path, 200, true); }
  Json post(const std::string& path, const std::string& body, int expect) {
    return api_.post(path, body, expect, {}, true);
  }
  Json device() {
    const Json all = get("/v1/devices");
    for (const Json& d : all["devices"]) {
      if (d["id"] == kDevice) return d;
    }
    return Json::object();
  }
  int64_t pool() {
    return get(std::string("/v1/devices/") + kDevice + "/slots")["slots"][0]["pool"];
  }
  std::string metrics() {
    auto r = api_.send("GET", "/metrics", "", {}, true);
    return r ? r->body : "";
  }

 private:
  test::AgentApi api_;
};

std::string device_config(const std::string& broker_url) {
  Json config = {{"device_id", kDevice},
                 {"key_file", "device.key"},
                 {"broker_url", broker_url},
                 {"ledger_path", "ledger.db"},
                 {"slots", Json::array({{{"slot", 1}, {"capacity", 20}, {"product", "cola"}}})},
                 {"sim", {{"motor_run_ms", 200}}},
                 {"core", {{"reconnect_jitter_max_ms", 0}, {"auto_confirm_restock", true}}}};
  return config.dump(2);
}

TEST_CASE("operations runbook with the real binaries: reflash, key rotation, decommission") {
  test::TempDir dir;
  test::MosquittoServer broker;
  int http_port = test::free_port();
  std::string http = "127.0.0.1:" + std::to_string(http_port);
  test::Child agent(
      {test::binary_path("cloud-agent/vend-agent"), "--http", http, "--mqtt", broker.url(), "--db",
       dir.file("agent.db"), "--operator-token-file", dir.file("operator.token"),
       "--gateway-secret-file", dir.file("gateway.secret")},
      dir.file("agent.log"));
  auto logs = [&] {
    return test::read_file(dir.file("agent.log")) + "\n--- firmware ---\n" +
           test::read_file(dir.file("firmware.log"));
  };
  REQUIRE_MESSAGE(
      eventually([&] { return test::read_file(dir.file("operator.token")).size() > 0; }, 10s),
      logs());
  OperatorApi api(http_port, trim(test::read_file(dir.file("operator.token"))));
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        httplib::Client c("127.0.0.1", http_port);
                        auto r = c.Get("/healthz");
                        return r && r->status == 200;
                      },
                      10s),
                  logs());
  Json provisioned = api.post("/v1/devices",
                              std::string(R"({"id":")") + kDevice +
                                  R"(","slots":[{"slot":1,"product":"cola",)"
                                  R"("price_cents":150,"capacity":20}]})",
                              201);
  test::write_private_file(dir.file("device.key"), provisioned["key"].get<std::string>() + "\n");
  test::write_file(dir.file("device.json"), device_config(broker.url()));
  const std::string firmware = test::binary_path("firmware/vend-firmware");
  auto start_firmware = [&] {
    return std::make_unique<test::Child>(
        std::vector<std::string>{firmware, "--config", dir.file("device.json")},
        dir.file("firmware.log"));
  };
  auto restock = [&](int count) {
    api.post(std::string("/v1/devices/") + kDevice + "/restock",
             R"({"slot":1,"count":)" + std::to_string(count) + "}", 202);
  };

  // The old card: three restocks, seq 1..3 processed.
  auto daemon = start_firmware();
  REQUIRE_MESSAGE(eventually([&] { return api.device().value("online", false); }, 15s), logs());
  for (int i = 0; i < 3; ++i) restock(1);
  REQUIRE_MESSAGE(eventually([&] { return api.pool() == 3; }, 15s), logs());
  const std::string old_ledger = api.device()["ledger_id"];
  CHECK(old_ledger.size() == 32);

  // Reflash: the daemon stops, the ledger is gone, the same config and key.
  daemon->signal(SIGTERM);
  REQUIRE(daemon->wait(10s) == 0);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::remove((dir.file("ledger.db") + suffix).c_str());
  }
  daemon = start_firmware();
  // Five events on the new ledger, seqs 1..5: past the old seq 3.
  REQUIRE_MESSAGE(eventually([&] { return api.device().value("online", false); }, 15s), logs());
  for (int i = 0; i < 5; ++i) restock(1);
  // Every new event processed (the machine's outbox is empty and the agent is
  // at its last seq); the old card's 3 tokens left the pool.
  auto machine_status = [&] {
    test::Child status({firmware, "status", "--config", dir.file("device.json"), "--json"},
                       dir.file("status.out"));
    REQUIRE(status.wait(20s) == 0);
    std::string text = test::read_file(dir.file("status.out"));
    std::remove(dir.file("status.out").c_str());
    return Json::parse(text);
  };
  Json machine;
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        machine = machine_status();
                        Json d = api.device();
                        return machine["outbox_depth"] == 0 &&
                               d["last_processed_seq"] == machine["last_seq"] &&
                               d["ledger_id"] == machine["ledger_id"] && api.pool() == 5;
                      },
                      20s),
                  logs());
  Json device = api.device();
  CHECK(device["ledger_id"] != old_ledger);
  CHECK(machine["last_seq"].get<int64_t>() >= 5);
  CHECK(api.metrics().find("vend_device_ledgers_replaced_total 1\n") != std::string::npos);

  // Key rotation with vendctl: the new key file, a restart, and the old key is revoked.
  const std::string vendctl = test::binary_path("vendctl/vendctl");
  test::Child rotate({vendctl, "rotate-key", kDevice, "--api", "http://" + http, "--token-file",
                      dir.file("operator.token"), "--json"},
                     dir.file("rotate.out"));
  REQUIRE(rotate.wait(20s) == 0);
  std::string out = test::read_file(dir.file("rotate.out"));
  Json rotated = Json::parse(out.substr(0, out.find('\n')));
  CHECK(api.device()["key_rotation_pending"] == true);
  daemon->signal(SIGTERM);
  REQUIRE(daemon->wait(10s) == 0);
  test::write_private_file(dir.file("device.key"), rotated["key"].get<std::string>() + "\n");
  daemon = start_firmware();
  REQUIRE_MESSAGE(eventually([&] { return api.device()["key_rotation_pending"] == false; }, 15s),
                  logs());
  restock(2);  // signed with the new key, confirmed by the device, its tokens verified
  REQUIRE_MESSAGE(eventually([&] { return api.pool() == 7; }, 15s), logs());

  // Decommission: withdrawn from sale, refused afterwards.
  test::Child gone({vendctl, "decommission", kDevice, "--api", "http://" + http, "--token-file",
                    dir.file("operator.token")},
                   dir.file("decommission.out"));
  REQUIRE(gone.wait(20s) == 0);
  CHECK(test::read_file(dir.file("decommission.out")).find("7 token(s) withdrawn") !=
        std::string::npos);
  CHECK(api.pool() == 0);
  Json refused =
      api.post(std::string("/v1/devices/") + kDevice + "/restock", R"({"slot":1,"count":1})", 409);
  CHECK(refused["error"]["code"] == "decommissioned");
  CHECK(api.device()["decommissioned"] == true);

  daemon->signal(SIGTERM);
  CHECK(daemon->wait(10s) == 0);
  agent.signal(SIGTERM);
  CHECK(agent.wait(10s) == 0);
}

TEST_CASE("a restored ledger.db with the real binaries: a new ledger, and sales go on") {
  test::TempDir dir;
  test::MosquittoServer broker;
  int http_port = test::free_port();
  std::string http = "127.0.0.1:" + std::to_string(http_port);
  test::Child agent(
      {test::binary_path("cloud-agent/vend-agent"), "--http", http, "--mqtt", broker.url(), "--db",
       dir.file("agent.db"), "--operator-token-file", dir.file("operator.token"),
       "--gateway-secret-file", dir.file("gateway.secret")},
      dir.file("agent.log"));
  auto logs = [&] {
    return test::read_file(dir.file("agent.log")) + "\n--- firmware ---\n" +
           test::read_file(dir.file("firmware.log"));
  };
  REQUIRE_MESSAGE(
      eventually([&] { return test::read_file(dir.file("operator.token")).size() > 0; }, 10s),
      logs());
  OperatorApi api(http_port, trim(test::read_file(dir.file("operator.token"))));
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        httplib::Client c("127.0.0.1", http_port);
                        auto r = c.Get("/healthz");
                        return r && r->status == 200;
                      },
                      10s),
                  logs());
  Json provisioned = api.post("/v1/devices",
                              std::string(R"({"id":")") + kDevice +
                                  R"(","slots":[{"slot":1,"product":"cola",)"
                                  R"("price_cents":150,"capacity":20}]})",
                              201);
  test::write_private_file(dir.file("device.key"), provisioned["key"].get<std::string>() + "\n");
  test::write_file(dir.file("device.json"), device_config(broker.url()));
  const std::string firmware = test::binary_path("firmware/vend-firmware");
  auto start_firmware = [&] {
    auto child = std::make_unique<test::Child>(
        std::vector<std::string>{firmware, "--config", dir.file("device.json")},
        dir.file("firmware.log"));
    REQUIRE_MESSAGE(eventually([&] { return api.device().value("online", false); }, 15s), logs());
    return child;
  };
  auto stop_firmware = [&](std::unique_ptr<test::Child>& daemon) {
    daemon->signal(SIGTERM);
    REQUIRE(daemon->wait(10s) == 0);
    daemon.reset();
    REQUIRE_MESSAGE(eventually([&] { return !api.device().value("online", true); }, 15s), logs());
  };
  auto restock = [&](int count) {
    api.post(std::string("/v1/devices/") + kDevice + "/restock",
             R"({"slot":1,"count":)" + std::to_string(count) + "}", 202);
  };
  auto machine_status = [&] {
    test::Child status({firmware, "status", "--config", dir.file("device.json"), "--json"},
                       dir.file("status.out"));
    REQUIRE(status.wait(20s) == 0);
    std::string text = test::read_file(dir.file("status.out"));
    std::remove(dir.file("status.out").c_str());
    return Json::parse(text);
  };
  auto settled = [&](int64_t pool) {
    Json machine = machine_status();
    Json d = api.device();
    return machine["outbox_depth"] == 0 && d["last_processed_seq"] == machine["last_seq"] &&
           d["ledger_id"] == machine["ledger_id"] && api.pool() == pool;
  };

  auto daemon = start_firmware();
  restock(3);
  REQUIRE_MESSAGE(eventually([&] { return settled(3); }, 20s), logs());
  // The card is backed up with the firmware stopped (a clean stop leaves no WAL).
  stop_firmware(daemon);
  for (const char* suffix : {"", "-wal"}) {
    std::filesystem::path from = dir.file("ledger.db") + suffix;
    if (std::filesystem::exists(from)) {
      std::filesystem::copy_file(from, dir.file("backup.db") + suffix);
    }
  }
  daemon = start_firmware();
  restock(2);
  REQUIRE_MESSAGE(eventually([&] { return settled(5); }, 20s), logs());
  const std::string ledger_id = machine_status()["ledger_id"];

  // The backup is copied back, the firmware stopped meanwhile: seq 1 again.
  stop_firmware(daemon);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::remove(dir.file("ledger.db") + suffix);
    std::filesystem::path from = dir.file("backup.db") + suffix;
    if (std::filesystem::exists(from)) {
      std::filesystem::copy_file(from, dir.file("ledger.db") + suffix);
    }
  }
  REQUIRE(machine_status()["ledger_id"] == ledger_id);
  daemon = start_firmware();
  restock(1);  // seq 2 again, another event
  // The device went on as a new ledger; its tokens event was processed; the
  // two tokens minted after the backup left the pool (the card lost them).
  REQUIRE_MESSAGE(eventually([&] { return settled(4); }, 30s), logs());
  CHECK(machine_status()["ledger_id"] != ledger_id);
  CHECK(api.metrics().find("vend_device_ledgers_replaced_total 1\n") != std::string::npos);
  CHECK(test::read_file(dir.file("firmware.log")).find("went back in time") != std::string::npos);

  // A customer pays an order: it completes.
  Json order =
      api.post("/v1/orders", std::string(R"({"device":")") + kDevice + R"(","slot":1})", 201);
  const std::string id = order["id"];
  const std::string secret = trim(test::read_file(dir.file("gateway.secret")));
  const std::string body = R"({"payment_id":"pay-restored-1","amount_cents":150})";
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  httplib::Client customer("127.0.0.1", http_port);
  auto paid = customer.Post(("/v1/orders/" + id + "/payment").c_str(),
                            {{"Vend-Signature", webhook::sign(secret, now_s, id, body)}}, body,
                            "application/json");
  REQUIRE(paid);
  INFO(paid->body);
  REQUIRE(paid->status == 200);
  REQUIRE_MESSAGE(
      eventually([&] { return api.get("/v1/orders/" + id)["state"] == "COMPLETED"; }, 15s), logs());
  CHECK(api.pool() == 3);

  stop_firmware(daemon);
  agent.signal(SIGTERM);
  CHECK(agent.wait(10s) == 0);
}

}  // namespace
}  // namespace vend::agent
