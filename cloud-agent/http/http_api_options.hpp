// HttpApiOptions: how the agent's HTTP API is configured (vend-agent's
// flags, docs/agent.md). Read by HttpApi's router and route groups; the
// HttpApi owns the one copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "http/http_server.hpp"
#include "http/trusted_proxies.hpp"
#include "limits/rate_limiter.hpp"

namespace vend::agent {

class OpsHub;
class OpsSeries;

class Accounts;

struct HttpApiOptions {
  // The deprecated single operator token (--operator-token-file): a bearer
  // credential acting as the admin account "operator-token". Empty, and
  // `accounts` null: the operator endpoints are open to anyone, as admin
  // "insecure-no-auth" (vend-agent --insecure-no-auth, local demos only).
  std::string operator_token;
  // The operators' accounts and API tokens (accounts/accounts.hpp), and
  // where account, token and audit routes read and write. Null: no
  // accounts (only the operator token, or no auth). Must outlive the HttpApi.
  Accounts* accounts = nullptr;
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

}  // namespace vend::agent
