#include "http/router.hpp"

#include <exception>
#include <string_view>

#include "accounts/accounts.hpp"
#include "http/http_json.hpp"
#include "vend/crypto.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "http";

// Compares two equal-size strings without an early exit.
bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

// Who admits each Access, for the 403's message.
const char* needed(Access access) {
  switch (access) {
    case Access::kRestock: return "restocker (of this machine) or admin";
    case Access::kSupport: return "support or admin";
    case Access::kAdmin: return "admin";
    default: return "any operator role";
  }
}

}  // namespace

const char* to_string(Access access) {
  switch (access) {
    case Access::kPublic: return "public";
    case Access::kOperator: return "operator";
    case Access::kRestock: return "restock";
    case Access::kSupport: return "support";
    case Access::kAdmin: return "admin";
  }
  return "admin";
}

bool admits(Access access, Role role) {
  switch (access) {
    case Access::kPublic:
    case Access::kOperator: return true;
    case Access::kRestock: return role == Role::kRestocker || role == Role::kAdmin;
    case Access::kSupport: return role == Role::kSupport || role == Role::kAdmin;
    case Access::kAdmin: return role == Role::kAdmin;
  }
  return false;
}

int http_status_of(const std::string& code) {
  if (code == "bad_request") return 400;
  if (code == "unauthorized" || code == "bad_signature") return 401;
  if (code == "forbidden") return 403;
  if (code == "not_found" || code == "unknown_slot") return 404;
  if (code == "sold_out" || code == "device_offline" || code == "invalid_state" ||
      code == "conflict" || code == "decommissioned") {
    return 409;
  }
  if (code == "payload_too_large") return 413;
  if (code == "too_many_reservations") return 429;
  if (code == "unavailable" || code == "broker_unreachable") return 503;
  return 500;
}

Router::Router(const HttpApiOptions& options, const OwnerRedirect& owners, Logger& log)
    : options_(options),
      owners_(owners),
      log_(log),
      peers_(options.max_requests_per_peer),
      workers_(options.worker_threads, options.max_queued_requests) {}

void Router::add(const std::string& method, const std::string& pattern, Access access,
                 Handler handler, bool per_machine) {
  routes_.push_back(Route{method, pattern, http::PathPattern(pattern), std::move(handler), nullptr,
                          access, false, per_machine});
}

void Router::add_async(const std::string& method, const std::string& pattern, Access access,
                       AsyncHandler handler, bool on_event_thread) {
  routes_.push_back(Route{method, pattern, http::PathPattern(pattern), nullptr, std::move(handler),
                          access, on_event_thread, false});
}

void Router::handle(HttpRequest&& req, HttpResponder responder) {
  // One peer holds at most max_requests_per_peer of the queues below.
  if (!peers_.enter(req.remote_addr)) {
    if (options_.on_rejected) options_.on_rejected("max_requests_per_peer", req.remote_addr);
    HttpReply busy{503, limit_error_body("unavailable",
                                         "too many requests in flight from this address (at most " +
                                             std::to_string(options_.max_requests_per_peer) + ")",
                                         "max_requests_per_peer")};
    busy.headers.emplace_back("Retry-After", "1");
    return responder.complete(std::move(busy));
  }
  // Shared: std::function needs a copyable job, and the responder is
  // move-only. The request stays here until the reply; its matches point
  // into its own path.
  auto pending = std::make_shared<Pending>(Pending{std::move(req), std::move(responder)});
  const Route* route = find_route(pending->req);
  Finish finish = [this, pending](HttpReply reply) {
    if (log_.enabled(LogLevel::kDebug)) {
      log_.debug(kLog, pending->req.method + " " + pending->req.path + " -> " +
                           std::to_string(reply.status));
    }
    peers_.leave(pending->req.remote_addr);
    pending->responder.complete(std::move(reply));
  };
  if (route != nullptr && route->on_event_thread) return run(route, pending->req, finish);
  bool queued =
      workers_.try_post([this, route, pending, finish] { run(route, pending->req, finish); });
  if (queued) return;
  if (options_.on_rejected) options_.on_rejected("max_queued_requests", pending->req.remote_addr);
  HttpReply busy{503, limit_error_body("unavailable",
                                       "too many requests waiting (at most " +
                                           std::to_string(options_.max_queued_requests) + ")",
                                       "max_queued_requests")};
  busy.headers.emplace_back("Retry-After", "1");
  finish(std::move(busy));
}

std::vector<RouteInfo> Router::routes() const {
  std::vector<RouteInfo> out;
  for (const Route& r : routes_) out.push_back({r.method, r.pattern_text, r.access, r.per_machine});
  return out;
}

const Router::Route* Router::find_route(const HttpRequest& req) const {
  std::string_view method = req.method == "HEAD" ? std::string_view("GET") : req.method;
  for (const Route& r : routes_) {
    if (r.method == method && r.pattern.matches(req.path)) return &r;
  }
  return nullptr;
}

void Router::run(const Route* route, HttpRequest& req, const Finish& finish) {
  try {
    if (route == nullptr) {
      return finish(HttpReply{
          404, http::error_body("not_found", "no route for " + req.method + " " + req.path)});
    }
    if (route->access != Access::kPublic) {
      auto caller = authorize(*route, req);
      if (!caller.ok()) {
        HttpReply reply = respond(req, caller.error());
        if (reply.status == 401) {
          reply.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"vend-agent\"");
        }
        return finish(std::move(reply));
      }
      req.caller = std::move(caller).value();
    }
    // HttpServer enforces its own cap (on Content-Length and chunked bodies).
    if (req.body.size() > options_.max_body_bytes) {
      return finish(respond(
          req,
          make_error("payload_too_large", "the request body is over " +
                                              std::to_string(options_.max_body_bytes) + " bytes")));
    }
    if (route->per_machine) {
      if (auto moved = owners_.not_served_here(req)) return finish(std::move(*moved));
    }
    if (route->async) {
      // `req` lives until `finish` ran (the caller's pending request owns it).
      return route->async(
          req, [this, &req, finish](const Result<HttpReply>& r) { finish(respond(req, r)); });
    }
    finish(respond(req, route->handler(req)));
  } catch (const std::exception& e) {  // handlers catch what they expect
    log_.error(kLog, req.method + " " + req.path + ": " + e.what());
    finish(HttpReply{500, http::error_body("internal", "internal error")});
  }
}

Result<Caller> Router::authenticate(const HttpRequest& req) const {
  if (options_.operator_token.empty() && options_.accounts == nullptr) {
    return Caller{"insecure-no-auth", Role::kAdmin, {}};  // --insecure-no-auth
  }
  const std::string header = req.header("Authorization");
  const std::string prefix = "Bearer ";
  if (header.rfind(prefix, 0) != 0) {
    return make_error("unauthorized", "operator endpoint: send 'Authorization: Bearer <token>'");
  }
  std::string_view token = std::string_view(header).substr(prefix.size());
  if (!options_.operator_token.empty()) {
    // Hash both sides so the comparison leaks neither content nor length.
    std::string given = crypto::sha256_hex(token);
    if (constant_time_equal(given, crypto::sha256_hex(options_.operator_token))) {
      return Caller{"operator-token", Role::kAdmin, {}};
    }
  }
  if (options_.accounts == nullptr) {
    return make_error("unauthorized", "operator endpoint: wrong bearer token");
  }
  return options_.accounts->authenticate(token);
}

Result<Caller> Router::authorize(const Route& route, const HttpRequest& req) const {
  auto caller = authenticate(req);
  if (!caller.ok()) return caller;
  if (!admits(route.access, caller->role)) {
    return make_error("forbidden", req.method + " " + route.pattern_text + " needs the role " +
                                       needed(route.access) + "; account '" + caller->account +
                                       "' is " + to_string(caller->role));
  }
  if (route.per_machine && route.access == Access::kRestock) {
    std::string device(http::path_segment(req.path, 2));
    if (!caller->covers(device)) {
      return make_error("forbidden", "account '" + caller->account + "' restocks " +
                                         join_machines(caller->machines) + ", not machine '" +
                                         device + "'");
    }
  }
  return caller;
}

HttpReply Router::respond(const HttpRequest& req, const Result<HttpReply>& r) {
  if (r.ok()) return *r;
  const Error& e = r.error();
  if (e.code == "not_owner") return owners_.redirect(req, e.message);
  int status = http_status_of(e.code);
  if (status == 500) {
    log_.error(kLog, req.method + " " + req.path + ": " + e.to_string());
    return HttpReply{500,
                     http::error_body("internal", "internal error (the agent log has details)")};
  }
  if (status == 503) log_.warn(kLog, req.method + " " + req.path + ": " + e.to_string());
  HttpReply reply{status, http::error_body(e.code, e.message)};
  // Over the open-reservation cap: one of the client's reservations is paid,
  // cancelled or expires first; ask again a little later.
  if (e.code == "too_many_reservations") reply.headers.emplace_back("Retry-After", "10");
  // The agent reconnects within seconds (Paho's backoff starts at 1 s).
  if (e.code == "broker_unreachable") reply.headers.emplace_back("Retry-After", "5");
  return reply;
}

}  // namespace vend::agent
