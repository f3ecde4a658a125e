// PaymentRoutes: the payment gateway's notification, POST
// /v1/orders/{id}/payment, signed with Vend-Signature (vend/webhook.hpp)
// over the order id and the raw body. It runs on the server's event thread:
// it only checks the signature and the body and posts the payment to the
// core (AgentCore::pay_async), which answers after the commit.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>

#include "core/agent_core.hpp"
#include "http/http_api_options.hpp"
#include "http/router.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"
#include "vend/log_limiter.hpp"
#include "vend/result.hpp"

namespace vend::agent {

// Non-copyable. `core`, `options`, `clock` and `log` must outlive it.
// Thread-safe.
class PaymentRoutes {
 public:
  PaymentRoutes(AgentCore& core, const HttpApiOptions& options, const Clock& clock, Logger& log);
  PaymentRoutes(const PaymentRoutes&) = delete;
  PaymentRoutes& operator=(const PaymentRoutes&) = delete;

  void add_routes(Router& router);
  // The counters of clock skew and bad signatures, Prometheus text.
  std::string payment_metrics() const;

 private:
  void pay_order(const HttpRequest& req, Router::Done done);
  // The time the notification about `order_id` was signed at, when its one
  // Vend-Signature header matches; else bad_signature.
  Result<int64_t> authenticate_notification(const HttpRequest& req, const std::string& order_id);
  // A notification signed at `signed_s` and received at `received_s` (the
  // agent's clock, unix seconds): counted and logged when further apart
  // than payment_tolerance_s.
  void note_signature_time(int64_t signed_s, int64_t received_s, const std::string& order_id);
  // A notification refused for its signature: counted, and logged once per
  // caller address per minute.
  void note_bad_signature(const HttpRequest& req, const Error& error);

  AgentCore& core_;
  const HttpApiOptions& options_;
  const Clock& clock_;
  Logger& log_;
  std::atomic<uint64_t> payment_clock_skew_{0};
  std::atomic<uint64_t> payment_bad_signatures_{0};
  std::mutex bad_input_log_mu_;  // guards bad_input_log_
  // Bad signatures, once per source and reason a minute.
  RateLimitedLog bad_input_log_;
  // When a skewed notification may be logged next (monotonic ms).
  std::atomic<int64_t> skew_log_next_ms_{std::numeric_limits<int64_t>::min()};
};

}  // namespace vend::agent
