// vend-agent --config FILE: the file format (shell_config.cpp), its keys
// (the option table of shell_options.cpp), precedence, each error class, the
// modes of the config and secret files, the shipped agent.conf, and
// --check-config on the real binary.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "shell/shell_config.hpp"
#include "shell/shell_options.hpp"
#include "test_support.hpp"

namespace vend::agent {
namespace {

using namespace std::chrono_literals;

// Writes `text` to `path` with `mode` (chmod, so the umask does not matter).
std::string write_mode(const std::string& path, const std::string& text, int mode) {
  test::write_file(path, text);
  std::filesystem::permissions(path, std::filesystem::perms(mode));
  return path;
}

// The error message of parsing `args`; "" when they parse.
std::string error_of(const std::vector<std::string>& args) {
  auto o = parse_options(args);
  if (o.ok()) return "";
  CHECK(o.error().code == "bad_usage");
  return o.error().message;
}

std::string source_file(const std::string& relative) {
  const char* root = std::getenv("VEND_SOURCE_DIR");
  REQUIRE(root != nullptr);
  return std::string(root) + "/" + relative;
}

auto no_env = [](const char*) { return std::optional<std::string>(); };

TEST_CASE("config file: keys are the long options; the command line overrides the file") {
  test::TempDir dir;
  std::string conf = write_mode(dir.file("agent.conf"),
                                "# the agent\n"
                                "\n"
                                "http = 0.0.0.0:9090\n"
                                "  mqtt=ssl://broker.example:8883   # inline comment\n"
                                "mqtt-ca-file = /etc/ssl/certs/ca-certificates.crt\n"
                                "refund-url = https://gw.example/refund#v2\n"
                                "reservation-ttl-s = 120\n"
                                "sync = normal\n"
                                "log-level = warn\n"
                                "insecure-no-auth = true\n",
                                0644);
  auto o = parse_options({"--config", conf});
  REQUIRE(o.ok());
  CHECK(o->config_path == conf);
  CHECK(o->http_host == "0.0.0.0");
  CHECK(o->http_port == 9090);
  CHECK(o->mqtt_url == "ssl://broker.example:8883");
  CHECK(o->mqtt_ca_file == "/etc/ssl/certs/ca-certificates.crt");
  CHECK(o->refund_url == "https://gw.example/refund#v2");  // '#' not after a space: kept
  CHECK(o->reservation_ttl_s == 120);
  CHECK_FALSE(o->sync_full);
  CHECK(o->log_level == LogLevel::kWarn);
  CHECK(o->insecure_no_auth);
  CHECK(o->dispatch_ttl_s == ShellOptions{}.dispatch_ttl_s);  // not in the file: the default

  // Flags before or after --config: the command line wins either way.
  for (const auto& args : {std::vector<std::string>{"--reservation-ttl-s", "30", "--config", conf,
                                                    "--http=127.0.0.1:0"},
                           std::vector<std::string>{"--config=" + conf, "--reservation-ttl-s=30",
                                                    "--http", "127.0.0.1:0"}}) {
    auto over = parse_options(args);
    REQUIRE(over.ok());
    CHECK(over->reservation_ttl_s == 30);
    CHECK(over->http_host == "127.0.0.1");
    CHECK(over->http_port == 0);
    CHECK(over->mqtt_url == "ssl://broker.example:8883");  // the rest still from the file
  }
  // Rules between options see the merged result.
  CHECK(error_of({"--config", conf, "--mqtt", "tcp://127.0.0.1:1883"})
            .find("--mqtt-ca-file: only with an ssl:// --mqtt URL") == 0);
  write_mode(conf, "insecure-no-auth = false\n", 0644);
  CHECK_FALSE(parse_options({"--config", conf})->insecure_no_auth);
  CHECK(parse_options({"--config", conf, "--insecure-no-auth"})->insecure_no_auth);
}

TEST_CASE("the event stream's limits: options and keys, validated against the HTTP server's") {
  ShellOptions d;
  CHECK(d.ops_stream_max_subscribers == 64);
  CHECK(d.ops_stream_queue_events == 256);
  CHECK(d.ops_stream_queue_bytes == 1024 * 1024);
  CHECK(d.ops_stream_heartbeat_ms == 0);
  CHECK(ops_stream_heartbeat_ms(d) == 15'000);  // half the 60 s idle timeout, at most 15 s
  auto short_idle = parse_options({"--http-idle-timeout-s", "4"});
  REQUIRE(short_idle.ok());
  CHECK(ops_stream_heartbeat_ms(*short_idle) == 2000);

  auto o = parse_options({"--ops-stream-max-subscribers", "8", "--ops-stream-queue-events=32",
                          "--ops-stream-queue-bytes", "65536", "--ops-stream-heartbeat-ms", "250"});
  REQUIRE(o.ok());
  CHECK(o->ops_stream_max_subscribers == 8);
  CHECK(o->ops_stream_queue_events == 32);
  CHECK(o->ops_stream_queue_bytes == 65536);
  CHECK(ops_stream_heartbeat_ms(*o) == 250);

  test::TempDir dir;
  std::string conf = write_mode(dir.file("agent.conf"),
                                "ops-stream-max-subscribers = 500\n"
                                "ops-stream-queue-events = 1024\n"
                                "ops-stream-queue-bytes = 4194304\n"
                                "ops-stream-heartbeat-ms = 5000\n",
                                0644);
  auto f = parse_options({"--config", conf, "--ops-stream-queue-events", "64"});
  REQUIRE(f.ok());
  CHECK(f->ops_stream_max_subscribers == 500);
  CHECK(f->ops_stream_queue_events == 64);  // the command line wins
  CHECK(f->ops_stream_queue_bytes == 4 * 1024 * 1024);
  CHECK(f->ops_stream_heartbeat_ms == 5000);

  CHECK(error_of({"--ops-stream-max-subscribers", "0"}) ==
        "--ops-stream-max-subscribers: expected an integer 1..100000, got '0'");
  CHECK(error_of({"--ops-stream-queue-events", "many"}).find("--ops-stream-queue-events") == 0);
  CHECK(error_of({"--ops-stream-queue-bytes", "1000"}).find("65536..") != std::string::npos);
  // Every stream holds a connection: the cap must leave room for the API.
  CHECK(error_of({"--ops-stream-max-subscribers", "100", "--http-max-connections", "100"})
            .find("--ops-stream-max-subscribers 100: must be below --http-max-connections (100)") ==
        0);
  // The keep-alive must come before the idle timeout closes a stream.
  CHECK(error_of({"--ops-stream-heartbeat-ms", "60000"})
            .find("--ops-stream-heartbeat-ms 60000: expected 0 (half of --http-idle-timeout-s") ==
        0);
  CHECK(error_of({"--ops-stream-heartbeat-ms", "4000", "--http-idle-timeout-s", "4"})
            .find("100..3999 (below --http-idle-timeout-s 4 s") != std::string::npos);
  CHECK(error_of({"--ops-stream-heartbeat-ms", "50"}).find("100..59999") != std::string::npos);
  write_mode(conf, "ops-stream-queue-events = 0\n", 0644);
  CHECK(error_of({"--config", conf}) ==
        conf + ":1: ops-stream-queue-events: expected an integer 1..1048576, got '0'");
}

TEST_CASE("config file errors name the file, the line and the key") {
  test::TempDir dir;
  std::string conf = dir.file("agent.conf");
  auto error_in = [&](const std::string& text) {
    write_mode(conf, "# first line\ndb = /var/lib/vend-agent/agent.db\n" + text, 0600);
    return error_of({"--config", conf});
  };
  std::string at3 = conf + ":3: ";
  CHECK(error_in("mqtt-url = tcp://x:1883\n") ==
        at3 +
            "mqtt-url: unknown key (the keys are vend-agent's long options without '--'; see "
            "vend-agent --help)");
  CHECK(error_in("reservation-ttl-s = soon\n") ==
        at3 + "reservation-ttl-s: expected an integer 1..86400, got 'soon'");
  CHECK(error_in("dispatch-ttl-s = 1\n") ==
        at3 + "dispatch-ttl-s: expected an integer 5..3600, got '1'");
  CHECK(error_in("sync = sometimes\n") == at3 + "sync: expected full|normal");
  CHECK(error_in("refund-url =\n") == at3 + "refund-url: empty value");
  CHECK(error_in("insecure-no-auth = yes\n") ==
        at3 + "insecure-no-auth: expected true|false, got 'yes'");
  CHECK(error_in("db = /elsewhere.db\n") == at3 + "db: already set on line 2");
  CHECK(error_in("just words\n") == at3 + "expected 'key = value', got 'just words'");
  CHECK(error_in("--mqtt = tcp://x:1883\n") ==
        at3 + "bad key '--mqtt' (a long option name without '--', e.g. 'mqtt')");
  CHECK(error_in("Mqtt = tcp://x:1883\n").find(at3 + "bad key 'Mqtt'") == 0);
  for (const char* key : {"config", "check-config", "help", "version"}) {
    CHECK(error_in(std::string(key) + " = x\n") ==
          at3 + key + ": only on the command line (--" + key + ")");
  }
}

TEST_CASE("a secret written in the config file is refused, naming the key and its -file form") {
  test::TempDir dir;
  std::string conf = dir.file("agent.conf");
  for (const std::string key : {"mqtt-password", "operator-token", "gateway-secret"}) {
    write_mode(conf, key + " = hunter2hunter2hunter2\n", 0600);
    std::string e = error_of({"--config", conf});
    CHECK(e.find(conf + ":1: " + key + ": not accepted in a config file") == 0);
    CHECK(e.find("set '" + key + "-file = PATH'") != std::string::npos);
    CHECK(e.find("hunter2") == std::string::npos);  // the secret is not echoed
  }
}

TEST_CASE("the config file: unreadable, too big, or writable by group or others is refused") {
  test::TempDir dir;
  std::string missing = dir.file("none.conf");
  CHECK(error_of({"--config", missing}) ==
        "cannot read config file " + missing + ": No such file or directory");
  std::string conf = dir.file("agent.conf");
  for (auto [mode, text] : {std::pair{0664, "0664"}, {0646, "0646"}, {0620, "0620"}}) {
    write_mode(conf, "db = x.db\n", mode);
    CHECK(error_of({"--config", conf}) == "config file " + conf + " has mode " + text +
                                              ": must not be writable by group or others "
                                              "(chmod 644)");
  }
  write_mode(conf, "db = x.db\n", 0644);  // readable by all is fine: no secrets inside
  CHECK(parse_options({"--config", conf})->db_path == "x.db");
  write_mode(conf, "db = x.db\n", 0200);  // write-only: cannot be read (unless root)
  if (::geteuid() != 0) CHECK(error_of({"--config", conf}).find(conf + ": cannot read") == 0);
  write_mode(conf, std::string(64 * 1024 + 1, '#'), 0644);
  CHECK(error_of({"--config", conf}) == conf + ": larger than 64 KiB, not a vend-agent config");
  write_mode(conf, "db = x.db\n", 0644);
  CHECK(error_of({"--config", conf, "--config", conf}) == "--config: given more than once");
  CHECK(error_of({"--config"}) == "--config: missing value");
  CHECK(error_of({"--config="}) == "--config: empty value");
}

TEST_CASE("secret files readable by group or others are refused, naming the file and mode") {
  test::TempDir dir;
  std::ostringstream out;
  ShellOptions o;
  o.operator_token_file = write_mode(dir.file("operator.token"), std::string(32, 'a'), 0600);
  o.gateway_secret_file = write_mode(dir.file("gateway.secret"), std::string(32, 'b'), 0600);
  REQUIRE(load_secrets(o, no_env, out).ok());

  std::filesystem::permissions(o.operator_token_file, std::filesystem::perms(0640));
  auto token = load_secrets(o, no_env, out);
  REQUIRE_FALSE(token.ok());
  CHECK(token.error().code == "bad_secret");
  CHECK(token.error().message == "operator token file " + o.operator_token_file +
                                     " has mode 0640: must not be readable by group or others "
                                     "(chmod 600)");
  std::filesystem::permissions(o.operator_token_file, std::filesystem::perms(0600));
  std::filesystem::permissions(o.gateway_secret_file, std::filesystem::perms(0604));
  CHECK(load_secrets(o, no_env, out)
            .error()
            .message.find("gateway secret file " + o.gateway_secret_file + " has mode 0604") == 0);
  std::filesystem::permissions(o.gateway_secret_file, std::filesystem::perms(0400));

  o.mqtt_username = "vend-agent";
  o.mqtt_password_file = write_mode(dir.file("mqtt.password"), "pw\n", 0644);
  CHECK(load_secrets(o, no_env, out).error().message ==
        "--mqtt-password-file " + o.mqtt_password_file +
            " has mode 0644: must not be readable by group or others (chmod 600)");
  std::filesystem::permissions(o.mqtt_password_file, std::filesystem::perms(0600));

  o.mqtt_url = "ssl://broker:8883";
  // A self-signed certificate serves as CA and client certificate (the
  // files are parsed: shell_secrets.cpp); public files may have any mode.
  test::Child req(
      {test::require_program("openssl", "openssl"), "req", "-x509", "-newkey", "ec", "-pkeyopt",
       "ec_paramgen_curve:P-256", "-nodes", "-keyout", dir.file("agent.key"), "-out",
       dir.file("ca.crt"), "-days", "1", "-subj", "/CN=vend-test"},
      dir.file("openssl.log"));
  REQUIRE(req.wait(20s) == 0);
  o.mqtt_ca_file = write_mode(dir.file("ca.crt"), test::read_file(dir.file("ca.crt")), 0644);
  o.mqtt_cert_file = write_mode(dir.file("agent.crt"), test::read_file(o.mqtt_ca_file), 0644);
  o.mqtt_key_file = write_mode(dir.file("agent.key"), test::read_file(dir.file("agent.key")), 0640);
  CHECK(load_secrets(o, no_env, out)
            .error()
            .message.find("--mqtt-key-file " + o.mqtt_key_file + " has mode 0640") == 0);
  std::filesystem::permissions(o.mqtt_key_file, std::filesystem::perms(0600));
  CHECK(load_secrets(o, no_env, out)->mqtt_password == "pw");
}

TEST_CASE("checking (kReport) creates no secret file; start-up (kCreate) does") {
  test::TempDir dir;
  std::ostringstream out;
  ShellOptions o;
  o.operator_token_file = dir.file("operator.token");
  o.gateway_secret_file = dir.file("gateway.secret");
  auto checked = load_secrets(o, no_env, out, MissingSecretFile::kReport);
  REQUIRE(checked.ok());
  CHECK(checked->operator_token.empty());
  CHECK_FALSE(std::filesystem::exists(o.operator_token_file));
  CHECK_FALSE(std::filesystem::exists(o.gateway_secret_file));
  CHECK(out.str().find(o.operator_token_file + " does not exist: vend-agent creates it") !=
        std::string::npos);
  auto started = load_secrets(o, no_env, out);
  REQUIRE(started.ok());
  CHECK(started->operator_token.size() == 64);
  auto mode = std::filesystem::status(o.operator_token_file).permissions();
  CHECK((mode & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
}

// The shipped /etc/vend/agent.conf: every key of the option table is in it,
// and each commented example is a valid value for its key.
TEST_CASE("the shipped agent.conf mentions every option, and every example value parses") {
  std::string shipped = test::read_file(source_file("cloud-agent/packaging/agent.conf"));
  REQUIRE_FALSE(shipped.empty());
  test::TempDir dir;
  std::string conf = write_mode(dir.file("agent.conf"), shipped, 0644);
  auto as_is = parse_options({"--config", conf});
  REQUIRE_MESSAGE(as_is.ok(), vend::test::error_text(as_is));
  for (const std::string& key : config_file_keys()) {
    bool active = shipped.find("\n" + key + " = ") != std::string::npos;
    bool commented = shipped.find("\n# " + key + " = ") != std::string::npos;
    CHECK_MESSAGE((active || commented), "agent.conf lacks the key '" << key << "'");
  }
  std::istringstream lines(shipped);
  std::string line;
  int examples = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("# ", 0) != 0 || line.find(" = ") == std::string::npos) continue;
    std::string entry = line.substr(2);
    std::string key = entry.substr(0, entry.find(" = "));
    if (key.find(' ') != std::string::npos) continue;  // prose with " = " in it
    ++examples;
    write_mode(conf, entry + "\n", 0644);
    // Rules between options (e.g. mqtt-ca-file needs ssl://) may refuse a
    // line alone; the value itself must not be refused (no "FILE:1:").
    std::string e = error_of({"--config", conf});
    CHECK_MESSAGE(e.find(conf + ":1:") == std::string::npos, e);
  }
  CHECK(examples >= static_cast<int>(config_file_keys().size()) - 3);
}

TEST_CASE("vend-agent --check-config: exit 0 for a valid config, 2 naming the problem") {
  test::TempDir dir;
  std::string conf = write_mode(dir.file("agent.conf"),
                                "db = " + dir.file("agent.db") +
                                    "\noperator-token-file = " + dir.file("operator.token") +
                                    "\ngateway-secret-file = " + dir.file("gateway.secret") + "\n",
                                0644);
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), test::binary_path("cloud-agent/vend-agent"));
    std::filesystem::remove(dir.file("out.log"));
    test::Child agent(args, dir.file("out.log"));
    return agent.wait(10s);
  };
  CHECK(run({"--config", conf, "--check-config"}) == 0);
  CHECK(test::read_file(dir.file("out.log")).find("configuration OK (" + conf + ")") !=
        std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("operator.token")));  // nothing created
  CHECK_FALSE(std::filesystem::exists(dir.file("agent.db")));

  write_mode(conf, "reservation-ttl-s = 0\n", 0644);
  CHECK(run({"--config", conf, "--check-config"}) == 2);
  CHECK(test::read_file(dir.file("out.log")).find(conf + ":1: reservation-ttl-s: expected") !=
        std::string::npos);
  write_mode(dir.file("token"), std::string(32, 't'), 0644);
  CHECK(run({"--check-config", "--operator-token-file", dir.file("token"), "--gateway-secret-file",
             dir.file("gateway.secret")}) == 2);
  CHECK(test::read_file(dir.file("out.log")).find("has mode 0644") != std::string::npos);
}

}  // namespace
}  // namespace vend::agent
