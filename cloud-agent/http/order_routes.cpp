#include "http/order_routes.hpp"

#include <charconv>

#include "http/http_json.hpp"
#include "http/operator_audit.hpp"
#include "repository/repository.hpp"

namespace vend::agent {

namespace {

constexpr size_t kMaxIdempotencyKey = 128;
constexpr int64_t kMaxListLimit = 1000;
constexpr int64_t kDefaultListLimit = 100;
constexpr size_t kMaxReviewText = 256;

// The order id of /v1/orders/{id}...; an id no order can have is not found.
Result<std::string> order_id_of(const HttpRequest& req) {
  std::string id(http::path_segment(req.path, 2));  // /v1/orders/{id}...
  if (!http::is_valid_id(id)) return make_error("not_found", "no order '" + id + "'");
  return id;
}

// Optional Idempotency-Key: 1..128 printable ASCII characters, no spaces.
Result<std::string> idempotency_key_of(const HttpRequest& req) {
  if (!req.has_header("Idempotency-Key")) return std::string();
  if (req.header_count("Idempotency-Key") > 1) {
    return http::bad_request("header 'Idempotency-Key' given more than once");
  }
  std::string key = req.header("Idempotency-Key");
  bool printable = !key.empty() && key.size() <= kMaxIdempotencyKey;
  for (char c : key) printable = printable && c > 0x20 && c < 0x7f;
  if (!printable) {
    return http::bad_request("header 'Idempotency-Key' must be 1..128 printable ASCII characters");
  }
  return key;
}

// Cancel takes no input: an empty body or {}.
Status expect_empty_body(const HttpRequest& req) {
  if (req.body.empty()) return {};
  auto body = http::parse_object(req.body);
  if (!body.ok()) return body.error();
  return http::BodyReader(*body).only({});
}

Result<int64_t> parse_limit(const std::string& text) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > kMaxListLimit) {
    return http::bad_request("query parameter 'limit' must be an integer 1.." +
                             std::to_string(kMaxListLimit));
  }
  return n;
}

template <typename State>
struct ListQuery {
  std::optional<State> state;
  size_t limit = kDefaultListLimit;
  std::string device;  // "" = any; only where `with_device`
};

// ?state=…&limit=… (and &device=… `with_device`), each at most once and
// nothing else. `parse_state` maps a state name (nullopt: unknown, answered
// with `unknown_state(value)`).
template <typename State, typename Parse, typename Message>
Result<ListQuery<State>> list_query(const HttpRequest& req, Parse parse_state,
                                    Message unknown_state, bool with_device = false) {
  ListQuery<State> out;
  for (const auto& [name, value] : req.params) {
    if (req.param_count(name) > 1) {
      return http::bad_request("query parameter '" + name + "' given more than once");
    }
    if (name == "state") {
      out.state = parse_state(value);
      if (!out.state) return http::bad_request(std::string(unknown_state(value)));
    } else if (name == "limit") {
      auto n = parse_limit(value);
      if (!n.ok()) return n.error();
      out.limit = static_cast<size_t>(*n);
    } else if (name == "device" && with_device) {
      if (!http::is_valid_id(value)) {
        return http::bad_request(
            "query parameter 'device' must be a device id (1..64 of [A-Za-z0-9._-])");
      }
      out.device = value;
    } else {
      return http::bad_request("unknown query parameter '" + name + "'");
    }
  }
  return out;
}

HttpReply order_reply(int status, const Order& order) {
  return HttpReply{status, http::order_text(order)};
}

}  // namespace

OrderRoutes::OrderRoutes(AgentCore& core, const HttpApiOptions& options, OrderAdmission& admission,
                         const OwnerRedirect& owners)
    : core_(core), options_(options), admission_(admission), owners_(owners) {}

void OrderRoutes::add_routes(Router& router) {
  // Ids in paths: the same alphabet as ids in bodies (validated again there).
  const std::string order = "/v1/orders/{id}";
  // POST /v1/orders runs on the event thread unless the rate limiter asks
  // a server over the network (Redis).
  bool limiter_blocks = options_.rate_limiter != nullptr && options_.rate_limiter->may_block();
  router.add_async("POST", "/v1/orders", Access::kPublic,
                   route_to(this, &OrderRoutes::create_order), !limiter_blocks);
  router.add("GET", "/v1/orders", Access::kSupport, route_to(this, &OrderRoutes::list_orders));
  router.add("GET", "/v1/refunds", Access::kSupport, route_to(this, &OrderRoutes::list_refunds));
  router.add("GET", order, Access::kPublic, route_to(this, &OrderRoutes::get_order));
  router.add("POST", order + "/cancel", Access::kPublic,
             route_to(this, &OrderRoutes::cancel_order));
  router.add("POST", order + "/resolve", Access::kSupport,
             route_to(this, &OrderRoutes::resolve_order));
  router.add("GET", order + "/history", Access::kSupport,
             route_to(this, &OrderRoutes::order_history));
}

void OrderRoutes::create_order(const HttpRequest& req, Router::Done done) {
  auto body = http::parse_object(req.body);
  if (!body.ok()) return done(body.error());
  http::BodyReader fields(*body);
  if (Status s = fields.only({"device", "slot"}); !s.ok()) return done(s.error());
  auto device = fields.id("device");
  if (!device.ok()) return done(device.error());
  auto slot = fields.integer("slot", 1, 255);
  if (!slot.ok()) return done(slot.error());
  auto key = idempotency_key_of(req);
  if (!key.ok()) return done(key.error());
  auto client = admission_.client_of(req);
  if (!client.ok()) return done(client.error());
  // Another instance's machine: redirected before its rate limits count it
  // (the owner counts it when the client follows); nobody's (its shard is
  // moving): 503.
  if (auto moved = owners_.elsewhere(req, *device)) return done(std::move(*moved));
  // A machine the core does not hold is unknown here (the core holds every
  // machine it serves): answered without the core, under one rate limit
  // shared by every such id.
  bool known = core_.knows_device(*device);
  if (auto limited = admission_.order_rate_limited(*device, known, *client)) return done(*limited);
  if (!known) return done(make_error("not_found", "no device '" + *device + "'"));
  // Answered from the commit callback: this worker is free at once.
  core_.create_order_async(*device, static_cast<int>(*slot), *client, *key,
                           [done = std::move(done)](Result<Order> order) {
                             if (!order.ok()) return done(order.error());
                             done(order_reply(201, *order));
                           });
}

Result<HttpReply> OrderRoutes::get_order(const HttpRequest& req) {
  auto id = order_id_of(req);
  if (!id.ok()) return id.error();
  auto order = core_.get_order(*id);
  if (!order.ok()) return order.error();
  return order_reply(200, *order);
}

Result<HttpReply> OrderRoutes::cancel_order(const HttpRequest& req) {
  auto id = order_id_of(req);
  if (!id.ok()) return id.error();
  if (Status s = expect_empty_body(req); !s.ok()) return s.error();
  auto order = core_.cancel(*id);
  if (!order.ok()) return order.error();
  return order_reply(200, *order);
}

// An operator's decision on a NEEDS_REVIEW order and why; who decided is
// the calling account (no typed name).
Result<HttpReply> OrderRoutes::resolve_order(const HttpRequest& req) {
  auto id = order_id_of(req);
  if (!id.ok()) return id.error();
  auto body = http::parse_object(req.body);
  if (!body.ok()) return body.error();
  http::BodyReader fields(*body);
  if (fields.has("by")) {
    return http::bad_request(
        "field 'by' is no longer taken: the resolver is the calling account's name");
  }
  if (Status s = fields.only({"dispensed", "note"}); !s.ok()) return s.error();
  auto dispensed = fields.boolean("dispensed");
  if (!dispensed.ok()) return dispensed.error();
  std::string note;
  if (fields.has("note")) {
    auto n = fields.text("note", kMaxReviewText);
    if (!n.ok()) return n.error();
    note = *n;
  }
  const std::string by = req.caller ? req.caller->account : std::string("operator");
  auto current = core_.get_order(*id);
  std::string device = current.ok() ? current->device : std::string();
  http::Json detail = {{"dispensed", *dispensed}, {"note", note}};
  if (current.ok()) detail["before"] = to_string(current->state);
  auto order = core_.resolve_review(*id, *dispensed, by, note,
                                    audit_of(req, "resolve_review", device, *id, detail.dump()));
  if (!order.ok()) return order.error();
  return order_reply(200, *order);
}

// Operator only: the history names who resolved a review and why.
Result<HttpReply> OrderRoutes::order_history(const HttpRequest& req) {
  auto id = order_id_of(req);
  if (!id.ok()) return id.error();
  if (!req.params.empty()) return http::bad_request("GET .../history takes no parameters");
  auto history = core_.order_history(*id);
  if (!history.ok()) return history.error();
  return HttpReply{200, http::order_history_json(*id, *history).dump()};
}

Result<HttpReply> OrderRoutes::list_refunds(const HttpRequest& req) {
  auto query = list_query<RefundState>(req, parse_refund_state, [](const std::string&) {
    return "query parameter 'state' must be PENDING, DELIVERED or GAVE_UP";
  });
  if (!query.ok()) return query.error();
  auto refunds = core_.list_refunds(query->state, query->limit);
  if (!refunds.ok()) return refunds.error();
  http::Json list = http::Json::array();
  for (const StoredRefund& r : *refunds) list.push_back(http::refund_json(r));
  return HttpReply{200, http::Json{{"refunds", std::move(list)}}.dump()};
}

Result<HttpReply> OrderRoutes::list_orders(const HttpRequest& req) {
  auto query = list_query<OrderState>(
      req, parse_order_state,
      [](const std::string& value) {
        return "query parameter 'state': unknown state '" + value + "'";
      },
      /*with_device=*/true);
  if (!query.ok()) return query.error();
  auto orders = core_.list_orders(query->state, query->limit, query->device);
  if (!orders.ok()) return orders.error();
  return HttpReply{200, http::order_list_text(*orders)};
}

}  // namespace vend::agent
