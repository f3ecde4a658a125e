// HttpApi: the agent's HTTP/JSON API, a thin adapter over AgentCore served by
// HttpServer (libmicrohttpd; handlers read HttpRequest values). docs/openapi.yaml is the
// contract; docs/agent.md shows a session.
//
// A Router (router.hpp: the route table, access, dispatch to the event
// thread or a worker, 307 to the owner, the answer's shape) over route
// groups, each registering its own routes with their Access:
//
//   OrderRoutes     customers' and operators' order routes
//   PaymentRoutes   the gateway's payment notification (Vend-Signature)
//   CatalogRoutes   the public catalog of a machine
//   DeviceRoutes    operators' machine routes
//   OpsRoutes       the console, its event stream, plots, fleet and alerts
//   ProbeRoutes     /metrics, /healthz, /v1/cluster
//   AccountRoutes   operators' accounts, API tokens, login, the audit trail
//
// Errors are {"error":{"code","message"}} with 400 bad_request, 401
// unauthorized / bad_signature, 403 forbidden (role or machine scope), 404 not_found /
// unknown_slot, 409 sold_out / device_offline / invalid_state / conflict, 413 payload_too_large,
// 503 unavailable, 500 internal. Every request body is validated strictly (unknown, missing,
// duplicate, wrong-typed or out-of-range fields are 400, the message names the field) before the
// core sees it; no exception leaves a handler. POST /v1/orders over a rate limit is 429
// rate_limited, with Retry-After and "limit": "machine" or "client" (OrderAdmission).
//
// A request without Content-Length and without a chunked Transfer-Encoding
// has an empty body (RFC 9112 6.3): `curl -X POST` of cancel or reconcile
// is answered at once (HttpServer).
//
// Most routes block on AgentCore (its group commit), so they run on the
// router's bounded WorkerPool; a full queue is answered 503 with limit
// "max_queued_requests". Two routes run on the server's event thread
// instead: POST /v1/orders (unless the rate limiter may block on Redis) and
// POST /v1/orders/{id}/payment; they only parse, check and post the work to
// the core, which completes the HttpResponder after the commit.
#pragma once

#include "core/agent_core.hpp"
#include "http/account_routes.hpp"
#include "http/catalog_routes.hpp"
#include "http/device_routes.hpp"
#include "http/http_api_options.hpp"
#include "http/http_server.hpp"
#include "http/ops_routes.hpp"
#include "http/order_admission.hpp"
#include "http/order_routes.hpp"
#include "http/owner_redirect.hpp"
#include "http/payment_routes.hpp"
#include "http/probe_routes.hpp"
#include "http/router.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"

namespace vend::agent {

// Non-copyable. `core`, `clock` and `log` must outlive the HttpApi, and the
// HttpApi must outlive every server whose handler() it gave (stop the
// server first: the destructor finishes queued requests and joins the
// workers). Thread-safe: handlers run on the worker threads concurrently
// (AgentCore is thread-safe), and the two customer calls (order, payment)
// on the server's event threads.
class HttpApi {
 public:
  HttpApi(AgentCore& core, HttpApiOptions options, const Clock& clock, Logger& log);
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  // The HttpServer handler: Router::handle. Never blocks.
  HttpServer::Handler handler();
  void handle(HttpRequest&& req, HttpResponder responder);
  // The route table (tests compare it with docs/openapi.yaml).
  std::vector<RouteInfo> routes() const { return router_.routes(); }

 private:
  HttpApiOptions options_;
  OwnerRedirect owners_;
  OrderAdmission admission_;
  OrderRoutes orders_;
  PaymentRoutes payments_;
  CatalogRoutes catalog_;
  DeviceRoutes devices_;
  OpsRoutes ops_;
  ProbeRoutes probes_;
  AccountRoutes accounts_;
  Router router_;  // last: joins its workers first, while the groups are alive
};

}  // namespace vend::agent
