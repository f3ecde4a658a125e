// OrderAdmission: who a customer's order comes from, and whether it may go
// on now (docs/agent.md "Rate limits"). POST /v1/orders takes one token
// from the bucket "machine:<device>" and one from "client:<client>", both
// or neither; over either it is answered 429 rate_limited with Retry-After
// and "limit": "machine" or "client".
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "http/http_api_options.hpp"
#include "http/http_request.hpp"
#include "http/http_server.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"
#include "vend/log_limiter.hpp"
#include "vend/result.hpp"

namespace vend::agent {

// Non-copyable. `options`, `clock` and `log` must outlive it. Thread-safe.
class OrderAdmission {
 public:
  OrderAdmission(const HttpApiOptions& options, const Clock& clock, Logger& log);
  OrderAdmission(const OrderAdmission&) = delete;
  OrderAdmission& operator=(const OrderAdmission&) = delete;

  // The client of a customer's request: its idempotency scope, rate bucket
  // and reservation cap. "id:<X-Client-Id>" when the app sends one (1..64
  // of [A-Za-z0-9._-]), else "addr:<address>": the TCP peer's, or from a
  // trusted proxy the client it forwards for
  // (TrustedProxies::client_address). The prefixes keep a client id from
  // posing as an address. A malformed X-Forwarded-For from a trusted proxy
  // is bad_request, counted and logged once per proxy a minute; X-Client-Id
  // then changes nothing.
  Result<std::string> client_of(const HttpRequest& req);
  // The 429 answer when an order of `client` for `device` is over a limit;
  // nullopt when it may go on. `known`: the machine is one the core holds
  // (AgentCore::knows_device); every other id shares one bucket,
  // "machine:?" (unknown machines are limited together, like one machine).
  std::optional<HttpReply> order_rate_limited(const std::string& device, bool known,
                                              const std::string& client);
  // The rate-limit counters in the Prometheus text format, and the requests
  // refused for a bad X-Forwarded-For (client_of).
  std::string rate_limit_metrics() const;

 private:
  const HttpApiOptions& options_;
  std::atomic<uint64_t> rate_limited_machine_{0};
  std::atomic<uint64_t> rate_limited_client_{0};
  std::atomic<uint64_t> bad_forwarded_{0};
  std::mutex bad_input_log_mu_;  // guards bad_input_log_
  // Bad X-Forwarded-For, once per source and reason a minute.
  RateLimitedLog bad_input_log_;
};

}  // namespace vend::agent
