#include "http/http_json.hpp"

#include <cstdlib>
#include <limits>
#include <set>
#include <vector>

#include "http/http_server.hpp"
#include "vend/json_writer.hpp"

namespace vend::agent::http {

namespace {

using json::FieldProblem;
using Kind = FieldProblem::Kind;
using Rule = FieldProblem::Rule;

// The rule an out-of-range value broke, as this API states it.
std::string rule_of(const FieldProblem& p) {
  switch (p.rule) {
    case Rule::kId: return "must be 1..64 characters of [A-Za-z0-9._-]";
    case Rule::kRange: return "must be " + p.lo + ".." + p.hi;
    case Rule::kMaxBytes: return "must be at most " + p.hi + " bytes";
    case Rule::kControlChars: return "must not contain control characters";
    case Rule::kSize: return "must have " + p.lo + ".." + p.hi + " elements";
    default: return p.text;  // kCustom: the API reads with no other rule
  }
}

// The wording of docs/openapi.yaml: "missing field 'slots[1].capacity'",
// "field 'slot' must be an integer, not a string".
Error http_wording(const FieldProblem& p, std::string_view /*type*/) {
  const std::string field = p.path + p.name;
  switch (p.kind) {
    case Kind::kMissing: return bad_request("missing field '" + field + "'");
    case Kind::kUnknown: return bad_request("unknown field '" + field + "'");
    case Kind::kWrongType: {
      std::string expected = p.expected == "a boolean" ? "true or false" : p.expected;
      return bad_request("field '" + field + "' must be " + expected + ", not " + p.actual);
    }
    case Kind::kOutOfRange: break;
  }
  return bad_request("field '" + field + "' " + rule_of(p));
}

std::string malformed(const json::ParseProblem& p) {
  using PK = json::ParseProblem::Kind;
  switch (p.kind) {
    case PK::kSyntax: return p.parser_detail;
    case PK::kTooDeep:
      return "JSON nested deeper than " + std::to_string(json::kMaxDepth) + " levels";
    case PK::kDuplicateKey: return "duplicate key '" + p.key + "'";
    case PK::kBinary: break;
  }
  return p.message;
}

}  // namespace

Error bad_request(std::string message) { return make_error("bad_request", std::move(message)); }

Result<Json> parse_object(std::string_view body) {
  Json value;
  if (auto problem = json::parse_strict(body, value)) {
    return bad_request("malformed JSON: " + malformed(*problem));
  }
  if (!value.is_object()) {
    return bad_request(std::string("the body must be a JSON object, not ") +
                       json::type_name(value));
  }
  return value;
}

BodyReader::BodyReader(Json& object, const std::string& path)
    : reader_(object, "", path.empty() ? path : path + ".", http_wording) {}

template <typename T>
Result<T> BodyReader::checked(T value) {
  if (reader_.failed()) return reader_.take_error();
  return value;
}

Result<std::string> BodyReader::id(const char* field) { return checked(reader_.id(field)); }

Result<int64_t> BodyReader::integer(const char* field, int64_t lo, int64_t hi) {
  return checked(reader_.int64_in(field, lo, hi));
}

Result<bool> BodyReader::boolean(const char* field) { return checked(reader_.boolean(field)); }

Result<std::string> BodyReader::text(const char* field, size_t max_bytes) {
  return checked(reader_.text(field, max_bytes, /*no_controls=*/true));
}

Result<Json*> BodyReader::array(const char* field, size_t min_size, size_t max_size) {
  return checked(reader_.array(field, min_size, max_size));
}

Status BodyReader::only(std::initializer_list<std::string_view> known) {
  reader_.only(json::Names(known.begin(), known.size()));
  if (reader_.failed()) return reader_.take_error();
  return {};
}

Json refund_json(const StoredRefund& r) {
  return {{"refund_id", refund_id_of(r.payment_id)},
          {"payment_id", r.payment_id},
          {"order_id", r.order_id},
          {"device", r.device},
          {"amount_cents", r.amount_cents},
          {"reason", r.reason},
          {"state", to_string(r.state)},
          {"attempts", r.attempts},
          {"last_error", r.last_error},
          {"created_ms", r.at_ms},
          {"updated_ms", r.updated_ms}};
}

Result<int64_t> integer_param(const std::string& name, const std::string& value, int64_t lo,
                              int64_t hi) {
  char* end = nullptr;
  long long n = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || value.size() > 12 || *end != '\0' || n < lo || n > hi) {
    return bad_request("query parameter '" + name + "' must be an integer in [" +
                       std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return static_cast<int64_t>(n);
}

Json order_history_json(const std::string& order_id, const OrderHistory& h) {
  Json events = Json::array();
  for (const OrderEvent& e : h.events) {
    events.push_back({{"from_state", e.from_state.empty() ? Json(nullptr) : Json(e.from_state)},
                      {"to_state", e.to_state},
                      {"at_ms", e.at_ms},
                      {"detail", e.detail}});
  }
  Json payments = Json::array();
  for (const StoredPayment& p : h.payments) {
    payments.push_back({{"payment_id", p.payment_id},
                        {"amount_cents", p.amount_cents},
                        {"outcome", p.outcome},
                        {"at_ms", p.at_ms}});
  }
  Json refunds = Json::array();
  for (const StoredRefund& r : h.refunds) refunds.push_back(refund_json(r));
  return {{"order_id", order_id},
          {"events", std::move(events)},
          {"payments", std::move(payments)},
          {"refunds", std::move(refunds)}};
}

Json fault_json(const StoredFault& f) {
  return {{"code", f.code}, {"message", f.message}, {"slot", f.slot}, {"at_ms", f.at_ms}};
}

Json alert_json(const ops::Alert& a) {
  return {{"code", a.code}, {"severity", a.severity}, {"state", a.state}, {"device", a.device},
          {"slot", a.slot}, {"message", a.message},   {"ts_ms", a.ts_ms}};
}

namespace {

// The members in sorted key order, as dump() of a tree would write them.
void write_order(json::Object& o, const Order& order) {
  o.number("created_ms", order.created_ms);
  o.string("device", order.device);
  if (order.dispatch_expires_at_ms > 0) {
    o.number("dispatch_expires_at_ms", order.dispatch_expires_at_ms);
  }
  o.string("id", order.id);
  if (!order.payment_id.empty()) o.string("payment_id", order.payment_id);
  if (!order.payment_outcome.empty()) o.string("payment_outcome", order.payment_outcome);
  o.number("price_cents", order.price_cents);
  if (!order.reason.empty()) o.string("reason", order.reason);
  o.number("reserve_deadline_ms", order.reserve_deadline_ms);
  o.number("slot", order.slot);
  o.string("state", to_string(order.state));
  o.number("updated_ms", order.updated_ms);
}

}  // namespace

std::string order_text(const Order& order) {
  std::string out;
  out.reserve(256);
  json::Object o(out);
  write_order(o, order);
  o.close();
  return out;
}

std::string order_list_text(const std::vector<Order>& orders) {
  std::string out = "{\"orders\":";
  json::append_array(out, orders, write_order);
  out += '}';
  return out;
}

Json slot_json(const SlotView& s) {
  return {{"slot", s.slot},
          {"product", s.product},
          {"price_cents", s.price_cents},
          {"capacity", s.capacity},
          {"pool", s.pool},
          {"reserved", s.reserved},
          {"dispatched", s.dispatched},
          {"sold", s.sold},
          {"burned", s.burned}};
}

Json device_json(const DeviceView& d) {
  Json j = {{"id", d.id},
            {"online", d.online},
            {"boot_id", d.boot_id},
            {"last_seen_ms", d.last_seen_ms},
            {"last_processed_seq", d.last_processed_seq},
            {"ledger_id", d.ledger_id},
            {"key_rotation_pending", d.key_rotation_pending},
            {"decommissioned", d.decommissioned},
            {"clock_skew_ms", nullptr}};
  if (d.clock_skew_ms) j["clock_skew_ms"] = *d.clock_skew_ms;
  return j;
}

std::string error_body(const std::string& code, const std::string& message) {
  return limit_error_body(code, message, "");  // the same object without "limit"
}

}  // namespace vend::agent::http
