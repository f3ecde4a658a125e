// HttpApi: the agent's HTTP/JSON API, a thin adapter over AgentCore served by
// HttpServer (libmicrohttpd; handlers read HttpRequest values). docs/openapi.yaml is the
// contract; docs/agent.md shows a session.
//
//   customers   POST /v1/orders (Idempotency-Key scoped per X-Client-Id, else
//               per peer address), GET /v1/orders/{id}, POST
//               /v1/orders/{id}/cancel, GET /v1/machines/{id}/catalog
//   gateway     POST /v1/orders/{id}/payment   (Vend-Signature, vend/webhook.hpp)
//   operators   /v1/devices..., GET /v1/orders, POST /v1/orders/{id}/resolve,
//               GET /v1/fleet, GET /v1/ops/stream (Server-Sent Events), GET
//               /v1/ops/series (http_ops.cpp) (Authorization: Bearer <token>)
//   anyone      GET /console/ (the operators' console, http_console.cpp),
//               GET /metrics, GET /healthz (503 with the reasons when the
//               repository fail-stopped, the broker is down past a grace or
//               the inbound queue is saturated)
//
// Errors are {"error":{"code","message"}} with 400 bad_request, 401
// unauthorized / bad_signature, 404 not_found / unknown_slot, 409 sold_out /
// device_offline / invalid_state / conflict, 413 payload_too_large, 503
// unavailable, 500 internal. Every request body is validated strictly here
// (unknown, missing, duplicate, wrong-typed or out-of-range fields are 400,
// the message names the field) before the core sees it; no exception leaves
// a handler. POST /v1/orders over a rate limit is 429 rate_limited, with
// Retry-After and "limit": "machine" or "client" (http_rate_limits.cpp).
//
// A request without Content-Length and without a chunked Transfer-Encoding
// has an empty body (RFC 9112 6.3): `curl -X POST` of cancel or reconcile
// is answered at once (HttpServer).
//
// Most handlers block on AgentCore (its group commit), so they run on a
// bounded WorkerPool: handle() queues the request and returns; a worker
// routes it, runs it and completes the HttpResponder. A full queue is
// answered 503 with limit "max_queued_requests". Two routes run on the
// server's event thread instead: POST /v1/orders (unless the rate limiter
// may block on Redis) and POST /v1/orders/{id}/payment; they only parse,
// check and post the work to the core, which completes the HttpResponder
// after the commit.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/agent_core.hpp"
#include "http/http_server.hpp"
#include "http/metrics.hpp"
#include "http/path_pattern.hpp"
#include "http/trusted_proxies.hpp"
#include "http/worker_pool.hpp"
#include "limits/in_flight_gate.hpp"
#include "limits/rate_limiter.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"
#include "vend/log_limiter.hpp"
#include "vend/result.hpp"

namespace vend::agent {

class OpsHub;
class OpsSeries;

struct HttpApiOptions {
  // Bearer token of the operator endpoints. Empty: they are open to anyone
  // (vend-agent --insecure-no-auth, local demos only).
  std::string operator_token;
  // HMAC-SHA256 key (the string's bytes) of the Vend-Signature header on
  // payment notifications (vend/webhook.hpp). REQUIRES: not empty.
  std::string gateway_secret;
  // Larger bodies are refused with 413 before they are read.
  size_t max_body_bytes = 16 * 1024;
  // For /healthz and /metrics; may be empty (reported as not connected).
  std::function<bool()> mqtt_connected;
  // A payment notification signed further than this from the agent's clock
  // is handled all the same (its money was taken), and counted
  // (vend_payment_clock_skew_total) and logged: one of the clocks is wrong.
  int64_t payment_tolerance_s = 300;
  // How long the broker connection has been down, ms (0 while up); may be
  // empty (never down). Past broker_down_grace_ms /healthz answers 503.
  std::function<int64_t()> mqtt_down_ms;
  int64_t broker_down_grace_ms = 30'000;
  // The inbound queue's fill; may be empty (never saturated). At >= 90% of
  // either bound /healthz answers 503.
  struct InboundFill {
    size_t messages = 0, max_messages = 0, bytes = 0, max_bytes = 0;
    uint64_t dropped = 0, dropped_machine_share = 0;  // since start
  };
  std::function<InboundFill()> inbound_fill;
  // The reverse proxies whose X-Forwarded-For names the client (client_of);
  // empty: none, the client's address is the TCP peer's.
  TrustedProxies trusted_proxies;
  // Order rate limits: POST /v1/orders takes one token from the bucket
  // "machine:<device>" and one from "client:<client>" (the idempotency
  // scope: X-Client-Id, else the client's address), both or neither; over
  // either it is answered 429. Null: no rate limits. Must outlive the HttpApi.
  RateLimiter* rate_limiter = nullptr;
  // A limit with rate_per_s 0 is off. Defaults: docs/agent.md "Rate limits".
  RateLimit machine_limit{200, 200};
  RateLimit client_limit{10, 20};
  // Handler threads and the requests that may wait for one (then 503).
  size_t worker_threads = 32;
  size_t max_queued_requests = 4096;
  // Requests of one peer address in flight at once (from arrival to
  // answer); one more is answered 503 with limit "max_requests_per_peer".
  // 0: no limit.
  size_t max_requests_per_peer = 1024;
  // The server's counters for /metrics, and where a refusal of the API's own
  // (max_queued_requests) is reported; either may be empty.
  std::function<HttpServerStats()> server_stats;
  std::function<void(const std::string& limit, const std::string& source)> on_rejected;
  // The console's event stream (GET /v1/ops/stream) and plots (GET
  // /v1/ops/series); null: 404. Must outlive the HttpApi.
  OpsHub* ops_hub = nullptr;
  OpsSeries* ops_series = nullptr;
  // Several agents (docs/deployment.md, "Several agents"); empty for one.
  // A request about a machine another instance serves is answered 307 to
  // the same path and query at that instance's base URL: POST /v1/orders
  // and every per-machine route (Route::per_machine) before their handler
  // runs, any other when the core answers not_owner; while nobody serves
  // it (its shard is moving), or this instance is taking it over, 503 with
  // Retry-After: 1.
  std::function<std::optional<std::string>(const std::string& device)> owner_url;
  std::string self_url;
  std::function<std::string()> cluster_metrics;  // appended to /metrics
  std::function<std::string()> cluster_view;     // GET /v1/cluster (JSON)
};

// Non-copyable. `core` and `log` must outlive the HttpApi, and the HttpApi
// must outlive every server whose handler() it gave (stop the server first:
// the destructor finishes queued requests and joins the workers).
// Thread-safe: handlers run on the worker threads concurrently (AgentCore is
// thread-safe), and the two customer calls (order, payment) on the server's
// event threads.
class HttpApi {
 public:
  HttpApi(AgentCore& core, HttpApiOptions options, const Clock& clock, Logger& log);
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  // The HttpServer handler: routes the request, then runs it at once when
  // its route runs on the event thread, else queues it for a worker. Never
  // blocks.
  HttpServer::Handler handler();
  void handle(HttpRequest&& req, HttpResponder responder);

 private:
  enum class Access { kPublic, kOperator };
  using Handler = Result<HttpReply> (HttpApi::*)(const HttpRequest&);
  // The answer of an asynchronous handler, called exactly once from any
  // thread (the request stays alive until then).
  using Done = std::function<void(Result<HttpReply>)>;
  // A handler that answers later (the core's commit callback): the worker
  // thread is free as soon as it returns.
  using AsyncHandler = void (HttpApi::*)(const HttpRequest&, Done);

  struct Route {
    std::string method;
    http::PathPattern pattern;
    Handler handler = nullptr;
    AsyncHandler async = nullptr;
    Access access = Access::kPublic;
    // Runs on the server's event thread, not a worker: an asynchronous
    // handler whose own work never blocks (no network, no waiting for the
    // core), so a worker hand-off would cost more than the work.
    bool on_event_thread = false;
    // The route names a machine at path segment 2 (/v1/devices/{id}/...,
    // /v1/reconcile/{id}, /v1/machines/{id}/...): with several agents a
    // request for another instance's machine is answered 307 to its owner
    // before the handler runs (not_served_here).
    bool per_machine = false;
  };
  void add_routes();
  void route(const std::string& method, const std::string& pattern, Handler handler, Access access,
             bool per_machine = false);
  void route(const std::string& method, const std::string& pattern, AsyncHandler handler,
             Access access, bool on_event_thread = false);
  struct Pending {
    HttpRequest req;
    HttpResponder responder;
  };
  // The route of `req`; null: none. Handlers read the path's ids with
  // http::path_segment().
  const Route* find_route(const HttpRequest& req) const;
  // Checks access, runs the route's handler and gives its answer to
  // `finish` (now, or later for an asynchronous one); every failure is an
  // HttpReply too. `route`: null answers 404.
  using Finish = std::function<void(HttpReply)>;
  void run(const Route* route, const HttpRequest& req, const Finish& finish);
  Status authorize_operator(const HttpRequest& req) const;
  HttpReply respond(const HttpRequest& req, const Result<HttpReply>& r);

  // Orders (http_orders.cpp).
  // The client of a customer's request: its idempotency scope, rate bucket
  // and reservation cap. "id:<X-Client-Id>" when the app sends one (1..64
  // of [A-Za-z0-9._-]), else "addr:<address>": the TCP peer's, or from a
  // trusted proxy the client it forwards for
  // (TrustedProxies::client_address). The prefixes keep a client id from
  // posing as an address. A malformed X-Forwarded-For from a trusted proxy
  // is bad_request, counted and logged once per proxy a minute; X-Client-Id
  // then changes nothing. Thread-safe.
  Result<std::string> client_of(const HttpRequest& req);
  // POST /v1/orders and .../payment answer after their commit, holding no
  // thread meanwhile (AgentCore::create_order_async / pay_async).
  void create_order(const HttpRequest& req, Done done);
  Result<HttpReply> get_order(const HttpRequest& req);
  void pay_order(const HttpRequest& req, Done done);
  Result<HttpReply> cancel_order(const HttpRequest& req);
  Result<HttpReply> resolve_order(const HttpRequest& req);
  Result<HttpReply> list_orders(const HttpRequest& req);
  Result<HttpReply> order_history(const HttpRequest& req);
  Result<HttpReply> list_refunds(const HttpRequest& req);

  // Devices (http_devices.cpp).
  Result<HttpReply> provision_device(const HttpRequest& req);
  Result<HttpReply> list_devices(const HttpRequest& req);
  Result<HttpReply> get_device(const HttpRequest& req);
  Result<HttpReply> list_faults(const HttpRequest& req);
  Result<HttpReply> list_slots(const HttpRequest& req);
  Result<HttpReply> update_slot(const HttpRequest& req);
  Result<HttpReply> restock(const HttpRequest& req);
  Result<HttpReply> reconcile(const HttpRequest& req);
  Result<HttpReply> rotate_key(const HttpRequest& req);
  Result<HttpReply> decommission(const HttpRequest& req);
  Result<HttpReply> reconcile_report(const HttpRequest& req);

  // Rate limits (http_rate_limits.cpp): the 429 answer when an order of
  // `client` for `device` is over a limit; nullopt when it may go on.
  // `known`: the machine is one the core holds (AgentCore::knows_device);
  // every other id shares one bucket, "machine:?" (unknown machines are
  // limited together, like one machine).
  std::optional<HttpReply> order_rate_limited(const std::string& device, bool known,
                                              const std::string& client);
  // The rate-limit counters in the Prometheus text format, and the requests
  // refused for a bad X-Forwarded-For (client_of).
  std::string rate_limit_metrics() const;

  // The public catalog (http_catalog.cpp).
  Result<HttpReply> catalog(const HttpRequest& req);

  // The operators' console: the embedded static files (http_console.cpp).
  Result<HttpReply> console(const HttpRequest& req);

  // The console's stream, plots and fleet page (http_ops.cpp).
  Result<HttpReply> ops_stream(const HttpRequest& req);
  Result<HttpReply> ops_series(const HttpRequest& req);
  Result<HttpReply> fleet(const HttpRequest& req);
  Result<HttpReply> fleet_counts(const HttpRequest& req);
  Result<HttpReply> list_alerts(const HttpRequest& req);

  // Probes.
  Result<HttpReply> metrics(const HttpRequest& req);
  Result<HttpReply> cluster(const HttpRequest& req);
  // The answer to a core's not_owner about `key` (a machine, or an order id
  // no instance has): 307 to its owner, or 503.
  HttpReply redirect_to_owner(const HttpRequest& req, const std::string& key) const;
  // Several agents: the answer to a per-machine request whose machine this
  // instance does not serve (307 to its owner, or 503 while its shard
  // moves); nullopt when it serves it, runs alone, or the id in the path is
  // malformed (the handler answers that).
  std::optional<HttpReply> not_served_here(const HttpRequest& req) const;
  Result<HttpReply> healthz(const HttpRequest& req);

  bool mqtt_connected() const;
  AgentHealth health() const;

  // Payment notifications (http_orders.cpp). The time the notification
  // about `order_id` was signed at, when its one Vend-Signature header
  // matches; else bad_signature.
  Result<int64_t> authenticate_notification(const HttpRequest& req, const std::string& order_id);
  // A notification signed at `signed_s` and received at `received_s` (the
  // agent's clock, unix seconds): counted and logged when further apart
  // than payment_tolerance_s. Thread-safe.
  void note_signature_time(int64_t signed_s, int64_t received_s, const std::string& order_id);
  // A notification refused for its signature: counted, and logged once per
  // caller address per minute. Thread-safe.
  void note_bad_signature(const HttpRequest& req, const Error& error);
  std::string payment_metrics() const;  // Prometheus text

  AgentCore& core_;
  HttpApiOptions options_;
  const Clock& clock_;
  Logger& log_;
  MetricsExporter metrics_;
  InFlightGate peers_;  // options_.max_requests_per_peer
  std::atomic<uint64_t> rate_limited_machine_{0};
  std::atomic<uint64_t> rate_limited_client_{0};
  std::atomic<uint64_t> payment_clock_skew_{0};
  std::atomic<uint64_t> payment_bad_signatures_{0};
  std::atomic<uint64_t> bad_forwarded_{0};
  std::mutex bad_input_log_mu_;  // guards bad_input_log_
  // Bad signatures and bad X-Forwarded-For, once per source and reason a minute.
  RateLimitedLog bad_input_log_;
  // When a skewed notification may be logged next (monotonic ms).
  std::atomic<int64_t> skew_log_next_ms_{std::numeric_limits<int64_t>::min()};
  std::vector<Route> routes_;  // written by the constructor only
  WorkerPool workers_;         // last: joined first, while the rest is alive
};

// HTTP status of an error code (core codes and the API's own).
int http_status_of(const std::string& code);

}  // namespace vend::agent
