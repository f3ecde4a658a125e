#include "http_api.hpp"

#include <exception>
#include <vector>

#include "http_json.hpp"
#include "vend/crypto.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "http";
constexpr const char* kJson = "application/json";
// Ids in paths: the same alphabet as ids in bodies (validated again there).
constexpr const char* kId = "([A-Za-z0-9._-]+)";
// Signatures remembered against replays (a few MB at most).
constexpr size_t kMaxRememberedSignatures = 100'000;

// Compares two equal-size strings without an early exit.
bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

// What httplib's own errors (no route, 413 on an oversize body, 400 on a
// broken request line) become when no handler wrote a JSON body.
std::pair<std::string, std::string> default_error(const httplib::Request& req, int status) {
  switch (status) {
    case 404: return {"not_found", "no route for " + req.method + " " + req.path};
    case 413: return {"payload_too_large", "the request body is too large"};
    case 400: return {"bad_request", "malformed HTTP request"};
    case 405: return {"not_found", "no route for " + req.method + " " + req.path};
    case 503: return {"unavailable", "the agent is overloaded"};
    default: return {"internal", "HTTP error " + std::to_string(status)};
  }
}

}  // namespace

int http_status_of(const std::string& code) {
  if (code == "bad_request") return 400;
  if (code == "unauthorized" || code == "bad_signature" || code == "signature_expired") return 401;
  if (code == "not_found" || code == "unknown_slot") return 404;
  if (code == "sold_out" || code == "device_offline" || code == "invalid_state" ||
      code == "conflict" || code == "replayed" || code == "decommissioned") {
    return 409;
  }
  if (code == "payload_too_large") return 413;
  if (code == "unavailable") return 503;
  return 500;
}

HttpApi::HttpApi(AgentCore& core, HttpApiOptions options, const Clock& clock, Logger& log)
    : core_(core),
      options_(std::move(options)),
      clock_(clock),
      log_(log),
      replays_(options_.payment_tolerance_s, kMaxRememberedSignatures) {}

void HttpApi::install(httplib::Server& s) {
  s.set_payload_max_length(options_.max_body_bytes);
  std::string order = std::string("/v1/orders/") + kId;
  std::string device = std::string("/v1/devices/") + kId;
  route(s, "POST", "/v1/orders", &HttpApi::create_order, Access::kPublic);
  route(s, "GET", "/v1/orders", &HttpApi::list_orders, Access::kOperator);
  route(s, "GET", "/v1/refunds", &HttpApi::list_refunds, Access::kOperator);
  route(s, "GET", order, &HttpApi::get_order, Access::kPublic);
  route(s, "POST", order + "/payment", &HttpApi::pay_order, Access::kPublic);
  route(s, "POST", order + "/cancel", &HttpApi::cancel_order, Access::kPublic);
  route(s, "POST", order + "/resolve", &HttpApi::resolve_order, Access::kOperator);
  route(s, "POST", "/v1/devices", &HttpApi::provision_device, Access::kOperator);
  route(s, "GET", "/v1/devices", &HttpApi::list_devices, Access::kOperator);
  route(s, "GET", device + "/slots", &HttpApi::list_slots, Access::kOperator);
  route(s, "PUT", device + "/slots/([0-9]{1,9})", &HttpApi::update_slot, Access::kOperator);
  route(s, "POST", device + "/restock", &HttpApi::restock, Access::kOperator);
  route(s, "POST", device + "/reconcile", &HttpApi::reconcile, Access::kOperator);
  route(s, "POST", device + "/rotate-key", &HttpApi::rotate_key, Access::kOperator);
  route(s, "POST", device + "/decommission", &HttpApi::decommission, Access::kOperator);
  route(s, "GET", std::string("/v1/reconcile/") + kId, &HttpApi::reconcile_report,
        Access::kOperator);
  route(s, "GET", std::string("/v1/machines/") + kId + "/catalog", &HttpApi::catalog,
        Access::kPublic);
  route(s, "GET", "/metrics", &HttpApi::metrics, Access::kPublic);
  route(s, "GET", "/healthz", &HttpApi::healthz, Access::kPublic);
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return route_without_length(req, res);
  });

  // httplib calls this for every status >= 400; only fill in its own errors.
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        auto [code, message] = default_error(req, res.status);
        res.set_content(http::error_body(code, message), kJson);
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    log_.debug(kLog, req.method + " " + req.path + " -> " + std::to_string(res.status));
  });
  // Handlers catch what they expect; anything else is a bug, reported as 500.
  s.set_exception_handler(
      [this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        log_.error(kLog, req.method + " " + req.path + ": " + what);
        res.status = 500;
        res.set_content(http::error_body("internal", "internal error"), kJson);
      });
}

void HttpApi::route(httplib::Server& s, const std::string& method, const std::string& pattern,
                    Handler handler, Access access) {
  httplib::Server::Handler h = wrap(handler, access);
  if (method == "GET") s.Get(pattern, h);
  if (method == "POST") s.Post(pattern, h);
  if (method == "PUT") s.Put(pattern, h);
  routes_.push_back(Route{method, std::regex(pattern), std::move(h)});
}

httplib::Server::HandlerResponse HttpApi::route_without_length(const httplib::Request& req,
                                                               httplib::Response& res) const {
  using R = httplib::Server::HandlerResponse;
  bool has_body_method = req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
                         req.method == "DELETE";
  if (!has_body_method || req.has_header("Content-Length")) return R::Unhandled;
  if (req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos) {
    return R::Unhandled;
  }
  for (const Route& r : routes_) {
    if (r.method != req.method) continue;
    httplib::Request bodiless = req;  // its own path: the matches point into it
    if (std::regex_match(bodiless.path, bodiless.matches, r.pattern)) {
      r.handler(bodiless, res);
      return R::Handled;
    }
  }
  res.status = 404;  // the error handler writes the body
  return R::Handled;
}

httplib::Server::Handler HttpApi::wrap(Handler handler, Access access) {
  return [this, handler, access](const httplib::Request& req, httplib::Response& res) {
    if (access == Access::kOperator) {
      if (Status auth = authorize_operator(req); !auth.ok()) {
        res.set_header("WWW-Authenticate", "Bearer realm=\"vend-agent\"");
        return respond(req, res, auth.error());
      }
    }
    // httplib enforces the cap on Content-Length; this also covers chunked bodies.
    if (req.body.size() > options_.max_body_bytes) {
      return respond(
          req, res,
          make_error("payload_too_large", "the request body is over " +
                                              std::to_string(options_.max_body_bytes) + " bytes"));
    }
    respond(req, res, (this->*handler)(req));
  };
}

Status HttpApi::authorize_operator(const httplib::Request& req) const {
  if (options_.operator_token.empty()) return {};  // --insecure-no-auth
  const std::string header = req.get_header_value("Authorization");
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

void HttpApi::respond(const httplib::Request& req, httplib::Response& res,
                      const Result<HttpReply>& r) {
  if (r.ok()) {
    res.status = r->status;
    for (const auto& [name, value] : r->headers) res.set_header(name, value);
    if (r->status != 304) res.set_content(r->body, r->content_type.c_str());
    return;
  }
  const Error& e = r.error();
  res.status = http_status_of(e.code);
  if (res.status == 500) {
    log_.error(kLog, req.method + " " + req.path + ": " + e.to_string());
    res.set_content(http::error_body("internal", "internal error (the agent log has details)"),
                    kJson);
    return;
  }
  if (res.status == 503) log_.warn(kLog, req.method + " " + req.path + ": " + e.to_string());
  res.set_content(http::error_body(e.code, e.message), kJson);
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
    h.inbound_saturated = (f.max_messages > 0 && f.messages * 10 >= f.max_messages * 9) ||
                          (f.max_bytes > 0 && f.bytes * 10 >= f.max_bytes * 9);
  }
  return h;
}

Result<HttpReply> HttpApi::metrics(const httplib::Request&) {
  return HttpReply{200, metrics_.scrape(core_, health()) + rate_limit_metrics(),
                   "text/plain; version=0.0.4; charset=utf-8"};
}

Result<HttpReply> HttpApi::healthz(const httplib::Request&) {
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
