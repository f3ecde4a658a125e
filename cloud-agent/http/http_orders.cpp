// Order endpoints of HttpApi: create, read, pay (gateway), cancel, list.
#include <charconv>

#include "http/http_api.hpp"
#include "http/http_json.hpp"
#include "repository/repository.hpp"
#include "vend/webhook.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "http";
constexpr size_t kMaxIdempotencyKey = 128;
constexpr int64_t kMaxAmountCents = 100'000'000;
constexpr int64_t kMaxListLimit = 1000;
constexpr int64_t kDefaultListLimit = 100;
constexpr size_t kMaxReviewText = 256;
// A notification far off the agent's clock is logged at most this often.
constexpr int64_t kSkewLogIntervalMs = 60'000;

// The order id of /v1/orders/{id}...; an id no order can have is not found.
Result<std::string> order_id_of(const httplib::Request& req) {
  std::string id(http::path_segment(req.path, 2));  // /v1/orders/{id}...
  if (!http::is_valid_id(id)) return make_error("not_found", "no order '" + id + "'");
  return id;
}

// Optional Idempotency-Key: 1..128 printable ASCII characters, no spaces.
Result<std::string> idempotency_key_of(const httplib::Request& req) {
  if (!req.has_header("Idempotency-Key")) return std::string();
  if (req.get_header_value_count("Idempotency-Key") > 1) {
    return http::bad_request("header 'Idempotency-Key' given more than once");
  }
  std::string key = req.get_header_value("Idempotency-Key");
  bool printable = !key.empty() && key.size() <= kMaxIdempotencyKey;
  for (char c : key) printable = printable && c > 0x20 && c < 0x7f;
  if (!printable) {
    return http::bad_request("header 'Idempotency-Key' must be 1..128 printable ASCII characters");
  }
  return key;
}

// Cancel takes no input: an empty body or {}.
Status expect_empty_body(const httplib::Request& req) {
  if (req.body.empty()) return {};
  auto body = http::parse_object(req.body);
  if (!body.ok()) return body.error();
  return http::FieldReader(*body).only({});
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
Result<ListQuery<State>> list_query(const httplib::Request& req, Parse parse_state,
                                    Message unknown_state, bool with_device = false) {
  ListQuery<State> out;
  for (const auto& [name, value] : req.params) {
    if (req.get_param_value_count(name) > 1) {
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

void HttpApi::create_order(const httplib::Request& req, Done done) {
  auto body = http::parse_object(req.body);
  if (!body.ok()) return done(body.error());
  http::FieldReader fields(*body);
  if (Status s = fields.only({"device", "slot"}); !s.ok()) return done(s.error());
  auto device = fields.id("device");
  if (!device.ok()) return done(device.error());
  auto slot = fields.integer("slot", 1, 255);
  if (!slot.ok()) return done(slot.error());
  auto key = idempotency_key_of(req);
  if (!key.ok()) return done(key.error());
  auto client = client_of(req);
  if (!client.ok()) return done(client.error());
  // Another instance's machine: redirected before its rate limits count it
  // (the owner counts it when the client follows); nobody's (its shard is
  // moving): 503.
  if (options_.owner_url) {
    auto owner = options_.owner_url(*device);
    if (!owner || *owner != options_.self_url) return done(redirect_to_owner(req, *device));
  }
  // A machine the core does not hold is unknown here (the core holds every
  // machine it serves): answered without the core, under one rate limit
  // shared by every such id.
  bool known = core_.knows_device(*device);
  if (auto limited = order_rate_limited(*device, known, *client)) return done(*limited);
  if (!known) return done(make_error("not_found", "no device '" + *device + "'"));
  // Answered from the commit callback: this worker is free at once.
  core_.create_order_async(*device, static_cast<int>(*slot), *client, *key,
                           [done](Result<Order> order) {
                             if (!order.ok()) return done(order.error());
                             done(order_reply(201, *order));
                           });
}

Result<HttpReply> HttpApi::get_order(const httplib::Request& req) {
  auto id = order_id_of(req);
  if (!id.ok()) return id.error();
  auto order = core_.get_order(*id);
  if (!order.ok()) return order.error();
  return order_reply(200, *order);
}

Result<int64_t> HttpApi::authenticate_notification(const httplib::Request& req,
                                                   const std::string& order_id) {
  if (req.get_header_value_count(webhook::kHeader) != 1) {
    return make_error("bad_signature", std::string("send exactly one ") + webhook::kHeader +
                                           " header: t=<unix seconds>,v1=<HMAC-SHA256 hex of "
                                           "'<t>.<order id>.<body>'>");
  }
  return webhook::authenticate(options_.gateway_secret, req.get_header_value(webhook::kHeader),
                               order_id, req.body);
}

// Its time decides nothing: the money was taken, so the payment is
// recorded and honoured or refunded whatever the two clocks say. Far off
// the agent's clock, one of them is wrong: counted, and logged at most
// once a minute.
void HttpApi::note_signature_time(int64_t signed_s, int64_t received_s,
                                  const std::string& order_id) {
  int64_t skew_s = received_s - signed_s;
  if (skew_s >= -options_.payment_tolerance_s && skew_s <= options_.payment_tolerance_s) return;
  uint64_t n = payment_clock_skew_.fetch_add(1, std::memory_order_relaxed) + 1;
  int64_t now_ms = clock_.monotonic_ms();
  int64_t next = skew_log_next_ms_.load(std::memory_order_relaxed);
  if (now_ms < next ||
      !skew_log_next_ms_.compare_exchange_strong(next, now_ms + kSkewLogIntervalMs)) {
    return;
  }
  log_.warn(kLog, "the payment notification for order " + order_id +
                      " was signed at t=" + std::to_string(signed_s) + ", " +
                      std::to_string(skew_s) + " s from the agent's clock (tolerance " +
                      std::to_string(options_.payment_tolerance_s) +
                      " s): recorded and handled all the same; check NTP on the agent and the "
                      "gateway (" +
                      std::to_string(n) + " such notifications so far)");
}

Result<std::string> HttpApi::client_of(const httplib::Request& req) {
  std::vector<std::string> forwarded;
  size_t lines = req.get_header_value_count("X-Forwarded-For");
  for (size_t i = 0; i < lines; ++i)
    forwarded.push_back(req.get_header_value("X-Forwarded-For", i));
  auto address = options_.trusted_proxies.client_address(req.remote_addr, forwarded);
  if (!address.ok()) {
    bad_forwarded_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(bad_input_log_mu_);
    bad_input_log_.log(LogLevel::kWarn, kLog, req.remote_addr, "bad_forwarded_for",
                       req.method + " " + req.path + " refused: " + address.error().message);
    return address.error();
  }
  if (!req.has_header("X-Client-Id")) return "addr:" + *address;
  if (req.get_header_value_count("X-Client-Id") > 1) {
    return http::bad_request("header 'X-Client-Id' given more than once");
  }
  std::string id = req.get_header_value("X-Client-Id");
  if (!http::is_valid_id(id)) {
    return http::bad_request("header 'X-Client-Id' must be 1..64 characters of [A-Za-z0-9._-]");
  }
  return "id:" + id;
}

void HttpApi::note_bad_signature(const httplib::Request& req, const Error& error) {
  payment_bad_signatures_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(bad_input_log_mu_);
  bad_input_log_.log(LogLevel::kWarn, kLog, req.remote_addr, error.code,
                     "payment notification " + req.path + " from " + req.remote_addr +
                         " refused: " + error.message);
}

std::string HttpApi::payment_metrics() const {
  PrometheusText text;
  text.scalar("vend_payment_clock_skew_total", MetricType::kCounter,
              "Payment notifications signed further than --payment-tolerance-s from the agent's "
              "clock (handled all the same).",
              payment_clock_skew_.load(std::memory_order_relaxed));
  text.scalar("vend_payment_bad_signatures_total", MetricType::kCounter,
              "Payment notifications refused: no valid Vend-Signature for their order.",
              payment_bad_signatures_.load(std::memory_order_relaxed));
  return text.take();
}

// The signature is checked over the raw bytes before anything is parsed:
// an unauthenticated caller learns nothing, not even whether the order
// exists. It binds the order id of the path, so a body captured for one
// order is refused for any other. Nothing else is refused: an authentic
// notification is recorded (its answer comes after the commit), and one
// sent again -- a retry after a 503 or a lost answer, a replay -- gets the
// recorded answer of its payment id (AgentCore::pay_async).
void HttpApi::pay_order(const httplib::Request& req, Done done) {
  int64_t received_s = clock_.wall_ms() / 1000;
  std::string id(http::path_segment(req.path, 2));  // /v1/orders/{id}...
  auto signed_s = authenticate_notification(req, id);
  if (!signed_s.ok()) {
    note_bad_signature(req, signed_s.error());
    return done(signed_s.error());
  }
  if (!http::is_valid_id(id)) return done(make_error("not_found", "no order '" + id + "'"));
  auto body = http::parse_object(req.body);
  if (!body.ok()) return done(body.error());
  http::FieldReader fields(*body);
  if (Status s = fields.only({"payment_id", "amount_cents"}); !s.ok()) return done(s.error());
  auto payment_id = fields.id("payment_id");
  if (!payment_id.ok()) return done(payment_id.error());
  auto amount = fields.integer("amount_cents", 0, kMaxAmountCents);
  if (!amount.ok()) return done(amount.error());
  core_.pay_async(
      id, *payment_id, *amount,
      [this, done, id, pid = *payment_id, t = *signed_s, received_s](Result<Order> order) {
        if (!order.ok()) return done(order.error());
        note_signature_time(t, received_s, id);
        if (order->known) return done(order_reply(200, *order));
        // A verified payment for an order this agent never had:
        // recorded and refunded; the gateway is told so (2xx: it
        // need not send it again).
        http::Json j = {
            {"id", id}, {"payment_id", pid}, {"payment_outcome", order->payment_outcome}};
        done(HttpReply{200, j.dump()});
      });
}

Result<HttpReply> HttpApi::cancel_order(const httplib::Request& req) {
  auto id = order_id_of(req);
  if (!id.ok()) return id.error();
  if (Status s = expect_empty_body(req); !s.ok()) return s.error();
  auto order = core_.cancel(*id);
  if (!order.ok()) return order.error();
  return order_reply(200, *order);
}

// An operator's decision on a NEEDS_REVIEW order, with who decided and why.
Result<HttpReply> HttpApi::resolve_order(const httplib::Request& req) {
  auto id = order_id_of(req);
  if (!id.ok()) return id.error();
  auto body = http::parse_object(req.body);
  if (!body.ok()) return body.error();
  http::FieldReader fields(*body);
  if (Status s = fields.only({"dispensed", "by", "note"}); !s.ok()) return s.error();
  auto dispensed = fields.boolean("dispensed");
  if (!dispensed.ok()) return dispensed.error();
  auto by = fields.text("by", kMaxReviewText);
  if (!by.ok()) return by.error();
  if (by->empty()) return http::bad_request("field 'by' must name who decides");
  std::string note;
  if (fields.has("note")) {
    auto n = fields.text("note", kMaxReviewText);
    if (!n.ok()) return n.error();
    note = *n;
  }
  auto order = core_.resolve_review(*id, *dispensed, *by, note);
  if (!order.ok()) return order.error();
  return order_reply(200, *order);
}

// Operator only: the history names who resolved a review and why.
Result<HttpReply> HttpApi::order_history(const httplib::Request& req) {
  auto id = order_id_of(req);
  if (!id.ok()) return id.error();
  if (!req.params.empty()) return http::bad_request("GET .../history takes no parameters");
  auto history = core_.order_history(*id);
  if (!history.ok()) return history.error();
  return HttpReply{200, http::order_history_json(*id, *history).dump()};
}

Result<HttpReply> HttpApi::list_refunds(const httplib::Request& req) {
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

Result<HttpReply> HttpApi::list_orders(const httplib::Request& req) {
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
