#include "shell_options.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "vend/crypto.hpp"

namespace vend::agent {

namespace {

constexpr size_t kMinSecret = 16;
constexpr size_t kMaxSecret = 1024;
constexpr size_t kMaxMqttPassword = 1024;

Error bad_usage(const std::string& message) { return make_error("bad_usage", message); }

Result<int64_t> parse_int(const std::string& option, const std::string& text, int64_t lo,
                          int64_t hi) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < lo || n > hi) {
    return bad_usage(option + ": expected an integer " + std::to_string(lo) + ".." +
                     std::to_string(hi) + ", got '" + text + "'");
  }
  return n;
}

// "host:port" or "[v6]:port".
Status parse_listen(const std::string& text, ShellOptions& o) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return bad_usage("--http: expected host:port, got '" + text + "'");
  }
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  auto port = parse_int("--http port", text.substr(colon + 1), 0, 65535);
  if (!port.ok()) return port.error();
  o.http_host = host;
  o.http_port = static_cast<int>(*port);
  return {};
}

Status parse_stock(const std::string& text, ShellOptions& o) {
  if (text == "embedded") {
    o.redis.reset();
    return {};
  }
  if (text.rfind("redis://", 0) != 0) {
    return bad_usage("--stock: expected 'embedded' or redis://host:port, got '" + text + "'");
  }
  auto redis = RedisOptions::parse_url(text);
  if (!redis.ok()) return bad_usage("--stock: " + redis.error().message);
  o.redis = *redis;
  return {};
}

Status parse_log_level(const std::string& text, ShellOptions& o) {
  static const std::map<std::string, LogLevel> kLevels = {{"debug", LogLevel::kDebug},
                                                          {"info", LogLevel::kInfo},
                                                          {"warn", LogLevel::kWarn},
                                                          {"error", LogLevel::kError}};
  auto it = kLevels.find(text);
  if (it == kLevels.end()) return bad_usage("--log-level: expected debug|info|warn|error");
  o.log_level = it->second;
  return {};
}

// An option that takes a value: how to apply it.
using Setter = std::function<Status(const std::string& value, ShellOptions& o)>;

Setter set_text(std::string ShellOptions::*field) {
  return [field](const std::string& value, ShellOptions& o) {
    o.*field = value;
    return Status{};
  };
}

template <typename Int>
Setter set_int(Int ShellOptions::*field, const char* name, int64_t lo, int64_t hi) {
  return [field, name, lo, hi](const std::string& value, ShellOptions& o) -> Status {
    auto n = parse_int(name, value, lo, hi);
    if (!n.ok()) return n.error();
    o.*field = static_cast<Int>(*n);
    return {};
  };
}

Status parse_sync(const std::string& value, ShellOptions& o) {
  if (value != "full" && value != "normal") return bad_usage("--sync: expected full|normal");
  o.sync_full = value == "full";
  return {};
}

const std::map<std::string, Setter>& valued_options() {
  static const std::map<std::string, Setter> kOptions = {
      {"--http", parse_listen},
      {"--mqtt", set_text(&ShellOptions::mqtt_url)},
      {"--mqtt-username", set_text(&ShellOptions::mqtt_username)},
      {"--mqtt-password-file", set_text(&ShellOptions::mqtt_password_file)},
      {"--mqtt-ca-file", set_text(&ShellOptions::mqtt_ca_file)},
      {"--mqtt-cert-file", set_text(&ShellOptions::mqtt_cert_file)},
      {"--mqtt-key-file", set_text(&ShellOptions::mqtt_key_file)},
      {"--db", set_text(&ShellOptions::db_path)},
      {"--stock", parse_stock},
      {"--operator-token-file", set_text(&ShellOptions::operator_token_file)},
      {"--gateway-secret-file", set_text(&ShellOptions::gateway_secret_file)},
      {"--payment-tolerance-s",
       set_int(&ShellOptions::payment_tolerance_s, "--payment-tolerance-s", 1, 86400)},
      {"--reservation-ttl-s",
       set_int(&ShellOptions::reservation_ttl_s, "--reservation-ttl-s", 1, 86400)},
      {"--dispatch-ttl-s", set_int(&ShellOptions::dispatch_ttl_s, "--dispatch-ttl-s", 5, 3600)},
      {"--refund-url", set_text(&ShellOptions::refund_url)},
      {"--refund-max-attempts",
       set_int(&ShellOptions::refund_max_attempts, "--refund-max-attempts", 1, 1000)},
      {"--review-after-s",
       set_int(&ShellOptions::review_after_s, "--review-after-s", 60, 30 * 86400)},
      {"--reconcile-interval-s",
       set_int(&ShellOptions::reconcile_interval_s, "--reconcile-interval-s", 0, 86400)},
      {"--broker-down-grace-s",
       set_int(&ShellOptions::broker_down_grace_s, "--broker-down-grace-s", 0, 86400)},
      {"--clock-skew-alert-ms",
       set_int(&ShellOptions::clock_skew_alert_ms, "--clock-skew-alert-ms", 0, 3'600'000)},
      {"--reject-log-interval-s",
       set_int(&ShellOptions::reject_log_interval_s, "--reject-log-interval-s", 0, 86400)},
      {"--sync", parse_sync},
      {"--log-level", parse_log_level},
      {"--http-threads", set_int(&ShellOptions::http_threads, "--http-threads", 1, 1024)},
      {"--http-event-threads",
       set_int(&ShellOptions::http_event_threads, "--http-event-threads", 1, 64)},
      {"--http-max-connections",
       set_int(&ShellOptions::http_max_connections, "--http-max-connections", 1, 1'000'000)},
      {"--http-max-queued",
       set_int(&ShellOptions::http_max_queued, "--http-max-queued", 1, 1 << 20)},
      {"--http-max-header-bytes",
       set_int(&ShellOptions::http_max_header_bytes, "--http-max-header-bytes", 1024, 1 << 20)},
      {"--http-max-body-bytes",
       set_int(&ShellOptions::http_max_body_bytes, "--http-max-body-bytes", 1024, 1 << 24)},
      {"--http-header-timeout-ms",
       set_int(&ShellOptions::http_header_timeout_ms, "--http-header-timeout-ms", 100, 600'000)},
      {"--http-body-timeout-ms",
       set_int(&ShellOptions::http_body_timeout_ms, "--http-body-timeout-ms", 100, 600'000)},
      {"--http-idle-timeout-s",
       set_int(&ShellOptions::http_idle_timeout_s, "--http-idle-timeout-s", 1, 3600)},
      {"--repo-batch-max",  // hidden: benchmarks only
       set_int(&ShellOptions::repo_batch_max, "--repo-batch-max", 1, 1 << 20)},
  };
  return kOptions;
}

// The MQTT TLS options with their names, for the checks below.
std::array<std::pair<const char*, const std::string*>, 3> mqtt_tls_files(const ShellOptions& o) {
  return {{{"--mqtt-ca-file", &o.mqtt_ca_file},
           {"--mqtt-cert-file", &o.mqtt_cert_file},
           {"--mqtt-key-file", &o.mqtt_key_file}}};
}

// The rules between the MQTT options. Like the firmware (config.cpp), the
// broker certificate is always checked, so ssl:// needs its CA.
Status check_mqtt_options(const ShellOptions& o) {
  bool tls = o.mqtt_url.rfind("ssl://", 0) == 0 || o.mqtt_url.rfind("mqtts://", 0) == 0;
  for (auto [name, value] : mqtt_tls_files(o)) {
    if (!value->empty() && !tls) {
      return bad_usage(std::string(name) + ": only with an ssl:// --mqtt URL, got '" + o.mqtt_url +
                       "'");
    }
  }
  if (tls && o.mqtt_ca_file.empty()) {
    return bad_usage("--mqtt " + o.mqtt_url +
                     ": ssl:// needs --mqtt-ca-file (the CA of the broker's certificate; for a "
                     "public CA /etc/ssl/certs/ca-certificates.crt)");
  }
  if (o.mqtt_cert_file.empty() != o.mqtt_key_file.empty()) {
    return bad_usage("--mqtt-cert-file and --mqtt-key-file go together");
  }
  if (!o.mqtt_password_file.empty() && o.mqtt_username.empty()) {
    return bad_usage("--mqtt-password-file: needs --mqtt-username");
  }
  return {};
}

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

Status check_secret(const std::string& secret, const std::string& where) {
  if (secret.size() < kMinSecret || secret.size() > kMaxSecret) {
    return make_error("bad_secret", where + ": must be " + std::to_string(kMinSecret) + ".." +
                                        std::to_string(kMaxSecret) + " characters");
  }
  for (unsigned char c : secret) {
    if (c <= 0x20 || c >= 0x7f) {
      return make_error("bad_secret", where + ": only printable ASCII, no spaces");
    }
  }
  return {};
}

// Writes a fresh secret to a new file, never overwriting one (O_EXCL).
Result<std::string> create_secret_file(const std::string& path) {
  std::string secret = crypto::Key::generate().to_hex();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return make_error("bad_secret", path + ": cannot create: " + std::strerror(errno));
  std::string line = secret + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok) return make_error("bad_secret", path + ": cannot write: " + std::strerror(errno));
  return secret;
}

Result<std::string> read_secret_file(const std::string& path, const char* what, std::ostream& out) {
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) {
    auto created = create_secret_file(path);
    if (created.ok()) out << "vend-agent: generated a new " << what << " in " << path << "\n";
    return created;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("bad_secret", path + ": cannot read: " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string secret = trim(ss.str());
  if (Status s = check_secret(secret, path); !s.ok()) return s.error();
  return secret;
}

// From the file option, else the variable; nullopt when neither is given.
Result<std::optional<std::string>> find_secret(const std::string& file, const char* env_name,
                                               const char* what, const GetEnv& getenv,
                                               std::ostream& out) {
  if (!file.empty()) {
    auto s = read_secret_file(file, what, out);
    if (!s.ok()) return s.error();
    return std::optional<std::string>(*s);
  }
  std::optional<std::string> value = getenv ? getenv(env_name) : std::nullopt;
  if (!value) return std::optional<std::string>();
  std::string secret = trim(*value);
  if (Status s = check_secret(secret, env_name); !s.ok()) return s.error();
  return std::optional<std::string>(secret);
}

// The whole file minus one trailing newline ("\n" or "\r\n"): a password may
// have surrounding spaces, so nothing else is trimmed.
Result<std::string> read_mqtt_password(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_error("bad_secret",
                      "--mqtt-password-file " + path + ": cannot read: " + std::strerror(errno));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string password = ss.str();
  if (!password.empty() && password.back() == '\n') password.pop_back();
  if (!password.empty() && password.back() == '\r') password.pop_back();
  if (password.empty() || password.size() > kMaxMqttPassword) {
    return make_error("bad_secret", "--mqtt-password-file " + path + ": must hold 1.." +
                                        std::to_string(kMaxMqttPassword) + " bytes");
  }
  if (password.find_first_of("\r\n") != std::string::npos) {
    return make_error("bad_secret", "--mqtt-password-file " + path + ": must be one line");
  }
  return password;
}

// A TLS file Paho cannot read would fail every connect attempt in the
// background; say so at start instead.
Status check_tls_files_readable(const ShellOptions& o) {
  for (auto [name, path] : mqtt_tls_files(o)) {
    if (!path->empty() && ::access(path->c_str(), R_OK) != 0) {
      return make_error("bad_file", std::string(name) + " " + *path + ": " + std::strerror(errno));
    }
  }
  return {};
}

}  // namespace

Result<ShellOptions> parse_options(const std::vector<std::string>& args) {
  ShellOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::optional<std::string> value;
    if (size_t eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (auto it = valued_options().find(name); it != valued_options().end()) {
      if (!value) {
        if (i + 1 >= args.size()) return bad_usage(name + ": missing value");
        value = args[++i];
      }
      if (value->empty()) return bad_usage(name + ": empty value");
      if (Status s = it->second(*value, o); !s.ok()) return s.error();
      continue;
    }
    if (value) return bad_usage(name + ": takes no value");
    if (name == "--insecure-no-auth") {
      o.insecure_no_auth = true;
    } else if (name == "--help" || name == "-h") {
      o.help = true;
    } else if (name == "--version") {
      o.version = true;
    } else if (name == "--mqtt-password") {
      return bad_usage(
          "--mqtt-password: not accepted (a command line is visible to every user in ps); use "
          "--mqtt-password-file FILE");
    } else {
      return bad_usage("unknown option '" + name + "'");
    }
  }
  if (Status s = check_mqtt_options(o); !s.ok()) return s.error();
  return o;
}

std::string usage() {
  return R"(usage: vend-agent [options]

The Vend cloud agent: HTTP API for orders and operators, MQTT to the devices.

  --http HOST:PORT              listen address of the HTTP API (127.0.0.1:8080; port 0: any)
  --mqtt URL                    MQTT broker, tcp://host:port or ssl://host:port
                                (tcp://127.0.0.1:1883)
  --mqtt-username NAME          MQTT username (vend-agent with deploy/mosquitto/acl)
  --mqtt-password-file FILE     MQTT password: the file's content, trailing newline
                                removed (never on the command line); needs --mqtt-username
  --mqtt-ca-file FILE           CA of the broker's certificate (PEM); required with ssl://
  --mqtt-cert-file FILE         client certificate (PEM) for mutual TLS, with
  --mqtt-key-file FILE          its private key (PEM); both only with ssl://
  --db PATH                     SQLite database (./vend-agent.db)
  --stock embedded|redis://HOST:PORT
                                stock counters in process (default) or in Redis
  --operator-token-file FILE    bearer token of the operator endpoints (or env
                                VEND_OPERATOR_TOKEN); a missing FILE is created with a new token
  --gateway-secret-file FILE    HMAC secret of payment notifications (or env
                                VEND_GATEWAY_SECRET); a missing FILE is created with a new secret
  --insecure-no-auth            operator endpoints without a token (local demos only)
  --reservation-ttl-s N         an unpaid order expires after N s (300; 1..86400)
  --payment-tolerance-s N       a payment notification signed more than N s from the
                                agent's clock is refused (300; 1..86400)
  --dispatch-ttl-s N            a dispense command expires N s after payment (60; 5..3600)
  --refund-url URL              the payment gateway's refund endpoint (http[s]://…); every
                                refund is POSTed there, signed, until it answers 2xx (none:
                                refunds are recorded but not delivered)
  --refund-max-attempts N       a refund is given up to an alert after N failed deliveries
                                (20; 1..1000; retries back off from 1 s to 5 min)
  --review-after-s N            a dispatched order with no result from its device for N s
                                goes to NEEDS_REVIEW for an operator (1800; 60..2592000)
  --reconcile-interval-s N      ask every device for a snapshot every N s, staggered
                                (600; 0 = only device-sent and on-demand snapshots)
  --broker-down-grace-s N       /healthz answers 503 once the broker has been down
                                N s (30)
  --clock-skew-alert-ms N       alert when a device's clock is off by more than N ms
                                (2000; below the 5 s command expiry tolerance; 0 = off)
  --reject-log-interval-s N     log a rejected device message once per device and
                                reason every N s, with the count (60; 0 = every one)
  --sync full|normal            SQLite durability (full)
  --http-threads N              HTTP handler threads, each waits for its group commit
                                (32; 1..1024)
  --http-event-threads N        HTTP event (epoll) threads (2; 1..64)
  --http-max-connections N      open connections at once; more get 503 (20000)
  --http-max-queued N           requests waiting for a handler thread; more get 503 (4096)
  --http-max-header-bytes N     request line and headers; more get 431 (8192)
  --http-max-body-bytes N       request body; more gets 413 (16384)
  --http-header-timeout-ms N    headers not complete in N ms after the request line: 408
                                (10000)
  --http-body-timeout-ms N      body not complete in N ms after the headers: 408 (10000)
  --http-idle-timeout-s N       close a keep-alive connection idle for N s (60)
  --log-level debug|info|warn|error  (info)
  --help, --version

SIGTERM/SIGINT stop it cleanly (exit 0). Exit 2: bad options or secrets; 1: start-up failure.
See docs/agent.md; the production broker (credentials, TLS): docs/deployment.md.
)";
}

Result<Secrets> load_secrets(const ShellOptions& o, const GetEnv& getenv, std::ostream& out) {
  Secrets secrets;
  auto token =
      find_secret(o.operator_token_file, "VEND_OPERATOR_TOKEN", "operator token", getenv, out);
  if (!token.ok()) return token.error();
  if (token->has_value()) {
    secrets.operator_token = **token;
  } else if (!o.insecure_no_auth) {
    return make_error("no_secret",
                      "no operator token: give --operator-token-file FILE (created if missing), "
                      "set VEND_OPERATOR_TOKEN, or --insecure-no-auth for a local demo");
  }
  auto gateway =
      find_secret(o.gateway_secret_file, "VEND_GATEWAY_SECRET", "gateway secret", getenv, out);
  if (!gateway.ok()) return gateway.error();
  if (!gateway->has_value()) {
    return make_error("no_secret",
                      "no gateway secret: give --gateway-secret-file FILE (created if "
                      "missing) or set VEND_GATEWAY_SECRET");
  }
  secrets.gateway_secret = **gateway;
  if (!o.mqtt_password_file.empty()) {
    auto password = read_mqtt_password(o.mqtt_password_file);
    if (!password.ok()) return password.error();
    secrets.mqtt_password = *password;
  }
  if (Status s = check_tls_files_readable(o); !s.ok()) return s.error();
  return secrets;
}

}  // namespace vend::agent
