// Device config: every class of error names its key; relative paths follow
// the config file.
#include "vend/fw/config.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "test_support.hpp"

namespace vend::fw {
namespace {

using Json = nlohmann::json;

Json minimal() {
  return Json{{"device_id", "vm-1"},
              {"key_file", "/etc/vend/device.key"},
              {"broker_url", "tcp://127.0.0.1:1883"},
              {"slots", Json::array({{{"slot", 1}, {"capacity", 10}}})}};
}

Json gpio_config() {
  Json j = minimal();
  j["hal"] = "gpio";
  j["slots"] = Json::array({{{"slot", 1}, {"capacity", 10}, {"motor_line", 5}},
                            {{"slot", 2}, {"capacity", 10}, {"motor_line", 6}}});
  j["gpio"] = {{"chip", "gpiochip0"}, {"drop_sensor_line", 17}};
  return j;
}

// The error message of parsing `j`; fails the test if it parses.
std::string error_of(const Json& j) {
  auto r = parse_device_config(j.dump(), "");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "bad_config");
  return r.error().message;
}

TEST_CASE("a minimal config parses with the documented defaults") {
  auto r = parse_device_config(minimal().dump(), "");
  REQUIRE(r.ok());
  CHECK(r->device_id == "vm-1");
  CHECK(r->hal == "sim");
  CHECK(r->synchronous == "full");
  CHECK(r->ledger_path == "/var/lib/vend/ledger.db");
  REQUIRE(r->slots.size() == 1);
  CHECK(r->slots[0].capacity == 10);
  CHECK(r->core.motor_timeout_ms == CoreOptions{}.motor_timeout_ms);
  CHECK(r->sim.motor_run_ms == SimulatedMachineOptions{}.motor_run_ms);
}

TEST_CASE("every section is read") {
  Json j = gpio_config();
  j["username"] = "vm-1";
  j["password"] = "secret";
  j["broker_url"] = "ssl://broker.example:8883";
  j["tls_ca_file"] = "/etc/vend/ca.pem";
  j["synchronous"] = "normal";
  j["sim"] = {{"motor_run_ms", 300}, {"jam_probability", 0.25}};
  j["gpio"]["drop_sensor_active_low"] = false;
  j["gpio"]["motor_run_ms"] = 900;
  j["gpio"]["drop_window_ms"] = 400;
  j["core"] = {{"expiry_skew_ms", 1000},    {"dispense_queue_max", 4},
               {"motor_timeout_ms", 5000},  {"outbox_max", 500},
               {"outbox_drain_per_s", 10},  {"outbox_window", 8},
               {"retransmit_ms", 2000},     {"reconnect_jitter_max_ms", 0},
               {"snapshot_interval_ms", 0}, {"auto_confirm_restock", true}};
  auto r = parse_device_config(j.dump(), "");
  REQUIRE(r.ok());
  CHECK(r->username == "vm-1");
  CHECK(r->tls_ca_file == "/etc/vend/ca.pem");
  CHECK(r->synchronous == "normal");
  CHECK(r->sim.jam_probability == doctest::Approx(0.25));
  CHECK(r->gpio.drop_sensor_line == 17);
  CHECK_FALSE(r->gpio.drop_sensor_active_low);
  CHECK(r->gpio.motor_run_ms == 900);
  CHECK(r->slots[1].motor_line == 6);
  CHECK(r->core.dispense_queue_max == 4);
  CHECK(r->core.outbox_window == 8);
  CHECK(r->core.snapshot_interval_ms == 0);
  CHECK(r->core.auto_confirm_restock);
}

TEST_CASE("syntax errors and duplicate keys are refused") {
  auto bad = parse_device_config("{\"device_id\": ", "/etc/vend/device.json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "bad_config");
  CHECK(bad.error().message.find("/etc/vend/device.json: invalid JSON") == 0);

  auto dup = parse_device_config(R"({"device_id":"a","device_id":"b"})", "");
  REQUIRE_FALSE(dup.ok());
  CHECK(dup.error().message.find("duplicate key \"device_id\"") != std::string::npos);

  auto array = parse_device_config("[]", "");
  REQUIRE_FALSE(array.ok());
  CHECK(array.error().message == "(root): must be a JSON object");
}

TEST_CASE("missing, unknown and mistyped keys are named") {
  Json j = minimal();
  j.erase("device_id");
  CHECK(error_of(j) == "device_id: required");

  j = minimal();
  j["brokr_url"] = "tcp://x:1";
  CHECK(error_of(j) == "brokr_url: unknown key");

  j = minimal();
  j["core"] = {{"motor_timeout", 5000}};
  CHECK(error_of(j) == "core.motor_timeout: unknown key");

  j = minimal();
  j["slots"][0]["capacty"] = 3;
  CHECK(error_of(j) == "slots[0].capacty: unknown key");

  j = minimal();
  j["slots"][0]["capacity"] = "ten";
  CHECK(error_of(j) == "slots[0].capacity: must be an integer");

  j = minimal();
  j["core"] = {{"auto_confirm_restock", 1}};
  CHECK(error_of(j) == "core.auto_confirm_restock: must be true or false");

  j = minimal();
  j["core"] = 5;
  CHECK(error_of(j) == "core: must be an object");
}

TEST_CASE("values out of range are named with their range") {
  Json j = minimal();
  j["slots"] = Json::array({{{"slot", 1}, {"capacity", 10}},
                            {{"slot", 2}, {"capacity", 10}},
                            {{"slot", 3}, {"capacity", 1001}}});
  CHECK(error_of(j) == "slots[2].capacity: must be 1..1000");

  j = minimal();
  j["slots"][0]["slot"] = 256;
  CHECK(error_of(j) == "slots[0].slot: must be 1..255");

  j = minimal();
  j["core"] = {{"dispense_queue_max", 0}};
  CHECK(error_of(j) == "core.dispense_queue_max: must be 1..1000");

  j = minimal();
  j["core"] = {{"snapshot_interval_ms", 10}};
  CHECK(error_of(j) == "core.snapshot_interval_ms: must be 0 (off) or 1000..86400000");

  j = minimal();
  j["sim"] = {{"jam_probability", 1.5}};
  CHECK(error_of(j) == "sim.jam_probability: must be 0..1");

  j = minimal();
  j["core"] = {{"expiry_skew_ms", 18446744073709551615ULL}};
  CHECK(error_of(j) == "core.expiry_skew_ms: must be 0..3600000");
}

TEST_CASE("identity, broker and enumerations are validated") {
  Json j = minimal();
  j["device_id"] = "vm/1";
  CHECK(error_of(j) == "device_id: must be 1..64 chars of [A-Za-z0-9._-]");

  j = minimal();
  j["broker_url"] = "http://broker:1883";
  CHECK(error_of(j) == "broker_url: must start with tcp:// or ssl://");

  j = minimal();
  j["tls_ca_file"] = "/etc/vend/ca.pem";
  CHECK(error_of(j) == "tls_ca_file: set but broker_url is not ssl://");

  j = minimal();
  j["broker_url"] = "ssl://broker:8883";
  CHECK(error_of(j) == "tls_ca_file: required with ssl://");

  j = minimal();
  j["password"] = "secret";
  CHECK(error_of(j) == "password: set without username");

  j = minimal();
  j["hal"] = "serial";
  CHECK(error_of(j) == "hal: must be \"sim\" | \"gpio\"");

  j = minimal();
  j["synchronous"] = "off";
  CHECK(error_of(j) == "synchronous: must be \"full\" | \"normal\"");
}

TEST_CASE("slots must be a non-empty list without duplicate numbers") {
  Json j = minimal();
  j["slots"] = Json::array();
  CHECK(error_of(j) == "slots: must be an array of 1..255 slot objects");

  j = minimal();
  j["slots"] = Json::array({{{"slot", 4}, {"capacity", 10}},
                            {{"slot", 7}, {"capacity", 10}},
                            {{"slot", 4}, {"capacity", 3}}});
  CHECK(error_of(j) == "slots[2].slot: duplicate slot 4 (also slots[0])");

  j = minimal();
  j["slots"] = Json::array({7});
  CHECK(error_of(j) == "slots[0]: must be an object");
}

TEST_CASE("hal gpio needs every line, each used once") {
  CHECK(parse_device_config(gpio_config().dump(), "").ok());

  Json j = gpio_config();
  j["slots"][1].erase("motor_line");
  CHECK(error_of(j) == "slots[1].motor_line: required when hal is gpio");

  j = gpio_config();
  j["gpio"].erase("drop_sensor_line");
  CHECK(error_of(j) == "gpio.drop_sensor_line: required when hal is gpio");

  j = gpio_config();
  j["slots"][1]["motor_line"] = 17;
  CHECK(error_of(j) == "slots[1].motor_line: line 17 already used by gpio.drop_sensor_line");

  // The sim ignores GPIO lines: a sim config needs none.
  CHECK(parse_device_config(minimal().dump(), "").ok());
}

TEST_CASE("the motor timeout must leave room for one rotation") {
  Json j = minimal();
  j["sim"] = {{"motor_run_ms", 2000}};
  j["core"] = {{"motor_timeout_ms", 2000}};
  CHECK(error_of(j) ==
        "core.motor_timeout_ms: must be longer than one rotation (sim.motor_run_ms = 2000)");

  j = gpio_config();
  j["gpio"]["motor_run_ms"] = 1500;
  j["gpio"]["drop_window_ms"] = 800;
  j["core"] = {{"motor_timeout_ms", 2000}};
  CHECK(error_of(j) ==
        "core.motor_timeout_ms: must be longer than one rotation "
        "(gpio.motor_run_ms + gpio.drop_window_ms = 2300)");
}

TEST_CASE("relative file names are relative to the config file") {
  test::TempDir dir;
  Json j = minimal();
  j["key_file"] = "device.key";
  j["ledger_path"] = "state/ledger.db";
  j["broker_url"] = "ssl://broker:8883";
  j["tls_ca_file"] = "../ca.pem";
  test::write_file(dir.file("device.json"), j.dump());

  auto r = load_device_config(dir.file("device.json"));
  REQUIRE(r.ok());
  CHECK(r->key_file == dir.file("device.key"));
  CHECK(r->ledger_path == dir.file("state/ledger.db"));
  std::string parent = dir.path().substr(0, dir.path().rfind('/'));
  CHECK(r->tls_ca_file == parent + "/ca.pem");

  // Absolute names stay as they are.
  j["key_file"] = "/etc/vend/device.key";
  test::write_file(dir.file("device.json"), j.dump());
  auto abs = load_device_config(dir.file("device.json"));
  REQUIRE(abs.ok());
  CHECK(abs->key_file == "/etc/vend/device.key");
}

TEST_CASE("load errors name the file") {
  test::TempDir dir;
  auto missing = load_device_config(dir.file("nope.json"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == "bad_config");
  CHECK(missing.error().message.find(dir.file("nope.json")) == 0);

  Json j = minimal();
  j["slots"][0]["capacity"] = 0;
  test::write_file(dir.file("device.json"), j.dump());
  auto bad = load_device_config(dir.file("device.json"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == dir.file("device.json") + ": slots[0].capacity: must be 1..1000");
}

TEST_CASE("the MQTT password can come from a file of its own") {
  test::TempDir dir;
  Json j = minimal();
  j["username"] = "vm-1";
  j["password_file"] = "mqtt.password";
  test::write_file(dir.file("device.json"), j.dump());
  test::write_private_file(dir.file("mqtt.password"), "s3cret word\n");
  auto r = load_device_config(dir.file("device.json"));
  REQUIRE(r.ok());
  CHECK(r->password_file == dir.file("mqtt.password"));
  CHECK(r->password.empty());  // read only with the secrets, by the commands that need them
  REQUIRE(load_password_file(*r).ok());
  CHECK(r->password == "s3cret word");

  test::write_private_file(dir.file("mqtt.password"), "one\ntwo\n");
  auto two = load_password_file(*r);
  REQUIRE_FALSE(two.ok());
  CHECK(two.error().message.find("must be one line") != std::string::npos);

  Json both = j;
  both["password"] = "x";
  CHECK(error_of(both) == "password_file: password and password_file exclude each other");
  Json lonely = minimal();
  lonely["password_file"] = "p";
  CHECK(error_of(lonely) == "password_file: set without username");
}

TEST_CASE("key and password files readable by group or others are refused, naming file and mode") {
  test::TempDir dir;
  const std::string key = dir.file("device.key");
  test::write_private_file(key, "00");
  CHECK(check_secret_file(key, "key file", "bad_key").ok());
  for (auto [mode, text] : {std::pair{0644, "0644"},
                            {0640, "0640"},
                            {0604, "0604"},
                            {0620, "0620"},
                            {0700 | 0001, "0701"}}) {
    std::filesystem::permissions(key, std::filesystem::perms(mode));
    auto s = check_secret_file(key, "key file", "bad_key");
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == "bad_key");
    CHECK(s.error().message == "key file " + key + " has mode " + text +
                                   ": must not be readable by group or others (chmod 600)");
  }
  std::filesystem::permissions(key, std::filesystem::perms(0400));
  CHECK(check_secret_file(key, "key file", "bad_key").ok());
  auto missing = check_secret_file(dir.file("nope"), "key file", "bad_key");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find(dir.file("nope")) != std::string::npos);

  DeviceConfig c;
  c.password_file = dir.file("pw");
  test::write_file(c.password_file, "pw\n");
  std::filesystem::permissions(c.password_file, std::filesystem::perms(0644));
  auto open = load_password_file(c);
  REQUIRE_FALSE(open.ok());
  CHECK(open.error().code == "bad_config");
  CHECK(open.error().message == "password file " + c.password_file +
                                    " has mode 0644: must not be readable by group or others "
                                    "(chmod 600)");
  CHECK(c.password.empty());
}

TEST_CASE("the shipped example config parses") {
  const char* src = std::getenv("VEND_SOURCE_DIR");
  REQUIRE(src != nullptr);
  auto r = load_device_config(std::string(src) + "/firmware/packaging/device.json.example");
  REQUIRE_MESSAGE(r.ok(), vend::test::error_text(r));
  CHECK(r->device_id.size() > 0);
}

TEST_CASE("the update section: off without it, its keys read, named and bounded") {
  auto off = parse_device_config(minimal().dump(), "");
  REQUIRE(off.ok());
  CHECK(off->update.public_key_file.empty());

  Json j = minimal();
  j["update"] = {{"public_key_file", "/etc/vend/update-key.pub"},
                 {"max_bytes", 1048576},
                 {"health_bound_ms", 60000},
                 {"dir", "/data/update"}};
  auto on = parse_device_config(j.dump(), "");
  REQUIRE(on.ok());
  CHECK(on->update.public_key_file == "/etc/vend/update-key.pub");
  CHECK(on->update.max_bytes == 1048576);
  CHECK(on->update.health_bound_ms == 60000);
  CHECK(on->update.dir == "/data/update");
  CHECK(on->update.ca_file.empty());

  j = minimal();
  j["update"] = {{"max_bytes", 1048576}};
  CHECK(error_of(j) == "update.public_key_file: required");
  j["update"] = {{"public_key_file", "k"}, {"health_bound_ms", 5}};
  CHECK(error_of(j).find("update.health_bound_ms") == 0);
  j["update"] = {{"public_key_file", "k"}, {"mirror", "x"}};
  CHECK(error_of(j) == "update.mirror: unknown key");
}

}  // namespace
}  // namespace vend::fw
