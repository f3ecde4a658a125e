// The real vend-firmware binary against a real mosquitto: restock, a signed
// dispense, ack, kill -9 mid-rotation and restart (UNCERTAIN, never twice),
// a signed command from `sign-dispense`, and events written while the broker
// is down arriving once it is back. A test "cloud" talks to it through
// PahoTransport and verifies the MAC of everything the device sends.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "firmware_process_rig.hpp"
#include "test_support.hpp"
#include "vend/crypto.hpp"
#include "vend/protocol.hpp"

namespace vend::fw {
namespace {

using namespace process_rig;

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
