// JSON for the HTTP API: request bodies read with the one strict reader of
// untrusted input (vend/json_reader.hpp), its problems worded as this API
// words them (docs/openapi.yaml), and the response bodies (orders, slots,
// devices, errors).
//
// Every error returned here has code "bad_request" and a message naming the
// field with its path ("slots[1].capacity must be 1..1000").
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/agent_core.hpp"
#include "repository/repository.hpp"
#include "vend/json_reader.hpp"
#include "vend/protocol.hpp"
#include "vend/result.hpp"

namespace vend::agent::http {

using Json = nlohmann::json;

// Parses a request body that must be one JSON object (json::parse_strict:
// malformed JSON, invalid UTF-8, duplicate keys, nesting deeper than
// json::kMaxDepth are refused) and any top-level value that is not an
// object. Never throws.
Result<Json> parse_object(std::string_view body);

// The fields of one request body object, read by json::FieldReader and each
// call's problem answered as a bad_request at once. `path` prefixes field
// names in messages ("" at the top level, "slots[2]" for an array element).
// The object must outlive the reader, which moves its strings out (read
// each field once). Not copyable.
class BodyReader {
 public:
  explicit BodyReader(Json& object, const std::string& path = "");

  // A required id: proto::is_valid_id.
  Result<std::string> id(const char* field);
  // A required JSON integer (not 1.0, not "1", not true) in [lo, hi].
  Result<int64_t> integer(const char* field, int64_t lo, int64_t hi);
  // A required string of at most max_bytes bytes (UTF-8, no control chars).
  Result<std::string> text(const char* field, size_t max_bytes);
  // A required JSON boolean (not 0/1, not "true").
  Result<bool> boolean(const char* field);
  // A required array; its elements are checked by the caller.
  Result<Json*> array(const char* field, size_t min_size, size_t max_size);
  bool has(const char* field) const { return reader_.has(field); }
  // Fails on the first key not in `known`.
  Status only(std::initializer_list<std::string_view> known);

  // "slots[1].capacity" for field "capacity" under path "slots[1]".
  std::string name(const char* field) const { return reader_.path_of(field); }

 private:
  // `value`, or the problem the last read recorded.
  template <typename T>
  Result<T> checked(T value);

  json::FieldReader reader_;
};

// A "bad_request" error.
Error bad_request(std::string message);

// The integer query parameter `name` in [lo, hi]; else bad_request naming it.
Result<int64_t> integer_param(const std::string& name, const std::string& value, int64_t lo,
                              int64_t hi);

// Ids in URLs and bodies: the protocol's (1..64 chars of [A-Za-z0-9._-]).
using proto::is_valid_id;

// Response bodies. Orders never carry their sale token (an internal
// capability) nor the idempotency key. Written directly (the request path's
// replies); the same bytes as the nlohmann tree of these fields would dump.
std::string order_text(const Order& order);
// {"orders":[...]} (GET /v1/orders).
std::string order_list_text(const std::vector<Order>& orders);
// A refund and its delivery state (GET /v1/refunds).
Json refund_json(const StoredRefund& refund);
Json slot_json(const SlotView& slot);
Json device_json(const DeviceView& device);
// GET /v1/orders/{id}/history: {"order_id", "events", "payments", "refunds"}.
Json order_history_json(const std::string& order_id, const OrderHistory& history);
Json fault_json(const StoredFault& fault);
// An active alert, with the fields of the ops alert message (vend/ops.hpp).
Json alert_json(const ops::Alert& alert);
// {"error":{"code":...,"message":...}}, written directly.
std::string error_body(const std::string& code, const std::string& message);

}  // namespace vend::agent::http
