// The real vend-firmware binary against a real mosquitto: restock, a signed
// dispense, ack, kill -9 mid-rotation and restart (UNCERTAIN, never twice),
// a signed command from `sign-dispense`, and events written while the broker
// is down arriving once it is back. A test "cloud" talks to it through
// PahoTransport and verifies the MAC of everything the device sends.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "fresh_command.hpp"
#include "test_support.hpp"
#include "vend/clock.hpp"
#include "vend/crypto.hpp"
#include "vend/log.hpp"
#include "vend/paho_transport.hpp"
#include "vend/protocol.hpp"
#include "vend/topics.hpp"

namespace vend::fw {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
using proto::DispenseResult;
using proto::DispenseStatus;
using proto::TokensMinted;

constexpr const char* kDevice = "vm-proc-1";
constexpr auto kWait = 15s;

// argv prefix that runs a project binary: under the cross emulator in ARM
// builds (VEND_FIRMWARE_EMULATOR is "qemu-aarch64|-L|/usr/aarch64-linux-gnu").
std::vector<std::string> firmware_argv() {
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
  std::string config_path() const { return dir_.file("device.json"); }
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
  void start_daemon() {
    std::vector<std::string> argv = firmware_argv();
    argv.insert(argv.end(), {"--config", config_path(), "--log-level", "debug"});
    daemon_ = std::make_unique<test::Child>(argv, dir_.file("daemon.log"));
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

proto::DispenseCommand dispense(const std::string& order, int slot, const std::string& token) {
  int64_t now = SystemClock().wall_ms();
  return proto::DispenseCommand{kDevice, order, slot, token, now + 60'000};
}

// Polls `status --json` until `pred` holds (the ledger is the device's truth).
template <typename Pred>
bool wait_status(Device& device, Pred pred, std::chrono::milliseconds timeout = kWait) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred(device.status())) return true;
  }
  return false;
}

// One device's life, phase by phase, against one broker and one cloud.
struct Story {
  test::MosquittoServer broker;
  Device device{broker.url()};
  Cloud cloud{broker.url(), device.key()};
  std::vector<std::string> tokens;  // slot 1's tokens, from the `tokens` event
  std::string first_boot;

  // An operator loads slot 1 before the daemon ever ran; the daemon reports
  // the tokens, then dispenses a command signed with the device key.
  void restock_then_dispense() {
    Run r1 = device.run({"restock", "--config", device.config_path(), "--slot", "1", "--count", "3",
                         "--restock-id", "r1"});
    REQUIRE_MESSAGE(r1.code == 0, r1.output);
    CHECK(r1.output.find("minted 3 tokens for slot 1") != std::string::npos);

    device.start_daemon();
    REQUIRE_MESSAGE(cloud.wait([&] { return cloud.tokens("r1").has_value(); }),
                    device.daemon_log());
    tokens = cloud.tokens("r1")->tokens;
    REQUIRE(tokens.size() == 3);
    REQUIRE(cloud.wait([&] { return cloud.presence() && cloud.presence()->online; }));
    first_boot = cloud.presence()->boot_id;

    cloud.send(dispense("o1", 1, tokens[0]));
    REQUIRE_MESSAGE(cloud.wait([&] { return !cloud.results("o1").empty(); }), device.daemon_log());
    DispenseResult r = cloud.results("o1")[0];
    CHECK(r.status == DispenseStatus::kDispensed);
    CHECK(r.token_consumed);
    CHECK(r.token == tokens[0]);
  }

  // The cloud acknowledges everything so far: the outbox empties. Then a
  // clean stop, which exits 0.
  void ack_then_stop() {
    cloud.send(proto::Ack{kDevice, cloud.max_seq()});
    CHECK(wait_status(device, [](const Json& s) { return s["outbox_depth"] == 0; }));
    device.daemon().signal(SIGTERM);
    CHECK(device.daemon().wait(15s) == 0);
  }

  // A long rotation killed half-way; after the restart it is UNCERTAIN and
  // the motor is not re-run.
  void kill_mid_rotation_then_restart() {
    device.write_config(1500);
    device.start_daemon();
    REQUIRE(cloud.wait([&] {
      auto p = cloud.presence();
      return p->online && p->boot_id != first_boot;
    }));
    cloud.send(dispense("o2", 1, tokens[1]));
    REQUIRE_MESSAGE(
        wait_status(device, [](const Json& s) { return s["dispenses"]["motor_running"] == 1; }),
        device.daemon_log());
    device.daemon().signal(SIGKILL);
    CHECK(device.daemon().wait(5s) == 128 + SIGKILL);
    CHECK(device.status()["dispenses"]["motor_running"] == 1);  // the ledger is intact

    device.write_config(200);
    device.start_daemon();
    REQUIRE_MESSAGE(cloud.wait([&] { return !cloud.results("o2").empty(); }), device.daemon_log());
    DispenseResult r = cloud.results("o2")[0];
    CHECK(r.status == DispenseStatus::kUncertain);
    CHECK(r.reason == proto::reason::kPowerLoss);
    CHECK(r.token_consumed);
  }

  // Re-sent commands get the recorded results again, never a second rotation.
  void resend_gets_recorded_results() {
    cloud.send(dispense("o2", 1, tokens[1]));
    cloud.send(dispense("o1", 1, tokens[0]));
    REQUIRE(cloud.wait(
        [&] { return cloud.results("o2").size() >= 2 && cloud.results("o1").size() >= 2; }));
    for (const auto& r : cloud.results("o2")) CHECK(r.status == DispenseStatus::kUncertain);
    for (const auto& r : cloud.results("o1")) CHECK(r.status == DispenseStatus::kDispensed);
    Json s = device.status();
    CHECK(s["dispenses"]["dispensed"] == 1);
    CHECK(s["dispenses"]["uncertain"] == 1);
    CHECK(s["slots"][0]["available_tokens"] == 1);
  }

  // The operator's helper signs a command with the slot's next token.
  void sign_dispense_helper() {
    Run sign = device.run(
        {"sign-dispense", "--config", device.config_path(), "--order", "o3", "--slot", "1"});
    REQUIRE_MESSAGE(sign.code == 0, sign.output);
    const std::string& signed_json = sign.output;
    auto decoded = proto::decode_command(signed_json.substr(0, signed_json.find('\n')));
    REQUIRE(decoded.ok());
    CHECK(crypto::verify(device.key(), decoded->canonical, decoded->mac));
    CHECK(std::get<proto::DispenseCommand>(decoded->message).token == tokens[2]);
    cloud.publish_raw(signed_json);
    REQUIRE(cloud.wait([&] { return !cloud.results("o3").empty(); }));
    CHECK(cloud.results("o3")[0].status == DispenseStatus::kDispensed);
  }

  // Broker down: a restock's tokens wait in the outbox and arrive afterwards.
  void events_survive_broker_outage() {
    broker.stop();
    Run r2 = device.run({"restock", "--config", device.config_path(), "--slot", "2", "--count", "2",
                         "--restock-id", "r2"});
    REQUIRE_MESSAGE(r2.code == 0, r2.output);
    broker.start();
    REQUIRE_MESSAGE(cloud.wait([&] { return cloud.tokens("r2").has_value(); }, 20s),
                    device.daemon_log());
    CHECK(cloud.tokens("r2")->tokens.size() == 2);
  }
};

TEST_CASE("the firmware dispenses signed orders once, survives kill -9 and broker outages") {
  Story story;
  story.restock_then_dispense();
  story.ack_then_stop();
  story.kill_mid_rotation_then_restart();
  story.resend_gets_recorded_results();
  story.sign_dispense_helper();
  story.events_survive_broker_outage();
  CHECK(story.cloud.bad_macs() == 0);
  story.device.daemon().signal(SIGTERM);
  CHECK(story.device.daemon().wait(15s) == 0);
}

TEST_CASE("check-config loads what the daemon loads: a fresh board passes, bad files fail") {
  Device device("tcp://127.0.0.1:1");
  Run fresh = device.run({"check-config", "--config", device.config_path()});
  CHECK_MESSAGE(fresh.code == 0, fresh.output);
  CHECK(fresh.output.find("none yet (a new board)") != std::string::npos);
  CHECK(fresh.output.find("key ") != std::string::npos);
  CHECK(fresh.output.rfind("ok\n") == fresh.output.size() - 3);

  // A ledger that exists is opened (and nothing is printed about a new one).
  REQUIRE(device.run({"restock", "--config", device.config_path(), "--slot", "1", "--count", "2"})
              .code == 0);
  Run opened = device.run({"check-config", "--config", device.config_path()});
  CHECK_MESSAGE(opened.code == 0, opened.output);
  CHECK(opened.output.find(": opens; ") != std::string::npos);

  // A CA file that holds no certificate is refused, naming the field.
  Json config = Json::parse(test::read_file(device.config_path()));
  std::string dir = device.config_path().substr(0, device.config_path().rfind('/'));
  test::write_file(dir + "/ca.crt", "notacert\n");
  config["tls_ca_file"] = "ca.crt";
  config["broker_url"] = "ssl://127.0.0.1:1";
  test::write_file(device.config_path(), config.dump());
  Run bad_ca = device.run({"check-config", "--config", device.config_path()});
  CHECK(bad_ca.code == 2);
  CHECK(bad_ca.output.find("tls_ca_file " + dir + "/ca.crt") != std::string::npos);

  // A key file that is not a key.
  config.erase("tls_ca_file");
  config["broker_url"] = "tcp://127.0.0.1:1";
  test::write_file(device.config_path(), config.dump());
  test::write_private_file(dir + "/device.key", "not hex\n");
  Run bad_key = device.run({"check-config", "--config", device.config_path()});
  CHECK(bad_key.code == 2);
  CHECK(bad_key.output.find("ok\n") == std::string::npos);
}

TEST_CASE("bad arguments and a bad config exit 2 with a clear message") {
  test::TempDir dir;
  auto run = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = firmware_argv();
    argv.insert(argv.end(), args.begin(), args.end());
    std::string log = dir.file("out.log");
    test::write_file(log, "");
    test::Child child(argv, log);
    int code = child.wait(20s);
    return Run{code, test::read_file(log)};
  };
  Run none = run({});
  CHECK(none.code == 2);
  CHECK(none.output.find("'--config' is required") != std::string::npos);
  CHECK(run({"restock", "--config", "x.json", "--slot", "0", "--count", "1"}).code == 2);
  CHECK(run({"--config", "x.json", "--frobnicate"}).code == 2);

  test::write_file(
      dir.file("bad.json"),
      R"({"device_id":"vm-1","key_file":"k","broker_url":"tcp://h:1","slots":[{"slot":1,"capacity":0}]})");
  Run bad = run({"--config", dir.file("bad.json")});
  CHECK(bad.code == 2);
  CHECK(bad.output.find("slots[0].capacity: must be 1..1000") != std::string::npos);

  // A readable key is refused before anything runs (the code before this
  // check loaded it and ran).
  test::write_file(dir.file("open.key"), crypto::Key::generate().to_hex() + "\n");
  std::filesystem::permissions(dir.file("open.key"), std::filesystem::perms(0644));
  test::write_file(
      dir.file("open.json"),
      R"({"device_id":"vm-1","key_file":"open.key","broker_url":"tcp://h:1","slots":[{"slot":1,"capacity":1}]})");
  Run open_key = run({"--config", dir.file("open.json")});
  CHECK(open_key.code == 2);
  CHECK(open_key.output.find("key file " + dir.file("open.key") +
                             " has mode 0644: must not be readable by group or others "
                             "(chmod 600)") != std::string::npos);

  Run version = run({"--version"});
  CHECK(version.code == 0);
  CHECK(version.output.find("vend-firmware ") == 0);

  Run key = run({"keygen"});
  CHECK(key.code == 0);
  CHECK(crypto::Key::from_hex(key.output).ok());
  CHECK(key.output.size() == 65);

  // A key file is created mode 0600, whatever the umask (this process's,
  // which the child inherits, is set permissive here).
  const mode_t old_umask = ::umask(022);
  Run key_file = run({"keygen", "--out", dir.file("new.key")});
  ::umask(old_umask);
  CHECK(key_file.code == 0);
  auto perms = std::filesystem::status(dir.file("new.key")).permissions();
  CHECK((perms & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
}

}  // namespace
}  // namespace vend::fw
