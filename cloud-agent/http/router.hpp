// Router: the HTTP API's route table and what every route shares. A route
// group (OrderRoutes, DeviceRoutes, ...) registers each of its routes with
// its method, path pattern and Access; the router then, per request:
//
//   1. admits it: at most max_requests_per_peer of one peer address in
//      flight (else 503 limit "max_requests_per_peer");
//   2. finds its route (none: 404 not_found; HEAD is routed as GET);
//   3. runs it on the server's event thread when the route says so (its
//      handler only parses, checks and posts work to the core), else queues
//      it on a bounded WorkerPool (full: 503 limit "max_queued_requests"),
//      since most handlers block on AgentCore (its group commit);
//   4. checks access: an operator route needs Authorization: Bearer
//      <token> (an account's API token, or the deprecated single operator
//      token, which acts as an admin), else 401 with WWW-Authenticate; a
//      role the route's Access does not admit, or a restocker's request
//      about a machine outside its own, is 403 forbidden naming what is
//      missing; the caller is put on the request (HttpRequest::caller).
//      Then the body's size (413), and for a per-machine route whether
//      this instance serves the machine (307 to its owner or 503,
//      OwnerRedirect);
//   5. shapes the answer: an Error becomes {"error":{"code","message"}}
//      with http_status_of(code); not_owner becomes a 307 to the owner;
//      500s are logged and answered without details; an exception a
//      handler let out is a 500 too.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "http/http_api_options.hpp"
#include "http/http_request.hpp"
#include "http/http_server.hpp"
#include "http/owner_redirect.hpp"
#include "http/path_pattern.hpp"
#include "http/worker_pool.hpp"
#include "limits/in_flight_gate.hpp"
#include "vend/log.hpp"
#include "vend/result.hpp"

namespace vend::agent {

// Who may call a route (docs/agent.md, the roles table).
enum class Access {
  kPublic,    // anyone
  kOperator,  // any operator account (viewer and up): the reads
  kRestock,   // restocker (per-machine routes: its machines only), admin
  kSupport,   // support, admin: orders, refunds, reviews
  kAdmin,     // admin: provisioning, slots, keys, decommission, accounts, audit
};
// "public", "operator", "restock", "support", "admin".
const char* to_string(Access access);
// Whether `role` may call a route of `access` (machine scope aside).
bool admits(Access access, Role role);

// A route as registered (tests compare the table with docs/openapi.yaml).
struct RouteInfo {
  std::string method;
  std::string pattern;
  Access access = Access::kPublic;
  bool per_machine = false;
};

// Non-copyable. `options`, `owners` and `log` must outlive the router, and
// so must every route group whose handlers it holds; the destructor
// finishes the queued requests and joins the workers (declare the router
// after its route groups). Routes are added before the first handle();
// handle() is thread-safe after that.
class Router {
 public:
  using Handler = std::function<Result<HttpReply>(const HttpRequest&)>;
  // The answer of an asynchronous handler, called exactly once from any
  // thread (the request stays alive until then).
  using Done = std::function<void(Result<HttpReply>)>;
  // A handler that answers later (the core's commit callback): its thread
  // is free as soon as it returns.
  using AsyncHandler = std::function<void(const HttpRequest&, Done)>;

  Router(const HttpApiOptions& options, const OwnerRedirect& owners, Logger& log);
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // `pattern`: a PathPattern. `per_machine`: the route names a machine at
  // path segment 2 (/v1/devices/{id}/..., /v1/reconcile/{id},
  // /v1/machines/{id}/...): another instance's machine is redirected before
  // the handler runs.
  void add(const std::string& method, const std::string& pattern, Access access, Handler handler,
           bool per_machine = false);
  // `on_event_thread`: runs on the server's event thread, not a worker: a
  // handler whose own work never blocks (no network, no waiting for the
  // core), so a worker hand-off would cost more than the work.
  void add_async(const std::string& method, const std::string& pattern, Access access,
                 AsyncHandler handler, bool on_event_thread = false);

  // Routes `req` and runs it (steps 1-5 above); the responder is completed
  // exactly once. Never blocks.
  void handle(HttpRequest&& req, HttpResponder responder);

  // Every route, in registration order.
  std::vector<RouteInfo> routes() const;

 private:
  struct Route {
    std::string method;
    std::string pattern_text;
    http::PathPattern pattern;
    Handler handler;
    AsyncHandler async;
    Access access = Access::kPublic;
    bool on_event_thread = false;
    bool per_machine = false;
  };
  struct Pending {
    HttpRequest req;
    HttpResponder responder;
  };
  using Finish = std::function<void(HttpReply)>;

  // The route of `req`; null: none.
  const Route* find_route(const HttpRequest& req) const;
  // Steps 4 and 5: gives the answer to `finish` (now, or later for an
  // asynchronous handler). `route`: null answers 404.
  void run(const Route* route, HttpRequest& req, const Finish& finish);
  // Step 4's access check: the caller, or the 401/403 error.
  Result<Caller> authorize(const Route& route, const HttpRequest& req) const;
  Result<Caller> authenticate(const HttpRequest& req) const;
  HttpReply respond(const HttpRequest& req, const Result<HttpReply>& r);

  const HttpApiOptions& options_;
  const OwnerRedirect& owners_;
  Logger& log_;
  InFlightGate peers_;         // options_.max_requests_per_peer
  std::vector<Route> routes_;  // written before the first handle() only
  WorkerPool workers_;         // last: joined first, while the rest is alive
};

// A group's member function as a Router handler. `group` must outlive the
// router's use of it.
template <typename Group>
Router::Handler route_to(Group* group, Result<HttpReply> (Group::*f)(const HttpRequest&)) {
  return [group, f](const HttpRequest& req) { return (group->*f)(req); };
}
template <typename Group>
Router::AsyncHandler route_to(Group* group, void (Group::*f)(const HttpRequest&, Router::Done)) {
  return
      [group, f](const HttpRequest& req, Router::Done done) { (group->*f)(req, std::move(done)); };
}

// HTTP status of an error code (core codes and the API's own).
int http_status_of(const std::string& code);

}  // namespace vend::agent
