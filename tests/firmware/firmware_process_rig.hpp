// The real vend-firmware binary and a test "cloud" around it, for the tests
// that run it against a real mosquitto: a device's files and runs (Device),
// the cloud side that verifies what the device sends and signs commands
// (Cloud), and waits on the device's `status --json`.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fresh_command.hpp"
#include "test_support.hpp"
#include "vend/clock.hpp"
#include "vend/crypto.hpp"
#include "vend/log.hpp"
#include "vend/paho_transport.hpp"
#include "vend/protocol.hpp"
#include "vend/topics.hpp"

namespace vend::fw::process_rig {

using namespace std::chrono_literals;
using Json = nlohmann::json;
using proto::DispenseResult;
using proto::DispenseStatus;
using proto::TokensMinted;

inline constexpr const char* kDevice = "vm-proc-1";
inline constexpr auto kWait = 15s;

// argv prefix that runs a project binary: under the cross emulator in ARM
// builds (VEND_FIRMWARE_EMULATOR is "qemu-aarch64|-L|/usr/aarch64-linux-gnu").
inline std::vector<std::string> firmware_argv() {
  std::vector<std::string> argv;
#ifdef VEND_FIRMWARE_EMULATOR
  std::stringstream ss(VEND_FIRMWARE_EMULATOR);
  for (std::string part; std::getline(ss, part, '|');) argv.push_back(part);
  argv[0] = test::require_program(argv[0], "qemu-user");
#endif
  argv.push_back(test::binary_path("firmware/vend-firmware"));
  return argv;
}

// A finished subcommand: exit code and stdout+stderr.
struct Run {
  int code = -1;
  std::string output;
};

// One device on disk: key, config (rewritable) and the binary's runs.
class Device {
 public:
  explicit Device(const std::string& broker_url) : broker_url_(broker_url) {
    key_ = crypto::Key::generate();
    test::write_private_file(dir_.file("device.key"), key_.to_hex() + "\n");
    write_config(200);
  }
  // A config with relative file names (resolved against its directory).
  void write_config(int motor_run_ms) {
    Json config = {
        {"device_id", kDevice},
        {"key_file", "device.key"},
        {"broker_url", broker_url_},
        {"ledger_path", "ledger.db"},
        {"slots", Json::array({{{"slot", 1}, {"capacity", 10}, {"product", "cola"}},
                               {{"slot", 2}, {"capacity", 10}}})},
        {"sim", {{"motor_run_ms", motor_run_ms}}},
        {"core",
         {{"reconnect_jitter_max_ms", 0}, {"retransmit_ms", 1000}, {"snapshot_interval_ms", 0}}}};
    test::write_file(config_path(), config.dump(2));
  }
  void write_config(const Json& config) { test::write_file(config_path(), config.dump(2)); }
  std::string config_path() const { return dir_.file("device.json"); }
  std::string file(const std::string& name) const { return dir_.file(name); }
  const crypto::Key& key() const { return key_; }

  // Runs a subcommand to completion.
  Run run(std::vector<std::string> args) {
    std::string log = dir_.file("cmd-" + std::to_string(++runs_) + ".log");
    std::vector<std::string> argv = firmware_argv();
    argv.insert(argv.end(), args.begin(), args.end());
    test::Child child(argv, log);
    int code = child.wait(20s);
    return Run{code, test::read_file(log)};
  }
  Json status() {
    Run r = run({"status", "--config", config_path(), "--json"});
    REQUIRE_MESSAGE(r.code == 0, r.output);
    return Json::parse(r.output);
  }
  // `env`: variables for the daemon only (through the emulator's -E in ARM
  // builds, which would otherwise apply them to itself).
  void start_daemon(const std::vector<std::pair<std::string, std::string>>& env = {}) {
    std::vector<std::string> argv = firmware_argv();
#ifdef VEND_FIRMWARE_EMULATOR
    for (const auto& [name, value] : env) {
      argv.insert(argv.begin() + 1, {"-E", name + "=" + value});
    }
#else
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
#endif
    argv.insert(argv.end(), {"--config", config_path(), "--log-level", "debug"});
    daemon_ = std::make_unique<test::Child>(argv, dir_.file("daemon.log"));
#ifndef VEND_FIRMWARE_EMULATOR
    for (const auto& [name, value] : env) unsetenv(name.c_str());
#endif
  }
  test::Child& daemon() { return *daemon_; }
  std::string daemon_log() const { return test::read_file(dir_.file("daemon.log")); }

 private:
  test::TempDir dir_;
  std::string broker_url_;
  crypto::Key key_;
  int runs_ = 0;
  std::unique_ptr<test::Child> daemon_;
};

// The cloud side: receives and verifies device events, signs commands.
class Cloud {
 public:
  Cloud(const std::string& url, const crypto::Key& key)
      : key_(key), transport_(options(url), log_) {
    transport_.on_message([this](const Message& m) { receive(m); });
    REQUIRE(transport_.connect().ok());
    REQUIRE(transport_.subscribe(topics::device_evt(kDevice), 1).ok());
    REQUIRE(transport_.subscribe(topics::device_status(kDevice), 1).ok());
  }

  void send(const proto::Command& unstamped) {
    proto::Command command = vend::test::fresh_command(unstamped, SystemClock().wall_ms());
    std::string mac = crypto::sign(key_, proto::encode_canonical(command));
    publish_raw(proto::encode(command, mac));
  }
  void publish_raw(const std::string& payload) {
    REQUIRE(transport_.publish(Message{topics::device_cmd(kDevice), payload, 1, false}).ok());
  }

  // Waits until `pred` holds over what was received so far. The accessors
  // below lock the same (recursive) mutex, so `pred` may use them.
  template <typename Pred>
  bool wait(Pred pred, std::chrono::milliseconds timeout = kWait) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(); });
  }
  std::vector<DispenseResult> results(const std::string& order) {
    std::lock_guard lock(mu_);
    std::vector<DispenseResult> out;
    for (const auto& e : events_) {
      auto* r = std::get_if<DispenseResult>(&e.body);
      if (r != nullptr && r->order_id == order) out.push_back(*r);
    }
    return out;
  }
  std::optional<TokensMinted> tokens(const std::string& restock_id) {
    std::lock_guard lock(mu_);
    for (const auto& e : events_) {
      auto* t = std::get_if<TokensMinted>(&e.body);
      if (t != nullptr && t->restock_id == restock_id) return *t;
    }
    return std::nullopt;
  }
  std::optional<proto::PresenceStatus> presence() {
    std::lock_guard lock(mu_);
    return presence_;
  }
  uint64_t max_seq() {
    std::lock_guard lock(mu_);
    uint64_t seq = 0;
    for (const auto& e : events_) seq = std::max(seq, e.seq);
    return seq;
  }
  int bad_macs() {
    std::lock_guard lock(mu_);
    return bad_macs_;
  }

 private:
  static PahoOptions options(const std::string& url) {
    PahoOptions o;
    o.server_uri = url;
    o.client_id = "cloud-under-test";
    o.clean_session = true;
    o.reconnect_min = 200ms;
    o.reconnect_max = 1000ms;
    return o;
  }
  void receive(const Message& m) {
    std::lock_guard lock(mu_);
    if (m.topic == topics::device_status(kDevice)) {
      auto s = proto::decode_status(m.payload);
      if (s.ok() && crypto::verify(key_, s->canonical, s->mac)) {
        presence_ = s->message;
      } else {
        ++bad_macs_;
      }
    } else {
      auto e = proto::decode_event(m.payload);
      if (e.ok() && crypto::verify(key_, e->canonical, e->mac)) {
        events_.push_back(e->message);
      } else {
        ++bad_macs_;
      }
    }
    cv_.notify_all();
  }

  crypto::Key key_;
  NullLogger log_;
  std::recursive_mutex mu_;
  std::condition_variable_any cv_;
  std::vector<proto::DeviceEvent> events_;
  std::optional<proto::PresenceStatus> presence_;
  int bad_macs_ = 0;
  PahoTransport transport_;  // last: its threads call receive()
};

inline proto::DispenseCommand dispense(const std::string& order, int slot,
                                       const std::string& token) {
  int64_t now = SystemClock().wall_ms();
  return proto::DispenseCommand{kDevice, order, slot, token, now + 60'000};
}

// Polls `status --json` until `pred` holds (the ledger is the device's truth).
template <typename Pred>
inline bool wait_status(Device& device, Pred pred, std::chrono::milliseconds timeout = kWait) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred(device.status())) return true;
  }
  return false;
}

}  // namespace vend::fw::process_rig
