// Operator messages (ops.hpp): encoding and strict decoding. Decoding reuses
// the protocol's strict parser and FieldReader, so errors carry the same
// codes and name the field the same way; unlike the device protocol, unknown
// extra fields are ignored (FieldReader::only is never called) so that
// operators' tools keep working against a newer agent.
#include "vend/ops.hpp"

#include <algorithm>
#include <charconv>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "vend/json_reader.hpp"
#include "vend/json_writer.hpp"
#include "vend/protocol.hpp"

namespace vend::ops {

namespace {

using json::FieldReader;
using json::Json;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int kIntMax = std::numeric_limits<int>::max();

// Same text as the protocol's encoder: sorted keys, no whitespace, invalid
// UTF-8 replaced so encoding never throws.
std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json base() {
  Json j = Json::object();
  j["v"] = kVersion;
  return j;
}

// ---- Direct writing (the hot messages) ---------------------------------------

using json::append_array;
using json::append_number;
using json::append_string;
using JsonObject = json::Object;

// ---- Decoding helpers -------------------------------------------------------

std::optional<Error> check_version(const Json& object) {
  auto it = object.find("v");
  if (it == object.end()) return Error{proto::kErrMissingField, "missing field 'v'"};
  if (!it->is_number_integer()) return Error{proto::kErrWrongType, "field 'v' must be an integer"};
  if (!it->is_number_unsigned() || it->get<uint64_t>() != static_cast<uint64_t>(kVersion)) {
    return Error{proto::kErrBadVersion, "field 'v' is " + it->dump() + ", only 1 is supported"};
  }
  return std::nullopt;
}

// Size, JSON syntax, object, version.
std::optional<Error> parse_message(std::string_view payload, Json& object) {
  if (payload.size() > proto::kMaxPayloadBytes) {
    return Error{proto::kErrOversize, "payload of " + std::to_string(payload.size()) +
                                          " bytes exceeds " +
                                          std::to_string(proto::kMaxPayloadBytes)};
  }
  if (auto problem = json::parse_strict(payload, object)) {
    return Error{proto::kErrBadJson, std::move(problem->message)};
  }
  if (!object.is_object()) return Error{proto::kErrBadJson, "payload is not a JSON object"};
  return check_version(object);
}

// Runs `read(reader)` on the element objects of the array `name`; a problem
// in an element is recorded in `outer` with its path ("slots[2].pool").
template <typename T, typename Read>
std::vector<T> read_objects(FieldReader& outer, const char* name, Read read) {
  std::vector<T> out;
  Json* list = outer.array(name);
  for (size_t i = 0; list != nullptr && i < list->size() && !outer.failed(); ++i) {
    const std::string path = std::string(name) + "[" + std::to_string(i) + "]";
    Json& item = (*list)[i];
    if (!item.is_object()) {
      outer.wrong_type(path, "an object");
      break;
    }
    FieldReader r(item, outer.type_name(), path + ".");
    T value = read(r);
    if (r.failed()) outer.fail(r.take_error());
    out.push_back(std::move(value));
  }
  return outer.failed() ? std::vector<T>{} : out;
}

// An array of strings of at most kMaxTextLength bytes.
std::vector<std::string> read_texts(FieldReader& outer, const char* name) {
  std::vector<std::string> out;
  Json* list = outer.array(name);
  for (size_t i = 0; list != nullptr && i < list->size() && !outer.failed(); ++i) {
    const std::string path = std::string(name) + "[" + std::to_string(i) + "]";
    const Json& item = (*list)[i];
    if (!item.is_string()) {
      outer.wrong_type(path, "a string");
    } else if (item.get_ref<const std::string&>().size() > proto::kMaxTextLength) {
      outer.out_of_range(path, "must be at most 512 bytes");
    } else {
      out.push_back(item.get<std::string>());
    }
  }
  return out;
}

// A JSON object of name -> non-negative integer.
std::map<std::string, int64_t> read_counts(Json& root, FieldReader& outer, const char* name) {
  std::map<std::string, int64_t> out;
  if (outer.failed()) return out;
  auto it = root.find(name);
  if (it == root.end()) {
    outer.fail(Error{proto::kErrMissingField, "missing field '" + std::string(name) + "' in " +
                                                  std::string(outer.type_name())});
    return out;
  }
  if (!it->is_object()) {
    outer.wrong_type(name, "an object");
    return out;
  }
  FieldReader r(*it, outer.type_name(), std::string(name) + ".");
  for (const auto& item : it->items()) {
    out[item.key()] = r.int64_in(item.key().c_str(), 0, kInt64Max);
  }
  if (r.failed()) outer.fail(r.take_error());
  return out;
}

SlotStatus read_slot_status(FieldReader& r) {
  SlotStatus s;
  s.slot = r.integer("slot", 1, proto::kMaxSlot);
  s.product = r.text("product");
  s.price_cents = r.int64_in("price_cents", 0, kInt64Max);
  s.capacity = r.integer("capacity", 0, kIntMax);
  s.pool = r.int64_in("pool", 0, kInt64Max);
  s.reserved = r.int64_in("reserved", 0, kInt64Max);
  s.dispatched = r.int64_in("dispatched", 0, kInt64Max);
  s.sold = r.int64_in("sold", 0, kInt64Max);
  s.burned = r.int64_in("burned", 0, kInt64Max);
  s.physical_count = r.integer("physical_count", -1, kIntMax);
  s.device_tokens = r.integer("device_tokens", -1, kIntMax);
  return s;
}

SlotReconcile read_slot_reconcile(FieldReader& r) {
  SlotReconcile s;
  s.slot = r.integer("slot", 1, proto::kMaxSlot);
  s.pool = r.int64_in("pool", 0, kInt64Max);
  s.reserved = r.int64_in("reserved", 0, kInt64Max);
  s.dispatched = r.int64_in("dispatched", 0, kInt64Max);
  s.physical_count = r.integer("physical_count", 0, kIntMax);
  s.device_tokens = r.integer("device_tokens", 0, kIntMax);
  s.digest_match = r.boolean("digest_match");
  s.verdict = r.text("verdict");
  s.actions = read_texts(r, "actions");
  s.tokens_added = r.int64_in("tokens_added", 0, kInt64Max);
  s.tokens_removed = r.int64_in("tokens_removed", 0, kInt64Max);
  return s;
}

// ---- Message readers ----------------------------------------------------------

FleetSummary read_fleet(Json& root, FieldReader& r) {
  FleetSummary m;
  m.ts_ms = r.int64_in("ts_ms", 0, kInt64Max);
  m.devices = r.integer("devices", 0, kIntMax);
  m.online = r.integer("online", 0, kIntMax);
  m.stock_total = r.int64_in("stock_total", 0, kInt64Max);
  m.orders_by_state = read_counts(root, r, "orders_by_state");
  m.orders_total = r.int64_in("orders_total", 0, kInt64Max);
  m.alerts_active = r.int64_in("alerts_active", 0, kInt64Max);
  m.storage_ok = r.boolean("storage_ok");
  if (r.has("instance")) m.instance = r.text("instance");
  return m;
}

DeviceStatus read_device(Json& /*root*/, FieldReader& r) {
  DeviceStatus m;
  m.device = r.id("device");
  m.online = r.boolean("online");
  m.boot_id = r.text("boot_id");
  m.last_seen_ms = r.int64_in("last_seen_ms", 0, kInt64Max);
  m.last_seq = r.uint64_in("last_seq", 0);
  m.unacked_events = r.uint64_in("unacked_events", 0);
  m.outbox_depth = r.uint64_in("outbox_depth", 0);
  m.snapshot_at_ms = r.int64_in("snapshot_at_ms", 0, kInt64Max);
  m.last_verdict = r.text("last_verdict");
  m.slots = read_objects<SlotStatus>(r, "slots", read_slot_status);
  m.ts_ms = r.int64_in("ts_ms", 0, kInt64Max);
  if (r.has("clock_skew_ms")) m.clock_skew_ms = r.int64_in("clock_skew_ms", -kInt64Max, kInt64Max);
  if (r.has("owner")) m.owner = r.text("owner");
  return m;
}

OrderEvent read_order_event(FieldReader& r) {
  OrderEvent m;
  m.order_id = r.id("order_id");
  m.device = r.id("device");
  m.slot = r.integer("slot", 1, proto::kMaxSlot);
  m.from_state = r.text("from_state");
  m.to_state = r.text("to_state");
  m.price_cents = r.int64_in("price_cents", 0, kInt64Max);
  m.reason = r.text("reason");
  m.ts_ms = r.int64_in("ts_ms", 0, kInt64Max);
  return m;
}

OrderEvents read_order_events(Json& /*root*/, FieldReader& r) {
  OrderEvents m;
  m.events = read_objects<OrderEvent>(r, "events", read_order_event);
  if (!r.failed() && m.events.empty()) r.out_of_range("events", "must hold at least one event");
  return m;
}

Alert read_alert(Json& /*root*/, FieldReader& r) {
  Alert m;
  m.code = r.text("code");
  m.severity = r.text("severity");
  m.state = r.text("state");
  m.device = r.id_or_empty("device");
  m.slot = r.integer("slot", 0, proto::kMaxSlot);
  m.message = r.text("message");
  m.ts_ms = r.int64_in("ts_ms", 0, kInt64Max);
  return m;
}

ReconcileReport read_reconcile(Json& /*root*/, FieldReader& r) {
  ReconcileReport m;
  m.id = r.text("id");
  m.device = r.id("device");
  m.ts_ms = r.int64_in("ts_ms", 0, kInt64Max);
  m.trigger = r.text("trigger");
  m.request_id = r.id_or_empty("request_id");
  m.snapshot_seq = r.uint64_in("snapshot_seq", 0);
  m.full = r.boolean("full");
  m.verdict = r.text("verdict");
  m.slots = read_objects<SlotReconcile>(r, "slots", read_slot_reconcile);
  return m;
}

// Parses, checks the version and reads one message; never throws (what is
// left after strict parsing is allocation failure, reported as bad_json).
template <typename T>
Result<T> decode_as(std::string_view payload, const char* type, T (*read)(Json&, FieldReader&)) {
  try {
    Json object;
    if (auto error = parse_message(payload, object)) return *std::move(error);
    FieldReader r(object, type);
    T message = read(object, r);
    if (r.failed()) return r.take_error();
    return message;
  } catch (const std::exception& e) {
    return Error{proto::kErrBadJson, std::string("could not decode: ") + e.what()};
  }
}

}  // namespace

// ---- Encoding -----------------------------------------------------------------

std::string encode(const FleetSummary& m) {
  Json j = base();
  j["ts_ms"] = m.ts_ms;
  j["devices"] = m.devices;
  j["online"] = m.online;
  j["stock_total"] = m.stock_total;
  j["orders_by_state"] = Json::object();
  for (const auto& [state, n] : m.orders_by_state) j["orders_by_state"][state] = n;
  j["orders_total"] = m.orders_total;
  j["alerts_active"] = m.alerts_active;
  j["storage_ok"] = m.storage_ok;
  if (!m.instance.empty()) j["instance"] = m.instance;
  return dump(j);
}

// The two messages of the agent's hot path (every reservation makes an
// order event; every changed device a status) are written directly, in the
// byte order dump() gives (keys sorted, no whitespace): the nlohmann tree
// cost more core time than the reservation itself (docs/benchmarks.md #1).
// ops_test pins the bytes against the tree encoding.
std::string encode(const DeviceStatus& m) {
  std::string out;
  out.reserve(256 + 160 * m.slots.size());
  JsonObject j(out);
  j.string("boot_id", m.boot_id);
  if (m.clock_skew_ms) j.number("clock_skew_ms", *m.clock_skew_ms);
  j.string("device", m.device);
  j.number("last_seen_ms", m.last_seen_ms);
  j.number("last_seq", m.last_seq);
  j.string("last_verdict", m.last_verdict);
  j.boolean("online", m.online);
  j.number("outbox_depth", m.outbox_depth);
  if (!m.owner.empty()) j.string("owner", m.owner);
  j.key("slots");
  append_array(out, m.slots, [](JsonObject& slot, const SlotStatus& s) {
    slot.number("burned", s.burned);
    slot.number("capacity", s.capacity);
    slot.number("device_tokens", s.device_tokens);
    slot.number("dispatched", s.dispatched);
    slot.number("physical_count", s.physical_count);
    slot.number("pool", s.pool);
    slot.number("price_cents", s.price_cents);
    slot.string("product", s.product);
    slot.number("reserved", s.reserved);
    slot.number("slot", s.slot);
    slot.number("sold", s.sold);
  });
  j.number("snapshot_at_ms", m.snapshot_at_ms);
  j.number("ts_ms", m.ts_ms);
  j.number("unacked_events", m.unacked_events);
  j.number("v", kVersion);
  j.close();
  return out;
}

void OrderEventsWriter::open() {
  out_.clear();
  out_.reserve(std::max<size_t>(last_bytes_, 256));
  out_ += "{\"events\":[";
}

void OrderEventsWriter::add(const OrderEventView& e) {
  if (count_ == 0) open();
  // The common case (every text plain ASCII): the event's bytes written at
  // once into room reserved for them, keys as literals. This runs for every
  // order transition on the agent core's thread.
  const size_t at = out_.size();
  out_.resize(at + kEventBound + e.order_id.size() + e.device.size() + e.from_state.size() +
              e.to_state.size() + e.reason.size());
  char* p = out_.data() + at;
  if (count_ > 0) *p++ = ',';
  bool ok = true;
  p = json::raw::put(p, "{\"device\":\"");
  p = json::raw::put_plain(p, e.device, ok);
  p = json::raw::put(p, "\",\"from_state\":\"");
  p = json::raw::put_plain(p, e.from_state, ok);
  p = json::raw::put(p, "\",\"order_id\":\"");
  p = json::raw::put_plain(p, e.order_id, ok);
  p = json::raw::put(p, "\",\"price_cents\":");
  p = json::raw::put_number(p, e.price_cents);
  p = json::raw::put(p, ",\"reason\":\"");
  p = json::raw::put_plain(p, e.reason, ok);
  p = json::raw::put(p, "\",\"slot\":");
  p = json::raw::put_number(p, e.slot);
  p = json::raw::put(p, ",\"to_state\":\"");
  p = json::raw::put_plain(p, e.to_state, ok);
  p = json::raw::put(p, "\",\"ts_ms\":");
  p = json::raw::put_number(p, e.ts_ms);
  *p++ = '}';
  if (ok) {
    out_.resize(static_cast<size_t>(p - out_.data()));
    ++count_;
    return;
  }
  out_.resize(at);  // a text to escape: the general writer
  if (count_ > 0) out_ += ',';
  ++count_;
  JsonObject j(out_);
  j.string("device", e.device);
  j.string("from_state", e.from_state);
  j.string("order_id", e.order_id);
  j.number("price_cents", e.price_cents);
  j.string("reason", e.reason);
  j.number("slot", e.slot);
  j.string("to_state", e.to_state);
  j.number("ts_ms", e.ts_ms);
  j.close();
}

std::string OrderEventsWriter::finish() {
  if (count_ == 0) open();  // no events: {"events":[],"v":1}
  out_ += "],\"v\":";
  append_number(out_, kVersion);
  out_ += '}';
  last_bytes_ = out_.size();
  count_ = 0;
  return std::move(out_);
}

std::string encode(const OrderEvents& m) {
  OrderEventsWriter writer;
  for (const OrderEvent& e : m.events) {
    writer.add(OrderEventView{e.order_id, e.device, e.slot, e.from_state, e.to_state, e.price_cents,
                              e.reason, e.ts_ms});
  }
  return writer.finish();
}

std::string encode(const Alert& m) {
  Json j = base();
  j["code"] = m.code;
  j["severity"] = m.severity;
  j["state"] = m.state;
  j["device"] = m.device;
  j["slot"] = m.slot;
  j["message"] = m.message;
  j["ts_ms"] = m.ts_ms;
  return dump(j);
}

// One per snapshot of every machine (benchmark 6 reconciles 100,000 slots):
// written directly too.
std::string encode(const ReconcileReport& m) {
  std::string out;
  out.reserve(256 + 256 * m.slots.size());
  JsonObject j(out);
  j.string("device", m.device);
  j.boolean("full", m.full);
  j.string("id", m.id);
  j.string("request_id", m.request_id);
  j.key("slots");
  append_array(out, m.slots, [&out](JsonObject& slot, const SlotReconcile& s) {
    slot.key("actions");
    out += '[';
    for (size_t i = 0; i < s.actions.size(); ++i) {
      if (i > 0) out += ',';
      append_string(out, s.actions[i]);
    }
    out += ']';
    slot.number("device_tokens", s.device_tokens);
    slot.boolean("digest_match", s.digest_match);
    slot.number("dispatched", s.dispatched);
    slot.number("physical_count", s.physical_count);
    slot.number("pool", s.pool);
    slot.number("reserved", s.reserved);
    slot.number("slot", s.slot);
    slot.number("tokens_added", s.tokens_added);
    slot.number("tokens_removed", s.tokens_removed);
    slot.string("verdict", s.verdict);
  });
  j.number("snapshot_seq", m.snapshot_seq);
  j.string("trigger", m.trigger);
  j.number("ts_ms", m.ts_ms);
  j.number("v", kVersion);
  j.string("verdict", m.verdict);
  j.close();
  return out;
}

// ---- Decoding -----------------------------------------------------------------

Result<FleetSummary> decode_fleet(std::string_view json) {
  return decode_as<FleetSummary>(json, "fleet summary", read_fleet);
}
Result<DeviceStatus> decode_device(std::string_view json) {
  return decode_as<DeviceStatus>(json, "device status", read_device);
}
Result<OrderEvents> decode_order_events(std::string_view json) {
  return decode_as<OrderEvents>(json, "order events", read_order_events);
}
Result<Alert> decode_alert(std::string_view json) {
  return decode_as<Alert>(json, "alert", read_alert);
}
Result<ReconcileReport> decode_reconcile(std::string_view json) {
  return decode_as<ReconcileReport>(json, "reconcile report", read_reconcile);
}

}  // namespace vend::ops
