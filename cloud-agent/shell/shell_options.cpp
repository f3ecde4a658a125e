#include "shell/shell_options.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <map>
#include <string_view>

#include "shell/shell_config.hpp"

namespace vend::agent {

namespace {

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

Status parse_redis(const std::string& text, ShellOptions& o) {
  auto redis = RedisLimiterOptions::parse_url(text);
  if (!redis.ok()) return bad_usage("--redis: " + redis.error().message);
  o.shared_redis = *redis;
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

// 1..64 of [A-Za-z0-9._-]: it goes into the MQTT client id.
Status parse_instance_id(const std::string& value, ShellOptions& o) {
  bool ok = !value.empty() && value.size() <= 64;
  for (char c : value) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  if (!ok) return bad_usage("--instance-id: expected 1..64 of [A-Za-z0-9._-], got '" + value + "'");
  o.instance_id = value;
  return {};
}

Status parse_advertise_url(const std::string& value, ShellOptions& o) {
  if (value.rfind("http://", 0) != 0 && value.rfind("https://", 0) != 0) {
    return bad_usage("--advertise-url: expected http://HOST:PORT or https://…, got '" + value +
                     "'");
  }
  o.advertise_url = value;
  while (!o.advertise_url.empty() && o.advertise_url.back() == '/') o.advertise_url.pop_back();
  return {};
}

Status parse_trusted_proxies(const std::string& value, ShellOptions& o) {
  auto proxies = TrustedProxies::parse(value);
  if (!proxies.ok()) return proxies.error();
  o.trusted_proxies = std::move(proxies).value();
  return {};
}

using OptionTable = std::map<std::string, Setter>;

// Where the agent listens and what it reaches: broker, log, secrets.
void add_connection_options(OptionTable& t) {
  t.insert({
      {"--http", parse_listen},
      {"--mqtt", set_text(&ShellOptions::mqtt_url)},
      {"--mqtt-username", set_text(&ShellOptions::mqtt_username)},
      {"--mqtt-password-file", set_text(&ShellOptions::mqtt_password_file)},
      {"--mqtt-ca-file", set_text(&ShellOptions::mqtt_ca_file)},
      {"--mqtt-cert-file", set_text(&ShellOptions::mqtt_cert_file)},
      {"--mqtt-key-file", set_text(&ShellOptions::mqtt_key_file)},
      {"--db", set_text(&ShellOptions::db_path)},
      {"--operator-token-file", set_text(&ShellOptions::operator_token_file)},
      {"--gateway-secret-file", set_text(&ShellOptions::gateway_secret_file)},
  });
}

// Orders, payments, refunds, the devices' reports; durability and logging.
void add_order_options(OptionTable& t) {
  t.insert({
      {"--payment-tolerance-s",
       set_int(&ShellOptions::payment_tolerance_s, "--payment-tolerance-s", 1, 86400)},
      {"--reservation-ttl-s",
       set_int(&ShellOptions::reservation_ttl_s, "--reservation-ttl-s", 1, 86400)},
      {"--dispatch-ttl-s", set_int(&ShellOptions::dispatch_ttl_s, "--dispatch-ttl-s", 5, 3600)},
      {"--command-version", set_int(&ShellOptions::command_version, "--command-version", 1, 2)},
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
  });
}

// The HTTP server's threads and bounds, and the console's event stream.
void add_http_options(OptionTable& t) {
  t.insert({
      {"--http-threads", set_int(&ShellOptions::http_threads, "--http-threads", 1, 1024)},
      {"--http-event-threads",
       set_int(&ShellOptions::http_event_threads, "--http-event-threads", 1, 64)},
      {"--http-max-connections",
       set_int(&ShellOptions::http_max_connections, "--http-max-connections", 1, 1'000'000)},
      {"--http-max-queued",
       set_int(&ShellOptions::http_max_queued, "--http-max-queued", 1, 1 << 20)},
      {"--http-max-per-peer",
       set_int(&ShellOptions::http_max_per_peer, "--http-max-per-peer", 0, 1 << 20)},
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
      // The console's event stream (OpsHubOptions; check_ops_stream_options).
      {"--ops-stream-max-subscribers", set_int(&ShellOptions::ops_stream_max_subscribers,
                                               "--ops-stream-max-subscribers", 1, 100'000)},
      {"--ops-stream-queue-events",
       set_int(&ShellOptions::ops_stream_queue_events, "--ops-stream-queue-events", 1, 1 << 20)},
      {"--ops-stream-queue-bytes",
       set_int(&ShellOptions::ops_stream_queue_bytes, "--ops-stream-queue-bytes", 64 * 1024,
               int64_t{1} << 30)},
      {"--ops-stream-heartbeat-ms",
       set_int(&ShellOptions::ops_stream_heartbeat_ms, "--ops-stream-heartbeat-ms", 0, 600'000)},
  });
}

// Rate limits, proxies and several agents.
void add_limit_and_cluster_options(OptionTable& t) {
  t.insert({
      {"--redis", parse_redis},
      {"--redis-timeout-ms",
       set_int(&ShellOptions::redis_timeout_ms, "--redis-timeout-ms", 1, 10'000)},
      {"--machine-rate-per-s",
       set_int(&ShellOptions::machine_rate_per_s, "--machine-rate-per-s", 0, 1'000'000)},
      {"--machine-burst", set_int(&ShellOptions::machine_burst, "--machine-burst", 1, 1'000'000)},
      {"--client-rate-per-s",
       set_int(&ShellOptions::client_rate_per_s, "--client-rate-per-s", 0, 1'000'000)},
      {"--client-burst", set_int(&ShellOptions::client_burst, "--client-burst", 1, 1'000'000)},
      {"--max-open-reservations",
       set_int(&ShellOptions::max_open_reservations, "--max-open-reservations", 0, 1'000'000)},
      {"--trusted-proxy", parse_trusted_proxies},
      {"--instance-id", parse_instance_id},
      {"--advertise-url", parse_advertise_url},
      {"--shards", set_int(&ShellOptions::shards, "--shards", 1, 4096)},
      {"--lease-ms", set_int(&ShellOptions::lease_ms, "--lease-ms", 500, 600'000)},
      {"--renew-ms", set_int(&ShellOptions::renew_ms, "--renew-ms", 100, 600'000)},
      {"--repo-batch-max",  // hidden: benchmarks only
       set_int(&ShellOptions::repo_batch_max, "--repo-batch-max", 1, 1 << 20)},
  });
}

const OptionTable& valued_options() {
  static const OptionTable kOptions = [] {
    OptionTable t;
    add_connection_options(t);
    add_order_options(t);
    add_http_options(t);
    add_limit_and_cluster_options(t);
    return t;
  }();
  return kOptions;
}

// Options without a value. `in_file`: also a config-file key, "true" or
// "false"; the others are actions of one run, only on the command line.
struct Flag {
  bool ShellOptions::*field;
  bool in_file;
};

const std::map<std::string, Flag>& flag_options() {
  static const std::map<std::string, Flag> kFlags = {
      {"--insecure-no-auth", {&ShellOptions::insecure_no_auth, true}},
      {"--check-config", {&ShellOptions::check_config, false}},
      {"--help", {&ShellOptions::help, false}},
      {"--version", {&ShellOptions::version, false}},
  };
  return kFlags;
}

// One command-line option with its value ("--name value" or "--name=value").
struct Arg {
  std::string name;
  std::optional<std::string> value;
};

bool takes_value(const std::string& name) {
  return name == "--config" || valued_options().count(name) != 0;
}

Result<std::vector<Arg>> split_args(const std::vector<std::string>& args) {
  std::vector<Arg> out;
  for (size_t i = 0; i < args.size(); ++i) {
    Arg a{args[i], std::nullopt};
    if (size_t eq = a.name.find('='); a.name.rfind("--", 0) == 0 && eq != std::string::npos) {
      a.value = a.name.substr(eq + 1);
      a.name = a.name.substr(0, eq);
    }
    if (takes_value(a.name)) {
      if (!a.value) {
        if (i + 1 >= args.size()) return bad_usage(a.name + ": missing value");
        a.value = args[++i];
      }
      if (a.value->empty()) return bad_usage(a.name + ": empty value");
    }
    out.push_back(std::move(a));
  }
  return out;
}

Status apply_arg(const Arg& a, ShellOptions& o) {
  if (auto it = valued_options().find(a.name); it != valued_options().end()) {
    return it->second(*a.value, o);
  }
  if (a.value) return bad_usage(a.name + ": takes no value");
  if (auto it = flag_options().find(a.name); it != flag_options().end()) {
    o.*(it->second.field) = true;
  } else if (a.name == "-h") {
    o.help = true;
  } else if (a.name == "--mqtt-password") {
    return bad_usage(
        "--mqtt-password: not accepted (a command line is visible to every user in ps); use "
        "--mqtt-password-file FILE");
  } else {
    return bad_usage("unknown option '" + a.name + "'");
  }
  return {};
}

// A setter's message names "--key"; the config error names file, line and key.
std::string without_option_name(const std::string& message, const std::string& name) {
  std::string prefix = name + ": ";
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

Status apply_config_entry(const ConfigEntry& e, const std::string& where, ShellOptions& o) {
  std::string name = "--" + e.key;
  if (auto it = valued_options().find(name); it != valued_options().end()) {
    if (e.value.empty()) return bad_usage(where + ": empty value");
    Status s = it->second(e.value, o);
    if (!s.ok()) return bad_usage(where + ": " + without_option_name(s.error().message, name));
    return {};
  }
  auto flag = flag_options().find(name);
  if (flag != flag_options().end() && flag->second.in_file) {
    if (e.value != "true" && e.value != "false") {
      return bad_usage(where + ": expected true|false, got '" + e.value + "'");
    }
    o.*(flag->second.field) = e.value == "true";
    return {};
  }
  if (flag != flag_options().end() || e.key == "config") {
    return bad_usage(where + ": only on the command line (--" + e.key + ")");
  }
  if (valued_options().count(name + "-file") != 0) {
    return bad_usage(where + ": not accepted in a config file, which is readable by others: " +
                     "put the secret in a file only its owner can read (chmod 600) and set '" +
                     e.key + "-file = PATH'");
  }
  return bad_usage(where + ": unknown key (the keys are vend-agent's long options without " +
                   "'--'; see vend-agent --help)");
}

Status apply_config_file(const std::string& path, ShellOptions& o) {
  auto entries = read_config_file(path);
  if (!entries.ok()) return entries.error();
  std::map<std::string, int> first_line;
  for (const ConfigEntry& e : *entries) {
    std::string where = path + ":" + std::to_string(e.line) + ": " + e.key;
    if (auto [it, fresh] = first_line.emplace(e.key, e.line); !fresh) {
      return bad_usage(where + ": already set on line " + std::to_string(it->second));
    }
    if (Status s = apply_config_entry(e, where, o); !s.ok()) return s;
  }
  return {};
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

// Cluster mode needs the shared PostgreSQL, and its lease parameters must
// leave a renewal room inside a lease.
Status check_cluster_options(const ShellOptions& o) {
  bool cluster_only =
      !o.advertise_url.empty() || o.shards != 64 || o.lease_ms != 3000 || o.renew_ms != 1000;
  if (o.instance_id.empty()) {
    if (cluster_only) {
      return bad_usage(
          "--advertise-url, --shards, --lease-ms and --renew-ms are for several agents: they "
          "need --instance-id");
    }
    return {};
  }
  if (o.db_path.rfind("postgresql://", 0) != 0 && o.db_path.rfind("postgres://", 0) != 0) {
    return bad_usage(
        "--instance-id: several agents share a PostgreSQL database; --db must be a "
        "postgresql:// URL, got '" +
        o.db_path + "'");
  }
  if (o.mqtt_username == "vend-agent") {
    return bad_usage("--mqtt-username vend-agent with --instance-id " + o.instance_id +
                     ": each instance needs a broker user of its own, or the broker (client id = "
                     "username) lets the instances take over each other's session; make "
                     "vend-agent-" +
                     o.instance_id + " with deploy/mosquitto/add-user agent " + o.instance_id);
  }
  if (o.renew_ms * 2 > o.lease_ms) {
    return bad_usage("--renew-ms " + std::to_string(o.renew_ms) +
                     ": must be at most half of --lease-ms " + std::to_string(o.lease_ms) +
                     " (a lease must survive one failed renewal)");
  }
  if (o.advertise_url.empty() && o.http_port == 0) {
    return bad_usage("--instance-id with --http port 0: give a fixed port or --advertise-url");
  }
  if (o.advertise_url.empty() && (o.http_host == "0.0.0.0" || o.http_host == "::")) {
    return bad_usage("--instance-id with --http on " + o.http_host +
                     ": give --advertise-url, the address the other instances reach this one at");
  }
  return {};
}

// Every stream holds a connection, and its keep-alive comment must come
// before the server closes it as idle.
Status check_ops_stream_options(const ShellOptions& o) {
  if (o.ops_stream_max_subscribers >= o.http_max_connections) {
    return bad_usage(
        "--ops-stream-max-subscribers " + std::to_string(o.ops_stream_max_subscribers) +
        ": must be below --http-max-connections (" + std::to_string(o.http_max_connections) +
        "), or event streams could hold every connection");
  }
  int64_t idle_ms = o.http_idle_timeout_s * 1000;
  int64_t beat = o.ops_stream_heartbeat_ms;
  if (beat != 0 && (beat < 100 || beat >= idle_ms)) {
    return bad_usage("--ops-stream-heartbeat-ms " + std::to_string(beat) +
                     ": expected 0 (half of --http-idle-timeout-s, at most 15000) or 100.." +
                     std::to_string(idle_ms - 1) + " (below --http-idle-timeout-s " +
                     std::to_string(o.http_idle_timeout_s) +
                     " s, or idle streams would be closed)");
  }
  return {};
}

}  // namespace

int64_t ops_stream_heartbeat_ms(const ShellOptions& o) {
  if (o.ops_stream_heartbeat_ms != 0) return o.ops_stream_heartbeat_ms;
  return std::clamp<int64_t>(o.http_idle_timeout_s * 1000 / 2, 100, 15'000);
}

Result<ShellOptions> parse_options(const std::vector<std::string>& args) {
  auto split = split_args(args);
  if (!split.ok()) return split.error();
  ShellOptions o;
  for (const Arg& a : *split) {
    if (a.name != "--config") continue;
    if (!o.config_path.empty()) return bad_usage("--config: given more than once");
    o.config_path = *a.value;
  }
  // The file first: a command-line option then overrides its key.
  if (!o.config_path.empty()) {
    if (Status s = apply_config_file(o.config_path, o); !s.ok()) return s.error();
  }
  for (const Arg& a : *split) {
    if (a.name == "--config") continue;
    if (Status s = apply_arg(a, o); !s.ok()) return s.error();
  }
  if (Status s = check_mqtt_options(o); !s.ok()) return s.error();
  if (Status s = check_cluster_options(o); !s.ok()) return s.error();
  if (Status s = check_ops_stream_options(o); !s.ok()) return s.error();
  return o;
}

std::vector<std::string> config_file_keys() {
  std::vector<std::string> keys;
  for (const auto& [name, setter] : valued_options()) keys.push_back(name.substr(2));
  for (const auto& [name, flag] : flag_options()) {
    if (flag.in_file) keys.push_back(name.substr(2));
  }
  return keys;
}

// vend-agent --help.
constexpr std::string_view kUsage = R"(usage: vend-agent [options]

The Vend cloud agent: HTTP API for orders and operators, MQTT to the devices.

  --config FILE                 read options from FILE first: `key = value` lines, the keys
                                are the options below without "--" (insecure-no-auth = true),
                                `#` comments; secrets only by their *-file keys; the
                                command line overrides the file (/etc/vend/agent.conf)
  --check-config                check the options, the config file and the secret files,
                                print the result and exit (0: valid; nothing is created)
  --http HOST:PORT              listen address of the HTTP API (127.0.0.1:8080; port 0: any)
  --mqtt URL                    MQTT broker, tcp://host:port or ssl://host:port
                                (tcp://127.0.0.1:1883)
  --mqtt-username NAME          MQTT username (vend-agent with deploy/mosquitto/acl)
  --mqtt-password-file FILE     MQTT password: the file's content, trailing newline
                                removed (never on the command line); needs --mqtt-username
  --mqtt-ca-file FILE           CA of the broker's certificate (PEM); required with ssl://
  --mqtt-cert-file FILE         client certificate (PEM) for mutual TLS, with
  --mqtt-key-file FILE          its private key (PEM); both only with ssl://
  --db PATH|URL                 the agent's log: a SQLite database file (./vend-agent.db),
                                or PostgreSQL: postgresql://user@host:port/database
                                (password from ~/.pgpass or PGPASSFILE, not the URL)
  --operator-token-file FILE    bearer token of the operator endpoints (or env
                                VEND_OPERATOR_TOKEN); a missing FILE is created with a new token
  --gateway-secret-file FILE    HMAC secret of payment notifications (or env
                                VEND_GATEWAY_SECRET); a missing FILE is created with a new secret
  --insecure-no-auth            operator endpoints without a token (local demos only)
  --reservation-ttl-s N         an unpaid order expires after N s (300; 1..86400)
  --payment-tolerance-s N       a payment notification signed more than N s from the
                                agent's clock is counted and logged, and honoured all the
                                same (300; 1..86400)
  --dispatch-ttl-s N            a dispense command expires N s after payment (60; 5..3600)
  --command-version 1|2         protocol version of commands (2: every command expires;
                                1 only for firmware before v2, docs/protocol.md)
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
  --http-threads N              HTTP handler threads for operator calls and reads
                                (32; 1..1024)
  --http-event-threads N        HTTP event (epoll) threads (2; 1..64)
  --http-max-connections N      open connections at once; more get 503 (20000)
  --http-max-queued N           requests waiting for a handler thread; more get 503 (4096)
  --http-max-per-peer N         requests in flight per peer address; more get 503 (1024; 0 off)
  --http-max-header-bytes N     request line and headers; more get 431 (8192)
  --http-max-body-bytes N       request body; more gets 413 (16384)
  --http-header-timeout-ms N    headers not complete in N ms after the request line: 408
                                (10000)
  --http-body-timeout-ms N      body not complete in N ms after the headers: 408 (10000)
  --http-idle-timeout-s N       close a keep-alive connection idle for N s (60)
  --machine-rate-per-s N        orders per second one machine accepts, refilled into a
  --machine-burst N             bucket of N (200 and 200; rate 0 = no machine limit)
  --client-rate-per-s N         orders per second one client (X-Client-Id, else its
  --client-burst N              address) may place, bucket of N (10 and 20; 0 = off);
                                over a limit: 429 with Retry-After
  --max-open-reservations N     unpaid reservations one client may hold at once; one
                                more gets 429 too_many_reservations (20; 0 = off)
  --trusted-proxy ADDR[,ADDR...]  reverse proxies (IPs or CIDR blocks, v4 or v6) whose
                                X-Forwarded-For names the client: its address is then the
                                right-most one not itself a proxy (none: the peer's)
  --redis redis://HOST:PORT     keep what several agents share (the rate limits) in
                                this Redis (default: in process); if it fails, orders
                                go through unlimited (fail open, counted in /metrics)
  --redis-timeout-ms N          bound of each --redis call (50; 1..10000)
  --instance-id ID              run as one of several agents sharing the fleet through
                                the postgresql:// --db (1..64 of [A-Za-z0-9._-], unique)
  --advertise-url URL           where the other agents redirect requests for this one's
                                machines (http://<--http address>)
  --shards N                    shards the fleet is split into; the same for every
                                instance, for ever (64; 1..4096)
  --lease-ms N                  a shard's lease lasts N ms past its last renewal: how soon
                                a dead instance's machines move (3000; 500..600000)
  --renew-ms N                  lease round interval (1000; at most half of --lease-ms)
  --ops-stream-max-subscribers N  console event streams open at once; more get 503
                                (64; below --http-max-connections)
  --ops-stream-queue-events N   events queued per stream; a slower reader loses the
  --ops-stream-queue-bytes N    oldest, then gets `resync` (256 events, 1048576 bytes)
  --ops-stream-heartbeat-ms N   keep-alive comment on an idle stream every N ms (0: half
                                of --http-idle-timeout-s, at most 15000; else 100 ms
                                up to below that timeout)
  --log-level debug|info|warn|error  (info)
  --help, --version

SIGTERM/SIGINT stop it cleanly (exit 0). Exit 2: bad options or secrets; 1: start-up failure.
See docs/agent.md; the production broker (credentials, TLS): docs/deployment.md.
)";

std::string usage() { return std::string(kUsage); }

}  // namespace vend::agent
