// OrderRoutes: the order routes of customers and operators.
//
//   customers   POST /v1/orders (Idempotency-Key scoped per client,
//               OrderAdmission::client_of; rate-limited), GET
//               /v1/orders/{id}, POST /v1/orders/{id}/cancel
//   operators   GET /v1/orders, GET /v1/refunds, POST
//               /v1/orders/{id}/resolve, GET /v1/orders/{id}/history
//
// POST /v1/orders runs on the server's event thread (unless the rate
// limiter may block on Redis): it only parses, checks and posts the order
// to the core (AgentCore::create_order_async), which answers after the
// commit. Another instance's machine is redirected before its rate limits
// count it (the owner counts it when the client follows).
#pragma once

#include "core/agent_core.hpp"
#include "http/http_api_options.hpp"
#include "http/order_admission.hpp"
#include "http/owner_redirect.hpp"
#include "http/router.hpp"

namespace vend::agent {

// Non-copyable. Every reference must outlive it. Thread-safe (AgentCore
// and OrderAdmission are).
class OrderRoutes {
 public:
  OrderRoutes(AgentCore& core, const HttpApiOptions& options, OrderAdmission& admission,
              const OwnerRedirect& owners);
  OrderRoutes(const OrderRoutes&) = delete;
  OrderRoutes& operator=(const OrderRoutes&) = delete;

  void add_routes(Router& router);

 private:
  void create_order(const HttpRequest& req, Router::Done done);
  Result<HttpReply> get_order(const HttpRequest& req);
  Result<HttpReply> cancel_order(const HttpRequest& req);
  Result<HttpReply> resolve_order(const HttpRequest& req);
  Result<HttpReply> list_orders(const HttpRequest& req);
  Result<HttpReply> order_history(const HttpRequest& req);
  Result<HttpReply> list_refunds(const HttpRequest& req);

  AgentCore& core_;
  const HttpApiOptions& options_;
  OrderAdmission& admission_;
  const OwnerRedirect& owners_;
};

}  // namespace vend::agent
