#include "http/http_api.hpp"

#include <exception>
#include <vector>

#include "http/http_json.hpp"
#include "http/ops_stream.hpp"
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

}  // namespace

int http_status_of(const std::string& code) {
  if (code == "bad_request") return 400;
  if (code == "unauthorized" || code == "bad_signature") return 401;
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

HttpApi::HttpApi(AgentCore& core, HttpApiOptions options, const Clock& clock, Logger& log)
    : core_(core),
      options_(std::move(options)),
      clock_(clock),
      log_(log),
      peers_(options_.max_requests_per_peer),
      bad_input_log_(clock, log, RateLimitedLog::Options{60'000, 256}),
      workers_(options_.worker_threads, options_.max_queued_requests) {
  add_routes();
}

void HttpApi::add_routes() {
  // Ids in paths: the same alphabet as ids in bodies (validated again there).
  std::string order = "/v1/orders/{id}";
  std::string device = "/v1/devices/{id}";
  // The customers' two calls run on the event thread: they only parse,
  // check and hand the work to the core, which answers after the commit --
  // unless the rate limiter asks a server over the network (Redis).
  bool limiter_blocks = options_.rate_limiter != nullptr && options_.rate_limiter->may_block();
  route("POST", "/v1/orders", &HttpApi::create_order, Access::kPublic, !limiter_blocks);
  route("GET", "/v1/orders", &HttpApi::list_orders, Access::kOperator);
  route("GET", "/v1/refunds", &HttpApi::list_refunds, Access::kOperator);
  route("GET", order, &HttpApi::get_order, Access::kPublic);
  route("POST", order + "/payment", &HttpApi::pay_order, Access::kPublic, true);
  route("POST", order + "/cancel", &HttpApi::cancel_order, Access::kPublic);
  route("POST", order + "/resolve", &HttpApi::resolve_order, Access::kOperator);
  route("GET", order + "/history", &HttpApi::order_history, Access::kOperator);
  route("POST", "/v1/devices", &HttpApi::provision_device, Access::kOperator);
  route("GET", "/v1/devices", &HttpApi::list_devices, Access::kOperator);
  // Per-machine routes: another instance's machine is redirected to it.
  const bool machine = true;
  route("GET", device, &HttpApi::get_device, Access::kOperator, machine);
  route("GET", device + "/slots", &HttpApi::list_slots, Access::kOperator, machine);
  route("GET", device + "/faults", &HttpApi::list_faults, Access::kOperator, machine);
  route("PUT", device + "/slots/{n}", &HttpApi::update_slot, Access::kOperator, machine);
  route("POST", device + "/restock", &HttpApi::restock, Access::kOperator, machine);
  route("POST", device + "/reconcile", &HttpApi::reconcile, Access::kOperator, machine);
  route("POST", device + "/rotate-key", &HttpApi::rotate_key, Access::kOperator, machine);
  route("POST", device + "/decommission", &HttpApi::decommission, Access::kOperator, machine);
  route("GET", "/v1/reconcile/{id}", &HttpApi::reconcile_report, Access::kOperator, machine);
  route("GET", "/v1/machines/{id}/catalog", &HttpApi::catalog, Access::kPublic, machine);
  route("GET", "/v1/fleet", &HttpApi::fleet, Access::kOperator);
  route("GET", "/v1/fleet/summary", &HttpApi::fleet_counts, Access::kOperator);
  route("GET", "/v1/alerts", &HttpApi::list_alerts, Access::kOperator);
  route("GET", "/v1/ops/stream", &HttpApi::ops_stream, Access::kOperator);
  route("GET", "/v1/ops/series", &HttpApi::ops_series, Access::kOperator);
  route("GET", "/v1/cluster", &HttpApi::cluster, Access::kOperator);
  route("GET", "/metrics", &HttpApi::metrics, Access::kPublic);
  route("GET", "/healthz", &HttpApi::healthz, Access::kPublic);
  route("GET", "/console", &HttpApi::console, Access::kPublic);
  route("GET", "/console/{file}", &HttpApi::console, Access::kPublic);
}

void HttpApi::route(const std::string& method, const std::string& pattern, Handler handler,
                    Access access, bool per_machine) {
  routes_.push_back(
      Route{method, http::PathPattern(pattern), handler, nullptr, access, false, per_machine});
}

void HttpApi::route(const std::string& method, const std::string& pattern, AsyncHandler handler,
                    Access access, bool on_event_thread) {
  routes_.push_back(
      Route{method, http::PathPattern(pattern), nullptr, handler, access, on_event_thread});
}

HttpServer::Handler HttpApi::handler() {
  return [this](HttpRequest&& req, HttpResponder responder) {
    handle(std::move(req), std::move(responder));
  };
}

void HttpApi::handle(HttpRequest&& req, HttpResponder responder) {
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

const HttpApi::Route* HttpApi::find_route(const HttpRequest& req) const {
  std::string_view method = req.method == "HEAD" ? std::string_view("GET") : req.method;
  for (const Route& r : routes_) {
    if (r.method == method && r.pattern.matches(req.path)) return &r;
  }
  return nullptr;
}

void HttpApi::run(const Route* route, const HttpRequest& req, const Finish& finish) {
  try {
    if (route == nullptr) {
      return finish(HttpReply{
          404, http::error_body("not_found", "no route for " + req.method + " " + req.path)});
    }
    if (route->access == Access::kOperator) {
      if (Status auth = authorize_operator(req); !auth.ok()) {
        HttpReply reply = respond(req, auth.error());
        reply.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"vend-agent\"");
        return finish(std::move(reply));
      }
    }
    // HttpServer enforces its own cap (on Content-Length and chunked bodies).
    if (req.body.size() > options_.max_body_bytes) {
      return finish(respond(
          req,
          make_error("payload_too_large", "the request body is over " +
                                              std::to_string(options_.max_body_bytes) + " bytes")));
    }
    if (route->per_machine) {
      if (auto moved = not_served_here(req)) return finish(std::move(*moved));
    }
    if (route->async != nullptr) {
      // `req` lives until `finish` ran (the caller's pending request owns it).
      return (this->*route->async)(
          req, [this, &req, finish](Result<HttpReply> r) { finish(respond(req, r)); });
    }
    finish(respond(req, (this->*route->handler)(req)));
  } catch (const std::exception& e) {  // handlers catch what they expect
    log_.error(kLog, req.method + " " + req.path + ": " + e.what());
    finish(HttpReply{500, http::error_body("internal", "internal error")});
  }
}

Status HttpApi::authorize_operator(const HttpRequest& req) const {
  if (options_.operator_token.empty()) return {};  // --insecure-no-auth
  const std::string header = req.header("Authorization");
  const std::string prefix = "Bearer ";
  if (header.rfind(prefix, 0) != 0) {
    return make_error("unauthorized", "operator endpoint: send 'Authorization: Bearer <token>'");
  }
  // Hash both sides so the comparison leaks neither content nor length.
  std::string given = crypto::sha256_hex(std::string_view(header).substr(prefix.size()));
  if (!constant_time_equal(given, crypto::sha256_hex(options_.operator_token))) {
    return make_error("unauthorized", "operator endpoint: wrong bearer token");
  }
  return {};
}

HttpReply HttpApi::respond(const HttpRequest& req, const Result<HttpReply>& r) {
  if (r.ok()) return *r;
  const Error& e = r.error();
  if (e.code == "not_owner") return redirect_to_owner(req, e.message);
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

HttpReply HttpApi::redirect_to_owner(const HttpRequest& req, const std::string& key) const {
  std::optional<std::string> owner;
  if (options_.owner_url) owner = options_.owner_url(key);
  // The key is a machine, or the id of an order no instance has (its
  // payment belongs to the owner of the id's shard).
  const std::string what = (key.rfind("ord-", 0) == 0 ? "order " : "machine ") + key;
  if (!owner || *owner == options_.self_url) {
    HttpReply reply{503, http::error_body("unavailable", what + " is moving between agent "
                                                                "instances; retry in a second")};
    reply.headers.emplace_back("Retry-After", "1");
    return reply;
  }
  std::string location = *owner + req.target;
  HttpReply reply{307, http::error_body("moved", what + " is served by " + *owner)};
  reply.headers.emplace_back("Location", location);
  return reply;
}

std::optional<HttpReply> HttpApi::not_served_here(const HttpRequest& req) const {
  if (!options_.owner_url) return std::nullopt;
  std::string device(http::path_segment(req.path, 2));
  if (!http::is_valid_id(device)) return std::nullopt;
  auto owner = options_.owner_url(device);
  if (owner && *owner == options_.self_url) return std::nullopt;
  return redirect_to_owner(req, device);
}

Result<HttpReply> HttpApi::cluster(const HttpRequest&) {
  if (!options_.cluster_view) {
    return make_error("not_found", "this agent runs alone (no --instance-id)");
  }
  return HttpReply{200, options_.cluster_view()};
}

bool HttpApi::mqtt_connected() const {
  return options_.mqtt_connected && options_.mqtt_connected();
}

AgentHealth HttpApi::health() const {
  AgentHealth h;
  h.storage_failed = !core_.health().ok();
  h.mqtt_connected = mqtt_connected();
  h.mqtt_down_ms = options_.mqtt_down_ms ? options_.mqtt_down_ms() : 0;
  h.broker_down = !h.mqtt_connected && h.mqtt_down_ms > options_.broker_down_grace_ms;
  if (options_.inbound_fill) {
    HttpApiOptions::InboundFill f = options_.inbound_fill();
    h.inbound_messages = f.messages;
    h.inbound_max_messages = f.max_messages;
    h.inbound_dropped = f.dropped;
    h.inbound_dropped_machine_share = f.dropped_machine_share;
    h.inbound_saturated = (f.max_messages > 0 && f.messages * 10 >= f.max_messages * 9) ||
                          (f.max_bytes > 0 && f.bytes * 10 >= f.max_bytes * 9);
  }
  return h;
}

Result<HttpReply> HttpApi::metrics(const HttpRequest&) {
  std::string text = metrics_.scrape(core_, health()) + rate_limit_metrics() + payment_metrics();
  if (options_.server_stats) text += render_http_metrics(options_.server_stats());
  if (options_.ops_hub != nullptr) text += options_.ops_hub->render_metrics();
  if (options_.cluster_metrics) text += options_.cluster_metrics();
  return HttpReply{200, std::move(text), "text/plain; version=0.0.4; charset=utf-8"};
}

Result<HttpReply> HttpApi::healthz(const HttpRequest&) {
  // 503 when it cannot do its job: nothing durable (storage), no devices
  // (broker past the grace), or input it cannot keep up with.
  AgentHealth h = health();
  std::vector<std::string> reasons = h.reasons();
  http::Json body = {{"status", reasons.empty() ? "ok" : "unavailable"},
                     {"mqtt_connected", h.mqtt_connected},
                     {"mqtt_down_ms", h.mqtt_down_ms},
                     {"inbound_messages", h.inbound_messages},
                     {"storage_failed", h.storage_failed}};
  if (!reasons.empty()) {
    body["reasons"] = reasons;
    body["reason"] = reasons.front();
  }
  return HttpReply{reasons.empty() ? 200 : 503, body.dump()};
}

}  // namespace vend::agent
