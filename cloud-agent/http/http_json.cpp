#include "http/http_json.hpp"

#include <cstdlib>
#include <limits>
#include <set>
#include <vector>

#include "http/http_server.hpp"
#include "vend/json_writer.hpp"

namespace vend::agent::http {

namespace {

// nlohmann messages start with "[json.exception.parse_error.101] ": the
// client needs the part after it.
std::string strip_exception_prefix(const std::string& what) {
  size_t end = what.find("] ");
  return (what.rfind("[json.exception.", 0) == 0 && end != std::string::npos) ? what.substr(end + 2)
                                                                              : what;
}

// Tracks keys per open object (duplicates) and the nesting depth while
// nlohmann parses. nlohmann itself accepts duplicate keys (the last wins),
// which would let a proxy and the agent read different values.
struct StrictnessCheck {
  std::vector<std::set<std::string>> keys;
  int depth = 0;
  std::string problem;

  bool on_event(Json::parse_event_t event, const Json& parsed) {
    using E = Json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      if (++depth > kMaxJsonDepth && problem.empty()) {
        problem = "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
      }
      if (event == E::object_start) keys.emplace_back();
    } else if (event == E::object_end || event == E::array_end) {
      --depth;
      if (event == E::object_end && !keys.empty()) keys.pop_back();
    } else if (event == E::key && !keys.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(key).second && problem.empty()) {
        problem = "duplicate key '" + key + "'";
      }
    }
    return true;
  }
};

const char* type_name(const Json& value) {
  if (value.is_number_float()) return "a float";
  if (value.is_number()) return "an integer";
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return "null";
}

}  // namespace

Error bad_request(std::string message) { return make_error("bad_request", std::move(message)); }

bool is_valid_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Result<Json> parse_object(std::string_view body) {
  StrictnessCheck check;
  Json value;
  try {
    value = Json::parse(body.begin(), body.end(),
                        [&check](int, Json::parse_event_t event, Json& parsed) {
                          return check.on_event(event, parsed);
                        });
  } catch (const Json::exception& e) {
    return bad_request("malformed JSON: " + strip_exception_prefix(e.what()));
  }
  if (!check.problem.empty()) return bad_request("malformed JSON: " + check.problem);
  if (!value.is_object()) {
    return bad_request(std::string("the body must be a JSON object, not ") + type_name(value));
  }
  return value;
}

FieldReader::FieldReader(const Json& object, std::string path)
    : object_(object), path_(std::move(path)) {}

std::string FieldReader::name(const char* field) const {
  return path_.empty() ? std::string(field) : path_ + "." + field;
}

Result<const Json*> FieldReader::required(const char* field) const {
  auto it = object_.find(field);
  if (it == object_.end()) return bad_request("missing field '" + name(field) + "'");
  return &*it;
}

Result<std::string> FieldReader::id(const char* field) const {
  auto v = required(field);
  if (!v.ok()) return v.error();
  if (!(*v)->is_string()) {
    return bad_request("field '" + name(field) + "' must be a string, not " + type_name(**v));
  }
  const auto& s = (*v)->get_ref<const std::string&>();
  if (!is_valid_id(s)) {
    return bad_request("field '" + name(field) + "' must be 1..64 characters of [A-Za-z0-9._-]");
  }
  return s;
}

Result<int64_t> FieldReader::integer(const char* field, int64_t lo, int64_t hi) const {
  auto v = required(field);
  if (!v.ok()) return v.error();
  const Json& j = **v;
  if (!j.is_number_integer()) {
    return bad_request("field '" + name(field) + "' must be an integer, not " + type_name(j));
  }
  std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  if (j.is_number_unsigned() &&
      j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return bad_request("field '" + name(field) + "' must be " + range);
  }
  int64_t n = j.get<int64_t>();
  if (n < lo || n > hi) return bad_request("field '" + name(field) + "' must be " + range);
  return n;
}

Result<bool> FieldReader::boolean(const char* field) const {
  auto v = required(field);
  if (!v.ok()) return v.error();
  if (!(*v)->is_boolean()) {
    return bad_request("field '" + name(field) + "' must be true or false, not " + type_name(**v));
  }
  return (*v)->get<bool>();
}

Result<std::string> FieldReader::text(const char* field, size_t max_bytes) const {
  auto v = required(field);
  if (!v.ok()) return v.error();
  if (!(*v)->is_string()) {
    return bad_request("field '" + name(field) + "' must be a string, not " + type_name(**v));
  }
  const auto& s = (*v)->get_ref<const std::string&>();
  if (s.size() > max_bytes) {
    return bad_request("field '" + name(field) + "' must be at most " + std::to_string(max_bytes) +
                       " bytes");
  }
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      return bad_request("field '" + name(field) + "' must not contain control characters");
    }
  }
  return s;
}

Result<const Json*> FieldReader::array(const char* field, size_t min_size, size_t max_size) const {
  auto v = required(field);
  if (!v.ok()) return v.error();
  if (!(*v)->is_array()) {
    return bad_request("field '" + name(field) + "' must be an array, not " + type_name(**v));
  }
  size_t n = (*v)->size();
  if (n < min_size || n > max_size) {
    return bad_request("field '" + name(field) + "' must have " + std::to_string(min_size) + ".." +
                       std::to_string(max_size) + " elements");
  }
  return *v;
}

Status FieldReader::only(std::initializer_list<const char*> known) const {
  for (const auto& item : object_.items()) {
    bool found = false;
    for (const char* k : known) found = found || item.key() == k;
    if (!found) return bad_request("unknown field '" + name(item.key().c_str()) + "'");
  }
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
