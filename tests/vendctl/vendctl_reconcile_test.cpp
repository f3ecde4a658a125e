// `vendctl reconcile`: against a scripted loopback httplib server that plays
// the agent's reconcile routes (polling until the report of its request
// arrives, the --wait deadline, errors), and end to end against the real
// vend-agent and a real vend-firmware device; `watch --once` then shows the
// device's stock and verdict from the agent's own ops topics.
#include <doctest/doctest.h>
#include <httplib.h>
#include <stdlib.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "ctl_rig.hpp"
#include "test_support.hpp"
#include "vend/ops.hpp"

namespace vend::ctl {
namespace {

using namespace std::chrono_literals;
using namespace testing;  // NOLINT: the rig is the test's vocabulary

TEST_CASE("vendctl reconcile polls until the report of its request arrives") {
  test::TempDir dir;
  ops::ReconcileReport stale;
  stale.id = "rec-old";
  stale.device = "vm-r1";
  stale.request_id = "rq-old";
  stale.verdict = "ok";
  ops::ReconcileReport fresh = stale;
  fresh.id = "rec-new";
  fresh.request_id = "rq-42";
  fresh.trigger = "on_demand";
  fresh.full = true;
  fresh.verdict = "repaired";
  fresh.slots = {{1, 3, 0, 0, 2, 2, false, "repaired", {"pool 3 -> 2"}, 0, 1}};

  std::atomic<int> polls{0};
  std::atomic<bool> report_ready{true};
  httplib::Server server;
  server.Post(R"(/v1/devices/([A-Za-z0-9._-]+)/reconcile)",
              [&](const httplib::Request& req, httplib::Response& res) {
                if (req.get_header_value("Authorization") != "Bearer env-token-0123456789abcdef") {
                  res.status = 401;
                  res.set_content(R"({"error":{"code":"unauthorized","message":"bad token"}})",
                                  "application/json");
                  return;
                }
                res.status = 202;
                res.set_content(R"({"device":")" + std::string(req.matches[1]) +
                                    R"(","full":true,"request_id":"rq-42"})",
                                "application/json");
              });
  server.Get(
      R"(/v1/reconcile/([A-Za-z0-9._-]+))", [&](const httplib::Request&, httplib::Response& res) {
        const int n = ++polls;
        res.status = n == 1 ? 404 : 200;  // none yet, then an older report, then ours
        if (n == 1) {
          res.set_content(R"({"error":{"code":"not_found","message":"no report"}})",
                          "application/json");
        } else {
          res.set_content(ops::encode(n < 3 || !report_ready ? stale : fresh), "application/json");
        }
      });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { server.listen_after_bind(); });
  const std::string api = "http://127.0.0.1:" + std::to_string(port);
  setenv("VEND_OPERATOR_TOKEN", "env-token-0123456789abcdef", 1);

  Run run = vendctl(dir, {"reconcile", "vm-r1", "--api", api, "--wait", "10"});
  CHECK_MESSAGE(run.code == 0, run.output);
  CHECK(polls >= 3);
  CHECK(has(run, "reconcile rec-new of vm-r1"));
  CHECK(has(run, ": repaired (trigger on_demand, snapshot seq 0, full)"));
  CHECK(has(run,
            "1     repaired  3     0     0     2         2           DIFFERS  "
            "pool 3 -> 2; tokens +0/-1"));

  report_ready = false;  // only the old report: the wait ends without ours
  Run timeout = vendctl(dir, {"reconcile", "vm-r1", "--api", api, "--wait", "1"});
  CHECK(timeout.code == 4);
  CHECK(has(timeout, "vendctl: no_report: no report for request rq-42 of vm-r1 within 1 s"));

  unsetenv("VEND_OPERATOR_TOKEN");
  Run unauthorized = vendctl(dir, {"reconcile", "vm-r1", "--api", api});
  CHECK(unauthorized.code == 1);
  CHECK(has(unauthorized, "vendctl: unauthorized: bad token"));
  server.stop();
  serving.join();
}

// A device config for vend-firmware (docs/agent.md step 4): the simulated
// HAL, restocks confirmed at the machine at once.
std::string device_config(const std::string& device, const std::string& broker_url,
                          const test::TempDir& dir) {
  nlohmann::json config = {
      {"device_id", device},
      {"key_file", dir.file("device.key")},
      {"broker_url", broker_url},
      {"ledger_path", dir.file("ledger.db")},
      {"slots", nlohmann::json::array({{{"slot", 1}, {"capacity", 10}, {"product", "cola"}}})},
      {"sim", {{"motor_run_ms", 200}}},
      {"core", {{"reconnect_jitter_max_ms", 0}, {"auto_confirm_restock", true}}}};
  return config.dump(2);
}

TEST_CASE("vendctl reconcile and watch end to end: real vend-agent, real device") {
  test::TempDir dir;
  RealAgent agent(dir);
  REQUIRE_MESSAGE(agent.started(), agent.log());
  Run provision = agent.ctl({"provision", "vm-rec-1", "--slot", "1:cola:150:10", "--json"});
  REQUIRE_MESSAGE(provision.code == 0, provision.output);
  // --json prints the answer on stdout and the warning on stderr (one log here).
  const std::string key =
      nlohmann::json::parse(provision.output.substr(0, provision.output.find('\n')))["key"];
  test::write_private_file(dir.file("device.key"), key + "\n");
  test::write_file(dir.file("device.json"), device_config("vm-rec-1", agent.broker().url(), dir));
  test::Child device(
      {test::binary_path("firmware/vend-firmware"), "--config", dir.file("device.json")},
      dir.file("firmware.log"));
  auto logs = [&] {
    return agent.log() + "\n--- firmware ---\n" + test::read_file(dir.file("firmware.log"));
  };
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        return has_row(agent.ctl({"devices"}).output,
                                       {"vm-rec-1", "yes", "*", "ago", "*", "*"});
                      },
                      15s),
                  logs());
  REQUIRE(agent.ctl({"restock", "vm-rec-1", "1", "4"}).code == 0);

  // Once the minted tokens reached the pool the cloud and device views agree.
  Run report;
  REQUIRE_MESSAGE(
      eventually(
          [&] {
            report = agent.ctl({"reconcile", "vm-rec-1", "--wait", "10"});
            return has_row(report.output, {"1", "match", "4", "0", "0", "4", "4", "match", "-"});
          },
          20s),
      (report.output + "\n" + logs()));
  CHECK(report.code == 0);
  CHECK(has(report, "of vm-rec-1 at "));
  CHECK(has(report, ": ok (trigger on_demand, snapshot seq "));

  // The agent publishes a device's retained status at most once a second.
  Run watch;
  CHECK_MESSAGE(eventually(
                    [&] {
                      watch = vendctl(dir, {"watch", "--once", "--mqtt", agent.broker().url()});
                      return has_row(watch.output, {"vm-rec-1", "yes", "*", "4", "0/0", "*", "ok"});
                    },
                    10s),
                watch.output);
  CHECK(watch.code == 0);
  CHECK(has(watch, "devices 1/1 online | stock 4 | "));
}

}  // namespace
}  // namespace vend::ctl
