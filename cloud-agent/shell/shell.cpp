#include "shell/shell.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>
#include <thread>

#include "accounts/accounts.hpp"
#include "cluster/pg_lease_store.hpp"
#include "core/agent_core.hpp"
#include "http/http_api.hpp"
#include "http/http_server.hpp"
#include "http/ops_series.hpp"
#include "http/ops_stream.hpp"
#include "limits/embedded_rate_limiter.hpp"
#include "limits/redis_rate_limiter.hpp"
#include "postgres/postgres_repository.hpp"
#include "repository/repository.hpp"
#include "shell/account_cli.hpp"
#include "shell/cluster_node.hpp"
#include "shell/core_thread.hpp"
#include "shell/reader_thread.hpp"
#include "shell/refund_sender.hpp"
#include "shell/shell_options.hpp"
#include "vend/connect_retry.hpp"
#include "vend/paho_transport.hpp"
#include "vend/topics.hpp"

#ifndef VEND_VERSION
#define VEND_VERSION "0.0.0"
#endif

namespace vend::agent {

namespace {

constexpr const char* kLog = "agent";
// Messages of one machine waiting in the inbound queue at once (5% of it).
constexpr size_t kInboundPerDevice = 500;

// Blocks the stop signals in the calling thread, before any other thread
// exists: every thread inherits the mask, and only wait_for_stop() sees them.
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up mid-response is not fatal
  return set;
}

std::string listen_url(const std::string& host, int port) {
  bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

class AgentProcess {
 public:
  AgentProcess(ShellOptions options, Secrets secrets, Logger& log)
      : options_(std::move(options)), secrets_(std::move(secrets)), log_(log) {}
  ~AgentProcess() { stop(); }
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  // Opens the database, starts the core, the ticker,
  // the MQTT connector and the HTTP server; prints the start line to `out`.
  Status start(std::ostream& out);
  // Returns when a stop signal arrives (true) or the HTTP server died (false).
  bool wait_for_stop(const sigset_t& signals);
  // Stops everything in order. Idempotent.
  void stop();

 private:
  Status open_storage();
  Status join_cluster();
  void open_transport();
  AgentOptions agent_options() const;
  // The ops series, the ops stream hub and the tee that feeds both.
  void open_ops();
  void warn_auth_mode();
  Result<int> bind_http();  // the bound port
  void open_rate_limiter();
  Status start_mqtt();
  Status start_refunds();
  HttpServerLimits http_limits();

  ShellOptions options_;
  Secrets secrets_;
  Logger& log_;
  SystemClock clock_;
  SecureRandom random_;
  std::unique_ptr<Repository> repo_;
  std::unique_ptr<ClusterNode> cluster_;  // with --instance-id
  // The core's one thread; outlives the transport that feeds it and the core
  // that runs on it.
  std::unique_ptr<CoreThread> core_thread_;
  // Reads of the log for clients' requests, off the core thread.
  std::unique_ptr<ReaderThread> reader_;
  std::unique_ptr<PahoTransport> transport_;
  // The console's event stream and plots, fed with every ops message the
  // core publishes (the tee between the core and Paho).
  std::unique_ptr<OpsSeries> series_;
  std::unique_ptr<OpsHub> hub_;
  std::unique_ptr<OpsTee> tee_;
  std::unique_ptr<AgentCore> core_;
  std::unique_ptr<RateLimiter> limiter_;  // outlives api_
  std::unique_ptr<Accounts> accounts_;    // outlives api_ (none with --insecure-no-auth)
  std::unique_ptr<HttpApi> api_;
  std::unique_ptr<HttpServer> server_;
  // Monotonic ms since which the broker connection is down (for /healthz);
  // set at start, cleared on connect, set again on a loss.
  std::atomic<int64_t> mqtt_down_since_ms_{0};
  std::unique_ptr<ConnectRetry> connector_;
  std::unique_ptr<RefundSender> refunds_;
  bool stopped_ = false;
};

Status AgentProcess::open_storage() {
  RepositoryOptions ro;
  ro.synchronous = options_.sync_full ? sql::Sync::kFull : sql::Sync::kNormal;
  if (options_.repo_batch_max > 0) ro.batch_max = static_cast<size_t>(options_.repo_batch_max);
  // Several agents: a writer paused mid-transaction must not hold the fence's
  // row locks (and so a takeover) past its lease.
  // Its writer must not wait without bound for the rows of a paused agent
  // either (a failed write is rebuilt from the database by the node).
  if (!options_.instance_id.empty()) {
    ro.pg_idle_in_transaction_timeout_ms = options_.lease_ms / 2;
    ro.pg_lock_timeout_ms = options_.lease_ms / 2;
    ro.pg_statement_timeout_ms = 5 * options_.lease_ms;
  }
  auto repo = is_postgres_url(options_.db_path)
                  ? open_postgres_repository(options_.db_path, ro, log_)
                  : Repository::open(options_.db_path, ro, log_);
  if (!repo.ok()) return repo.error();
  repo_ = std::move(repo).value();
  return {};
}

// With --instance-id: the node that joins the agents sharing the database
// (after the HTTP port is bound, so that a second process started by
// mistake fails before it takes any shard) and wins the first shards before
// the core loads them.
Status AgentProcess::join_cluster() {
  if (options_.instance_id.empty()) return {};
  // Half a lease: a round stuck on the database fails while its leases are
  // still valid (and the gate closes them at their end regardless).
  auto store = PgLeaseStore::open(options_.db_path, PgLeaseStoreOptions{options_.lease_ms / 2});
  if (!store.ok()) return store.error();
  ClusterNodeOptions co;
  co.lease.instance_id = options_.instance_id;
  co.lease.shard_count = static_cast<int>(options_.shards);
  co.lease.lease_ms = options_.lease_ms;
  co.lease.renew_every_ms = options_.renew_ms;
  co.lease.safety_ms = std::min<int64_t>(500, options_.lease_ms / 4);
  if (std::string bad = check_lease_options(co.lease); !bad.empty()) {
    return make_error("bad_usage", bad);
  }
  co.advertise_url = options_.advertise_url.empty()
                         ? listen_url(options_.http_host, options_.http_port)
                         : options_.advertise_url;
  co.join_timeout_ms = 2 * options_.lease_ms + 1000;
  cluster_ =
      std::make_unique<ClusterNode>(co, std::move(store).value(), *repo_, clock_, random_, log_);
  return {};
}

void AgentProcess::open_transport() {
  PahoOptions po;
  po.server_uri = options_.mqtt_url;
  if (options_.instance_id.empty()) {
    po.client_id = "vend-agent";
    po.clean_session = false;  // events published while we were away are kept for us
  } else {
    // One of several: its own id, and a clean session, so that it never
    // keeps the subscriptions of machines it served before a restart (the
    // core subscribes to its own machines; the devices re-send what is not
    // acknowledged, and presence is retained).
    po.client_id = "vend-agent-" + options_.instance_id;
    po.clean_session = true;
  }
  if (!options_.mqtt_username.empty()) po.username = options_.mqtt_username;
  po.password = secrets_.mqtt_password;
  if (!options_.mqtt_ca_file.empty()) {  // parse_options: set exactly with ssl://
    po.tls = PahoTlsOptions{options_.mqtt_ca_file, options_.mqtt_cert_file, options_.mqtt_key_file};
  }
  transport_ = std::make_unique<PahoTransport>(po, log_);
}

// The HTTP port is bound before MQTT connects: a second agent started by
// mistake on the same address fails here, before its session (same client
// id) could take the running agent's session over.
AgentOptions AgentProcess::agent_options() const {
  AgentOptions ao;
  ao.reservation_ttl_ms = options_.reservation_ttl_s * 1000;
  ao.dispatch_ttl_ms = options_.dispatch_ttl_s * 1000;
  ao.command_version = static_cast<int>(options_.command_version);
  ao.dispatch_review_ms = options_.review_after_s * 1000;
  ao.refund_max_attempts = static_cast<int>(options_.refund_max_attempts);
  ao.reconcile_interval_ms = options_.reconcile_interval_s * 1000;
  ao.reject_log_interval_ms = options_.reject_log_interval_s * 1000;
  ao.clock_skew_alert_ms = options_.clock_skew_alert_ms;
  ao.max_open_reservations_per_client = static_cast<size_t>(options_.max_open_reservations);
  ao.instance_id = options_.instance_id;
  return ao;
}

void AgentProcess::open_ops() {
  series_ = std::make_unique<OpsSeries>(OpsSeriesOptions{}, clock_);
  OpsHubOptions hub_options;  // shell_options.hpp: the --ops-stream-* options
  hub_options.max_subscribers = static_cast<size_t>(options_.ops_stream_max_subscribers);
  hub_options.queue_events = static_cast<size_t>(options_.ops_stream_queue_events);
  hub_options.queue_bytes = static_cast<size_t>(options_.ops_stream_queue_bytes);
  hub_options.heartbeat_ms = ops_stream_heartbeat_ms(options_);
  hub_ = std::make_unique<OpsHub>(hub_options, clock_);
  OpsSeries* series = series_.get();
  hub_->add_listener([series](const std::string& kind, const std::string& payload) {
    series->offer(kind, payload);
  });
  tee_ = std::make_unique<OpsTee>(*transport_, *hub_);
}

void AgentProcess::warn_auth_mode() {
  if (options_.insecure_no_auth) {
    log_.warn(kLog, "--insecure-no-auth: operator endpoints need no token");
  } else if (!secrets_.operator_token.empty()) {
    log_.warn(kLog,
              "the single operator token is deprecated (it acts as an admin and is removed in "
              "the next release): create accounts (vend-agent account add) and use their API "
              "tokens");
  }
}

// The HTTP port is bound before MQTT connects: a second agent started by
// mistake on the same address fails here, before its session (same client
// id) could take the running agent's session over.
Status AgentProcess::start(std::ostream& out) {
  if (Status s = open_storage(); !s.ok()) return s;
  if (Status s = join_cluster(); !s.ok()) return s;
  mqtt_down_since_ms_ = clock_.monotonic_ms();  // down until the first connect
  open_transport();
  CoreThread::Limits inbound;  // 10,000 messages, 64 MiB, 10,000 calls
  // One machine's share: a buggy or hostile one cannot fill the queue the
  // fleet shares (what is dropped is re-sent: core_thread.hpp).
  inbound.max_messages_per_source = kInboundPerDevice;
  core_thread_ = std::make_unique<CoreThread>(inbound, std::chrono::milliseconds(10), log_);
  open_ops();
  reader_ = std::make_unique<ReaderThread>();
  core_ = std::make_unique<AgentCore>(*repo_, *tee_, clock_, random_, log_, agent_options(),
                                      core_thread_.get(), &reader_->lookups(),
                                      &reader_->reservations());
  auto port = bind_http();  // requests wait in the backlog until serve_http()
  if (!port.ok()) return port.error();
  if (cluster_) {
    if (Status s = cluster_->join(); !s.ok()) return s;
  }
  // Before the core thread: inline. One of several: its shards only.
  if (Status s = core_->start(cluster_ ? cluster_->ownership() : nullptr); !s.ok()) return s;
  AgentCore& core = *core_;
  core_thread_->start(CoreThread::Handlers{[&core](const Message& m) { core.on_message(m); },
                                           [&core](bool up) { core.on_connection(up); },
                                           [&core] { core.tick(); }});
  if (cluster_) cluster_->start(core);
  if (Status s = start_refunds(); !s.ok()) return s;
  if (Status s = start_mqtt(); !s.ok()) return s;
  if (Status s = server_->start(); !s.ok()) return s;
  out << "vend-agent: HTTP API on " << listen_url(options_.http_host, *port) << ", MQTT broker "
      << options_.mqtt_url << "\n"
      << std::flush;
  warn_auth_mode();
  return {};
}

// In Redis with --redis (shared by every agent using it), else in process.
// A Redis that does not answer at start is logged; orders go through
// meanwhile (the limiter fails open) and limits apply once it answers.
void AgentProcess::open_rate_limiter() {
  if (!options_.shared_redis) {
    limiter_ = std::make_unique<EmbeddedRateLimiter>(clock_);
    return;
  }
  RedisLimiterOptions ro = *options_.shared_redis;
  ro.command_timeout = std::chrono::milliseconds(options_.redis_timeout_ms);
  ro.connect_timeout = std::max(ro.connect_timeout, ro.command_timeout);
  auto redis = std::make_unique<RedisRateLimiter>(ro, clock_, log_);
  if (Status s = redis->ping(); !s.ok()) {
    log_.warn(kLog,
              "rate limits: " + s.error().message + " (orders are not limited until it answers)");
  } else {
    log_.info(kLog, "rate limits in redis " + ro.address());
  }
  limiter_ = std::move(redis);
}

Result<int> AgentProcess::bind_http() {
  HttpApiOptions ho;
  open_rate_limiter();
  ho.rate_limiter = limiter_.get();
  ho.trusted_proxies = options_.trusted_proxies;
  ho.machine_limit = {static_cast<double>(options_.machine_rate_per_s), options_.machine_burst};
  ho.client_limit = {static_cast<double>(options_.client_rate_per_s), options_.client_burst};
  ho.operator_token = secrets_.operator_token;
  if (!options_.insecure_no_auth) {
    accounts_ = std::make_unique<Accounts>(*repo_, clock_, log_);
    ho.accounts = accounts_.get();
  }
  ho.gateway_secret = secrets_.gateway_secret;
  PahoTransport* transport = transport_.get();
  ho.mqtt_connected = [transport] { return transport->connected(); };
  ho.mqtt_down_ms = [this, transport]() -> int64_t {
    int64_t since = mqtt_down_since_ms_.load();
    // 0 while not connected: the loss is not reported yet (the transport's
    // reconnect thread reports it), so it is just now.
    if (transport->connected() || since == 0) return 0;
    return clock_.monotonic_ms() - since;
  };
  ho.broker_down_grace_ms = options_.broker_down_grace_s * 1000;
  ho.inbound_fill = [this] {
    Inbox<Message>::Fill f = core_thread_->fill();  // set before HTTP starts
    return HttpApiOptions::InboundFill{
        f.messages,  f.max_messages,          f.bytes,
        f.max_bytes, core_thread_->dropped(), core_thread_->dropped_over_share()};
  };
  ho.payment_tolerance_s = options_.payment_tolerance_s;
  ho.worker_threads = static_cast<size_t>(options_.http_threads);
  ho.max_queued_requests = static_cast<size_t>(options_.http_max_queued);
  ho.max_requests_per_peer = static_cast<size_t>(options_.http_max_per_peer);
  ho.max_body_bytes = static_cast<size_t>(options_.http_max_body_bytes);
  ho.server_stats = [this] { return server_->stats(); };
  ho.ops_hub = hub_.get();
  ho.ops_series = series_.get();
  if (cluster_) {
    ClusterNode* node = cluster_.get();
    ho.owner_url = [node](const std::string& device) { return node->owner_url(device); };
    ho.self_url = node->self_url();
    ho.cluster_metrics = [node] { return node->metrics(); };
    ho.cluster_view = [node] { return node->view_json(); };
  }
  ho.on_rejected = [this](const std::string& limit, const std::string& source) {
    server_->note_rejected(limit, source);
  };
  api_ = std::make_unique<HttpApi>(*core_, ho, clock_, log_);
  server_ = std::make_unique<HttpServer>(http_limits(), api_->handler(), clock_, log_);
  auto port = server_->bind(options_.http_host, options_.http_port);
  if (!port.ok()) {
    return make_error("http_bind", "cannot listen on " +
                                       listen_url(options_.http_host, options_.http_port) + ": " +
                                       port.error().message + " (address in use or not local?)");
  }
  return *port;
}

// Every connection is a descriptor: the soft RLIMIT_NOFILE is raised to the
// hard one, and max_connections kept below it.
HttpServerLimits AgentProcess::http_limits() {
  HttpServerLimits l;
  l.event_threads = static_cast<size_t>(options_.http_event_threads);
  l.max_connections = static_cast<size_t>(options_.http_max_connections);
  l.max_header_bytes = static_cast<size_t>(options_.http_max_header_bytes);
  l.max_body_bytes = static_cast<size_t>(options_.http_max_body_bytes);
  l.header_timeout_ms = options_.http_header_timeout_ms;
  l.body_timeout_ms = options_.http_body_timeout_ms;
  l.idle_timeout_ms = options_.http_idle_timeout_s * 1000;
  l.reject_log_interval_ms = options_.reject_log_interval_s * 1000;
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    if (nofile.rlim_cur < nofile.rlim_max) {
      nofile.rlim_cur = nofile.rlim_max;
      (void)::setrlimit(RLIMIT_NOFILE, &nofile);
    }
    // Room for the database, MQTT, the refund sender and MHD's own.
    constexpr rlim_t kReserved = 256;
    rlim_t room = nofile.rlim_cur > kReserved ? nofile.rlim_cur - kReserved : 1;
    if (l.max_connections + l.max_connections / 8 + 64 > room) {
      size_t capped = static_cast<size_t>(room * 8 / 9 > 64 ? room * 8 / 9 - 64 : 1);
      log_.warn(kLog, "RLIMIT_NOFILE " + std::to_string(nofile.rlim_cur) +
                          ": --http-max-connections lowered to " + std::to_string(capped));
      l.max_connections = capped;
    }
  }
  return l;
}

Status AgentProcess::start_mqtt() {
  // Paho threads only queue; the core thread calls the core (core_thread.hpp).
  CoreThread& inbox = *core_thread_;
  transport_->on_message([&inbox](const Message& m) { inbox.push_message(m); });
  transport_->on_connection([this, &inbox](bool up) {
    mqtt_down_since_ms_ = up ? 0 : clock_.monotonic_ms();
    hub_->set_broker_connected(up);  // the console's badge
    inbox.push_connection(up);
  });
  // Remembered while disconnected; sent (and restored) at every connect.
  // Several agents: the core subscribes to its own machines' topics only.
  for (const std::string& filter : {topics::all_device_evt(), topics::all_device_status()}) {
    if (cluster_) break;
    if (Status s = transport_->subscribe(filter, 1); !s.ok()) return s;
  }
  connector_ = std::make_unique<ConnectRetry>(*transport_, random_, log_, "agent", "serving HTTP");
  return {};
}

bool AgentProcess::wait_for_stop(const sigset_t& signals) {
  const timespec poll{0, 200 * 1000 * 1000};
  for (;;) {
    int sig = sigtimedwait(&signals, nullptr, &poll);
    series_->drain();  // the plots' parsing, off the core thread
    if (sig == SIGTERM || sig == SIGINT) {
      log_.info(kLog, std::string("stopping on ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT"));
      return true;
    }
    if (!server_->running()) {
      log_.error(kLog, "the HTTP server stopped unexpectedly");
      return false;
    }
    if (cluster_ && cluster_->replaced()) return false;  // logged by the node
  }
}

Status AgentProcess::start_refunds() {
  if (options_.refund_url.empty()) {
    log_.warn(kLog,
              "no --refund-url: refunds are recorded (GET /v1/refunds) but not delivered to the "
              "payment gateway");
    return {};
  }
  RefundSenderOptions ro;
  ro.url = options_.refund_url;
  ro.secret = secrets_.gateway_secret;
  auto sender = RefundSender::create(*core_, ro, clock_, log_);
  if (!sender.ok()) return sender.error();
  refunds_ = std::move(sender).value();
  refunds_->start();
  return {};
}

void AgentProcess::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (server_) server_->stop();  // no new requests; running ones finish
  if (reader_) reader_->stop();  // queued reads run; their steps reach the core thread
  if (connector_) connector_->stop();
  refunds_.reset();  // an answer in flight is applied; the rest stays PENDING
  // What was queued runs; later input is refused (devices re-send what is
  // unacknowledged, and nothing answered is lost: answers wait for commits).
  if (core_thread_) core_thread_->stop();
  if (transport_) transport_->disconnect();
  transport_.reset();  // joins the Paho threads: no handler runs after this
  // Commits what is queued and runs its commit callbacks (they may refer to
  // the core) before the core goes; the destructor commits the rest too.
  if (repo_) repo_->flush();
  // The rounds stop and the leases go (the others take the shards at their
  // next round), after the last writes committed under them.
  if (cluster_) cluster_->stop();
  core_.reset();  // nothing calls it any more
  log_.info(kLog, "stopped");
}

std::optional<std::string> process_getenv(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::optional<std::string>(v) : std::nullopt;
}

// --check-config: what start-up would refuse, without starting.
int check_config(const ShellOptions& options, std::ostream& out, std::ostream& err) {
  auto secrets = load_secrets(options, process_getenv, out, MissingSecretFile::kReport);
  if (!secrets.ok()) {
    err << "vend-agent: " << secrets.error().to_string() << "\n";
    return 2;
  }
  out << "vend-agent: configuration OK"
      << (options.config_path.empty() ? "" : " (" + options.config_path + ")") << "\n";
  return 0;
}

int run_agent(ShellOptions options, std::ostream& out, std::ostream& err) {
  sigset_t signals = block_stop_signals();
  auto secrets = load_secrets(options, process_getenv, out);
  if (!secrets.ok()) {
    err << "vend-agent: " << secrets.error().to_string() << "\n";
    return 2;
  }
  StderrLogger log(options.log_level);
  AgentProcess agent(std::move(options), std::move(secrets).value(), log);
  if (Status s = agent.start(out); !s.ok()) {
    err << "vend-agent: " << s.error().to_string() << "\n";
    return 1;
  }
  bool clean = agent.wait_for_stop(signals);
  // A second signal during the stop ends the process at once (default action).
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  agent.stop();
  return clean ? 0 : 1;
}

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (is_account_command(args)) return run_account_command(args, std::cin, out, err);
  auto options = parse_options(args);
  if (!options.ok()) {
    // One line naming the problem; the usage only on --help.
    const std::string& m = options.error().message;
    err << "vend-agent: " << m
        << (m.find("--help") == std::string::npos ? " (see vend-agent --help)\n" : "\n");
    return 2;
  }
  if (options->help) {
    out << usage();
    return 0;
  }
  if (options->version) {
    out << "vend-agent " << VEND_VERSION << "\n";
    return 0;
  }
  if (options->check_config) return check_config(*options, out, err);
  return run_agent(std::move(options).value(), out, err);
}

}  // namespace vend::agent
