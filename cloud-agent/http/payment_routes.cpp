#include "http/payment_routes.hpp"

#include "http/http_json.hpp"
#include "vend/prometheus_text.hpp"
#include "vend/webhook.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "http";
constexpr int64_t kMaxAmountCents = 100'000'000;
// A notification far off the agent's clock is logged at most this often.
constexpr int64_t kSkewLogIntervalMs = 60'000;

}  // namespace

PaymentRoutes::PaymentRoutes(AgentCore& core, const HttpApiOptions& options, const Clock& clock,
                             Logger& log)
    : core_(core),
      options_(options),
      clock_(clock),
      log_(log),
      bad_input_log_(clock, log, RateLimitedLog::Options{60'000, 256}) {}

void PaymentRoutes::add_routes(Router& router) {
  // On the event thread: it only checks and posts to the core.
  router.add_async("POST", "/v1/orders/{id}/payment", Access::kPublic,
                   route_to(this, &PaymentRoutes::pay_order), /*on_event_thread=*/true);
}

Result<int64_t> PaymentRoutes::authenticate_notification(const HttpRequest& req,
                                                         const std::string& order_id) {
  if (req.header_count(webhook::kHeader) != 1) {
    return make_error("bad_signature", std::string("send exactly one ") + webhook::kHeader +
                                           " header: t=<unix seconds>,v1=<HMAC-SHA256 hex of "
                                           "'<t>.<order id>.<body>'>");
  }
  return webhook::authenticate(options_.gateway_secret, req.header(webhook::kHeader), order_id,
                               req.body);
}

// Its time decides nothing: the money was taken, so the payment is
// recorded and honoured or refunded whatever the two clocks say. Far off
// the agent's clock, one of them is wrong: counted, and logged at most
// once a minute.
void PaymentRoutes::note_signature_time(int64_t signed_s, int64_t received_s,
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

void PaymentRoutes::note_bad_signature(const HttpRequest& req, const Error& error) {
  payment_bad_signatures_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(bad_input_log_mu_);
  bad_input_log_.log(LogLevel::kWarn, kLog, req.remote_addr, error.code,
                     "payment notification " + req.path + " from " + req.remote_addr +
                         " refused: " + error.message);
}

std::string PaymentRoutes::payment_metrics() const {
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
void PaymentRoutes::pay_order(const HttpRequest& req, Router::Done done) {
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
  http::BodyReader fields(*body);
  if (Status s = fields.only({"payment_id", "amount_cents"}); !s.ok()) return done(s.error());
  auto payment_id = fields.id("payment_id");
  if (!payment_id.ok()) return done(payment_id.error());
  auto amount = fields.integer("amount_cents", 0, kMaxAmountCents);
  if (!amount.ok()) return done(amount.error());
  core_.pay_async(id, *payment_id, *amount,
                  [this, done = std::move(done), id, pid = *payment_id, t = *signed_s,
                   received_s](Result<Order> order) {
                    if (!order.ok()) return done(order.error());
                    note_signature_time(t, received_s, id);
                    if (order->known) return done(HttpReply{200, http::order_text(*order)});
                    // A verified payment for an order this agent never had:
                    // recorded and refunded; the gateway is told so (2xx: it
                    // need not send it again).
                    http::Json j = {{"id", id},
                                    {"payment_id", pid},
                                    {"payment_outcome", order->payment_outcome}};
                    done(HttpReply{200, j.dump()});
                  });
}

}  // namespace vend::agent
