// vend-agent's broker credentials and TLS options: parsing and secrets
// (shell_options.cpp, compiled in), then the real vend-agent connecting to the
// production broker set-up (broker_rig.hpp) over TLS with its password file.
#include <doctest/doctest.h>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "broker_rig.hpp"
#include "shell/shell_options.hpp"

namespace vend::agent {
namespace {

using namespace std::chrono_literals;

std::string usage_error(const std::vector<std::string>& args) {
  auto o = parse_options(args);
  REQUIRE_FALSE(o.ok());
  CHECK(o.error().code == "bad_usage");
  return o.error().message;
}

TEST_CASE("vend-agent MQTT options: credentials, and TLS files only with ssl://") {
  auto o = parse_options({"--mqtt", "ssl://broker:8883", "--mqtt-username", "vend-agent",
                          "--mqtt-password-file", "/run/pw", "--mqtt-ca-file=ca.crt",
                          "--mqtt-cert-file", "agent.crt", "--mqtt-key-file", "agent.key"});
  REQUIRE(o.ok());
  CHECK(o->mqtt_username == "vend-agent");
  CHECK(o->mqtt_password_file == "/run/pw");
  CHECK(o->mqtt_ca_file == "ca.crt");
  CHECK(o->mqtt_cert_file == "agent.crt");
  CHECK(o->mqtt_key_file == "agent.key");
  CHECK(parse_options({"--mqtt", "mqtts://broker", "--mqtt-ca-file", "ca.crt"}).ok());
  CHECK(parse_options({"--mqtt-username", "vend-agent"}).ok());  // no password: allowed

  CHECK(usage_error({"--mqtt-ca-file", "ca.crt"}) ==
        "--mqtt-ca-file: only with an ssl:// --mqtt URL, got 'tcp://127.0.0.1:1883'");
  CHECK(usage_error({"--mqtt", "tcp://b:1883", "--mqtt-key-file", "k"}).find("--mqtt-key-file") ==
        0);
  CHECK(usage_error({"--mqtt", "ssl://b:8883"}).find("needs --mqtt-ca-file") != std::string::npos);
  CHECK(usage_error({"--mqtt", "ssl://b", "--mqtt-ca-file", "ca", "--mqtt-cert-file", "c"}) ==
        "--mqtt-cert-file and --mqtt-key-file go together");
  CHECK(usage_error({"--mqtt-password-file", "pw"}) ==
        "--mqtt-password-file: needs --mqtt-username");
  CHECK(usage_error({"--mqtt-password", "secret"}).find("use --mqtt-password-file") !=
        std::string::npos);
  CHECK(usage_error({"--mqtt-username", ""}) == "--mqtt-username: empty value");
  CHECK(usage().find("--mqtt-password-file FILE") != std::string::npos);

  // Several agents: one broker user each (the broker makes it the client id).
  const std::vector<std::string> cluster = {"--db", "postgresql://db/vend", "--instance-id", "a1"};
  auto shared = cluster;
  shared.insert(shared.end(), {"--mqtt-username", "vend-agent"});
  CHECK(usage_error(shared).find("add-user agent a1") != std::string::npos);
  auto own = cluster;
  own.insert(own.end(), {"--mqtt-username", "vend-agent-a1"});
  CHECK(parse_options(own).ok());
}

TEST_CASE("vend-agent MQTT password file: content minus the trailing newline") {
  test::TempDir dir;
  auto none = [](const char*) { return std::optional<std::string>(); };
  std::ostringstream out;
  ShellOptions o;
  o.insecure_no_auth = true;
  o.gateway_secret_file = dir.file("gateway.secret");  // created
  o.mqtt_username = "vend-agent";
  o.mqtt_password_file = dir.file("mqtt.password");

  auto password_of = [&](const std::string& content) {
    test::write_private_file(o.mqtt_password_file, content);
    return load_secrets(o, none, out);
  };
  CHECK(password_of("s3cret pass\n")->mqtt_password == "s3cret pass");
  CHECK(password_of(" spaced \r\n")->mqtt_password == " spaced ");
  CHECK(password_of("no-newline")->mqtt_password == "no-newline");
  CHECK(password_of("\n").error().code == "bad_secret");
  CHECK(password_of("two\nlines\n").error().message.find("one line") != std::string::npos);
  CHECK(password_of(std::string(1025, 'x')).error().code == "bad_secret");

  o.mqtt_password_file = dir.file("missing");
  auto missing = load_secrets(o, none, out);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find(dir.file("missing")) != std::string::npos);
  CHECK(test::read_file(dir.file("missing")).empty());  // never created

  o.mqtt_password_file.clear();
  CHECK_FALSE(load_secrets(o, none, out)->mqtt_password.has_value());
  o.mqtt_url = "ssl://b:8883";
  o.mqtt_ca_file = dir.file("no-ca.crt");
  auto no_ca = load_secrets(o, none, out);
  REQUIRE_FALSE(no_ca.ok());
  CHECK(no_ca.error().code == "bad_file");
  CHECK(no_ca.error().message.find("--mqtt-ca-file") == 0);
}

// Polls `done` every 100 ms until it holds or `timeout` passes.
template <typename Pred>
bool eventually(Pred done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(100ms);
  }
  return true;
}

TEST_CASE("vend-agent connects to the production broker over TLS with its password file") {
  test::SecureBroker broker({"agent"});
  const test::TempDir& dir = broker.dir();
  int http_port = test::free_port();
  std::vector<std::string> argv = {test::binary_path("cloud-agent/vend-agent"),
                                   "--http",
                                   "127.0.0.1:" + std::to_string(http_port),
                                   "--db",
                                   dir.file("agent.db"),
                                   "--insecure-no-auth",
                                   "--gateway-secret-file",
                                   dir.file("gateway.secret"),
                                   "--mqtt",
                                   broker.tls_url(),
                                   "--mqtt-username",
                                   "vend-agent",
                                   "--mqtt-password-file",
                                   broker.password_file("vend-agent"),
                                   "--mqtt-ca-file",
                                   broker.ca_file()};
  test::Child agent(argv, dir.file("agent.log"));
  httplib::Client http("127.0.0.1", http_port);
  http.set_read_timeout(2, 0);
  bool connected = eventually(
      [&] {
        auto r = http.Get("/healthz");
        return r && r->status == 200 &&
               nlohmann::json::parse(r->body).value("mqtt_connected", false);
      },
      10s);
  INFO(test::read_file(dir.file("agent.log")));
  INFO(broker.log());
  CHECK(connected);
  CHECK(broker.log().find("u'vend-agent'") != std::string::npos);  // authenticated as itself
  agent.signal(SIGTERM);
  CHECK(agent.wait(10s) == 0);
}

}  // namespace
}  // namespace vend::agent
