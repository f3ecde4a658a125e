// The vend-agent command line, its config file (--config, shell_config.hpp)
// and its secrets (operator token, gateway secret, MQTT password). Parsing
// only reads the config file; load_secrets() may create a missing secret
// file (shell_secrets.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "http/trusted_proxies.hpp"
#include "limits/redis_rate_limiter.hpp"
#include "vend/log.hpp"
#include "vend/result.hpp"

namespace vend::agent {

struct ShellOptions {
  std::string http_host = "127.0.0.1";
  int http_port = 8080;  // 0: any free port (printed at start)
  std::string mqtt_url = "tcp://127.0.0.1:1883";
  // Broker credentials (docs/deployment.md). Empty: not sent. The password
  // is never an option value: load_secrets() reads it from the file.
  std::string mqtt_username;
  std::string mqtt_password_file;
  // TLS, only with an ssl:// (or mqtts://) --mqtt URL, which requires the CA
  // file; the client certificate and key go together.
  std::string mqtt_ca_file;
  std::string mqtt_cert_file;
  std::string mqtt_key_file;
  // A SQLite file, or a postgresql:// (postgres://) URL: the PostgreSQL log.
  std::string db_path = "./vend-agent.db";
  std::string operator_token_file;
  std::string gateway_secret_file;
  bool insecure_no_auth = false;
  int64_t reservation_ttl_s = 300;
  int64_t payment_tolerance_s = 300;
  int64_t dispatch_ttl_s = 60;
  int64_t command_version = 2;  // protocol version of commands (1: firmware before v2)
  int64_t review_after_s = 30 * 60;
  std::string refund_url;  // empty: refunds are recorded, not delivered
  int64_t refund_max_attempts = 20;
  int64_t reconcile_interval_s = 600;  // 0: no periodic snapshot requests
  int64_t reject_log_interval_s = 60;  // 0: log every rejected message
  int64_t broker_down_grace_s = 30;    // /healthz 503 once the broker is down this long
  int64_t clock_skew_alert_ms = 2000;  // clock_skew alert beyond this device clock skew
  bool sync_full = true;               // --sync full|normal
  LogLevel log_level = LogLevel::kInfo;
  int http_threads = 32;  // handler workers (they wait for group commits)
  // The HTTP server's bounds (http_server.hpp HttpServerLimits, docs/agent.md).
  int64_t http_event_threads = 2;
  int64_t http_max_connections = 20'000;
  int64_t http_max_queued = 4096;
  int64_t http_max_per_peer = 1024;  // requests in flight per peer address; 0: no limit
  int64_t http_max_header_bytes = 8192;
  int64_t http_max_body_bytes = 16'384;
  int64_t http_header_timeout_ms = 10'000;
  int64_t http_body_timeout_ms = 10'000;
  int64_t http_idle_timeout_s = 60;
  // Rate limits of POST /v1/orders per machine and per client (docs/agent.md
  // "Rate limits"); a rate of 0 turns that limit off.
  int64_t machine_rate_per_s = 200;
  int64_t machine_burst = 200;
  int64_t client_rate_per_s = 10;
  int64_t client_burst = 20;
  // RESERVED orders one client may hold at once (AgentOptions); 0 = off.
  int64_t max_open_reservations = 20;
  // --trusted-proxy: the reverse proxies whose X-Forwarded-For names the
  // client (HttpApiOptions); none by default.
  TrustedProxies trusted_proxies;
  // --redis: the Redis that holds what several agents share (the rate
  // limits). nullopt: kept in process.
  std::optional<RedisLimiterOptions> shared_redis;
  int64_t redis_timeout_ms = 50;
  // Several agents on one PostgreSQL (docs/deployment.md, "Several agents"):
  // set by --instance-id, which needs a postgresql:// --db. The others are
  // the lease parameters (cloud-agent/cluster lease_keeper.hpp) and the URL
  // the other instances redirect this instance's machines' requests to
  // (default: http://<--http address>, which must then not be 0.0.0.0).
  std::string instance_id;
  std::string advertise_url;
  int64_t shards = 64;
  int64_t lease_ms = 3000;
  int64_t renew_ms = 1000;
  // The console's event stream (GET /v1/ops/stream; ops_stream.hpp
  // OpsHubOptions, docs/agent.md): streams open at once (more get 503), each
  // stream's queue bound (a slow reader loses its oldest events, then gets
  // a resync), and the keep-alive comment's period (0: half of
  // --http-idle-timeout-s, at most 15 s; else below that timeout).
  int64_t ops_stream_max_subscribers = 64;
  int64_t ops_stream_queue_events = 256;
  int64_t ops_stream_queue_bytes = 1024 * 1024;
  int64_t ops_stream_heartbeat_ms = 0;
  // Hidden, for benchmarks only (docs/benchmarks.md #3): writes per group
  // commit; 1 = one fsync per write. 0: the repository default.
  int64_t repo_batch_max = 0;
  bool help = false;
  bool version = false;
  bool check_config = false;  // validate options and secrets, then exit
  std::string config_path;    // --config FILE; empty: none
};

// `args` excludes argv[0]. Errors have code "bad_usage" and name the option,
// including the rules between options (MQTT TLS files and the URL scheme,
// --mqtt-password-file needs --mqtt-username, the event stream's cap and
// heartbeat within the HTTP server's connections and idle timeout).
//
// With --config FILE, FILE's entries are applied first, so the command line
// overrides them. Every option that takes a value is a key, and
// insecure-no-auth (true|false); help, version, check-config and config are
// command line only. A key whose "-file" form is an option (mqtt-password,
// operator-token, gateway-secret...) is refused: secrets only by file. Errors
// in the file name "FILE:LINE: key: ..." (unknown key, bad or empty value, a
// key set twice); the file itself must not be writable by group or others.
Result<ShellOptions> parse_options(const std::vector<std::string>& args);

// The event stream's heartbeat period: --ops-stream-heartbeat-ms, or for 0
// half of --http-idle-timeout-s, 100..15000 ms.
int64_t ops_stream_heartbeat_ms(const ShellOptions& options);

// The keys a config file accepts (the option table's names without "--"),
// sorted: the shipped agent.conf is tested to mention each one.
std::vector<std::string> config_file_keys();

// The --help text.
std::string usage();

struct Secrets {
  std::string operator_token;  // empty only with --insecure-no-auth
  std::string gateway_secret;
  std::optional<std::string> mqtt_password;  // with --mqtt-password-file
};

// Reads an environment variable; nullopt when unset. Injected for tests.
using GetEnv = std::function<std::optional<std::string>(const char* name)>;

// What load_secrets does with a missing operator-token or gateway-secret file:
// create it (start-up), or only say that start-up will (--check-config).
enum class MissingSecretFile { kCreate, kReport };

// The operator token from --operator-token-file or VEND_OPERATOR_TOKEN, the
// gateway secret from --gateway-secret-file or VEND_GATEWAY_SECRET (a file
// wins over the variable). Surrounding whitespace is trimmed; a secret must
// be 16..1024 printable ASCII characters. A secret file that does not exist
// is created (mode 0600) with 64 random hex characters and `out` says where;
// with kReport nothing is created, `out` says so and that secret is empty.
// The MQTT password is the content of --mqtt-password-file with its trailing
// newline removed (1..1024 bytes, one line; never created). The MQTT TLS
// files must be readable. Every secret file (token, gateway secret, MQTT
// password, MQTT TLS key) must have no permission bits for group or others
// (vend::check_secret_file). Errors ("no_secret", "bad_secret", "bad_file")
// name the option or file.
Result<Secrets> load_secrets(const ShellOptions& options, const GetEnv& getenv, std::ostream& out,
                             MissingSecretFile missing = MissingSecretFile::kCreate);

}  // namespace vend::agent
