// Protocol v1: strict decoding. Every rule here is listed in docs/protocol.md
// and pinned by the malformed-input table in tests/common/protocol_reject_test.cpp.
#include <algorithm>
#include <array>
#include <bitset>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "vend/json_reader.hpp"
#include "vend/protocol.hpp"

namespace vend::proto {

namespace {

using json::FieldReader;
using json::Json;
using json::Names;
using json::printable;

constexpr int kMaxCount = 100000;  // physical_count, available_tokens
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// ---- Message bodies -------------------------------------------------------

constexpr std::array<std::string_view, 3> kBaseFields = {"v", "type", "mac"};
// A v2 command: every type carries expires_at_ms.
constexpr std::array<std::string_view, 4> kCommandV2Fields = {"v", "type", "mac", "expires_at_ms"};
constexpr std::array<std::string_view, 8> kEnvelopeFields = {
    "v", "type", "mac", "device", "seq", "boot_id", "ts_ms", "ledger_id"};

Command read_dispense(FieldReader& r) {
  DispenseCommand c;
  c.device = r.id("device");
  c.order_id = r.id("order_id");
  c.slot = r.integer("slot", 1, kMaxSlot);
  c.token = r.token("token");
  c.expires_at_ms = r.int64_in("expires_at_ms", 1, kInt64Max);
  if (r.has("ledger_id") || r.has("ledger_seq")) {  // together or not at all
    c.ledger_id = r.token("ledger_id");
    c.ledger_seq = r.uint64_in("ledger_seq", 0);
    if (r.has("ledger_mac")) c.ledger_mac = r.hex64("ledger_mac");
  } else if (r.has("ledger_mac")) {
    r.fail(Error{kErrMissingField, "missing field 'ledger_id' (ledger_mac needs it)"});
  }
  return c;
}

Command read_restock(FieldReader& r) {
  RestockCommand c;
  c.device = r.id("device");
  c.restock_id = r.id("restock_id");
  c.slot = r.integer("slot", 1, kMaxSlot);
  c.count = r.integer("count", 1, kMaxRestockCount);
  return c;
}

Command read_snapshot_request(FieldReader& r) {
  SnapshotRequest c;
  c.device = r.id("device");
  c.request_id = r.id("request_id");
  c.full = r.boolean("full");
  return c;
}

Command read_ack(FieldReader& r) {
  Ack c;
  c.device = r.id("device");
  c.upto_seq = r.uint64_in("upto_seq", 0);
  if (r.has("ledger_id")) c.ledger_id = r.token("ledger_id");
  if (r.has("upto_mac")) c.upto_mac = r.hex64("upto_mac");
  return c;
}

Command read_resend(FieldReader& r) {
  ResendRequest c;
  c.device = r.id("device");
  c.from_seq = r.uint64_in("from_seq", 1);
  if (r.has("ledger_id")) c.ledger_id = r.token("ledger_id");
  return c;
}

Command read_status_request(FieldReader& r) {
  StatusRequest c;
  c.device = r.id("device");
  return c;
}

// A string field checked by `valid`, with `rule` in the error.
std::string checked_text(FieldReader& r, const char* name, size_t max_bytes,
                         bool (*valid)(std::string_view), std::string_view rule) {
  std::string value = r.text(name, max_bytes, /*no_controls=*/true);
  if (!r.failed() && !valid(value)) r.out_of_range(name, rule);
  return value;
}

bool is_hex128(std::string_view text) {
  if (text.size() != 128) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Command read_update(FieldReader& r) {
  UpdateCommand c;
  c.device = r.id("device");
  c.update_id = r.id("update_id");
  c.version = checked_text(r, "version", kMaxVersionLength, is_valid_version,
                           "must be 1..4 dot-separated numbers of 1..9 digits");
  c.url = checked_text(r, "url", kMaxUrlLength, is_valid_update_url,
                       "must be an http:// or https:// URL without spaces or quotes");
  c.size_bytes =
      static_cast<uint64_t>(r.int64_in("size_bytes", 1, static_cast<int64_t>(kMaxUpdateBytes)));
  c.sha256 = r.hex64("sha256");
  c.signature = checked_text(r, "signature", 128, is_hex128, "must be 128 lowercase hex chars");
  return c;
}

EventBody read_update_status(FieldReader& r) {
  UpdateStatus e;
  e.update_id = r.id("update_id");
  const std::string state = r.text("state");
  if (!r.failed()) {
    auto parsed = parse_update_state(state);
    if (!parsed) {
      r.out_of_range("state",
                     "must be downloading, verified, installing, installed, failed or rolled_back");
    }
    e.state = parsed.value_or(UpdateState::kFailed);
  }
  e.version = checked_text(r, "version", kMaxVersionLength, is_valid_version,
                           "must be 1..4 dot-separated numbers of 1..9 digits");
  e.reason = r.text("reason");
  return e;
}

EventBody read_events_unavailable(FieldReader& r) {
  EventsUnavailable e;
  e.from_seq = r.uint64_in("from_seq", 1);
  e.oldest_seq = r.uint64_in("oldest_seq", 1);
  if (!r.failed() && e.oldest_seq <= e.from_seq) {
    r.out_of_range("oldest_seq", "must be greater than from_seq");
  }
  return e;
}

EventBody read_dispense_result(FieldReader& r) {
  DispenseResult e;
  e.order_id = r.id("order_id");
  e.slot = r.integer("slot", 1, kMaxSlot);
  e.token = r.token("token");
  const std::string status = r.text("status");
  if (!r.failed()) {
    auto parsed = parse_dispense_status(status);
    if (!parsed) r.out_of_range("status", "must be DISPENSED, FAILED, REJECTED or UNCERTAIN");
    e.status = parsed.value_or(DispenseStatus::kRejected);
  }
  e.reason = r.text("reason");
  e.token_consumed = r.boolean("token_consumed");
  return e;
}

EventBody read_dispense_started(FieldReader& r) {
  DispenseStarted e;
  e.order_id = r.id("order_id");
  e.slot = r.integer("slot", 1, kMaxSlot);
  e.token = r.token("token");
  return e;
}

EventBody read_tokens(FieldReader& r) {
  TokensMinted e;
  e.restock_id = r.id("restock_id");
  e.slot = r.integer("slot", 1, kMaxSlot);
  e.tokens = r.token_list("tokens");
  e.physical_count = r.integer("physical_count", 0, kMaxCount);
  return e;
}

// One entry of a snapshot's `slots`; problems are recorded in `outer`.
SlotSnapshot read_slot(Json& object, size_t index, FieldReader& outer) {
  static constexpr std::array<std::string_view, 5> kSlotFields = {
      "slot", "physical_count", "available_tokens", "digest", "tokens"};
  const std::string path = "slots[" + std::to_string(index) + "]";
  if (!object.is_object()) {
    outer.wrong_type(path, "an object");
    return {};
  }
  FieldReader r(object, outer.type_name(), path + ".");
  r.only(kSlotFields);
  SlotSnapshot s;
  s.slot = r.integer("slot", 1, kMaxSlot);
  s.physical_count = r.integer("physical_count", 0, kMaxCount);
  s.available_tokens = r.integer("available_tokens", 0, kMaxCount);
  s.digest = r.hex64("digest");
  if (r.has("tokens")) s.tokens = r.token_list("tokens");
  if (r.failed()) outer.fail(r.take_error());
  return s;
}

// `part` and `parts`: both absent (1 of 1) or both present with
// 2 <= parts <= kMaxSnapshotParts and 1 <= part <= parts.
void read_snapshot_part(FieldReader& r, Snapshot& e) {
  const bool has_part = r.has("part");
  if (has_part != r.has("parts")) {
    r.fail(Error{kErrMissingField, std::string("missing field '") + (has_part ? "parts" : "part") +
                                       "' in snapshot (part and parts go together)"});
    return;
  }
  if (!has_part) return;
  e.parts = r.integer("parts", 2, kMaxSnapshotParts);
  e.part = r.integer("part", 1, kMaxSnapshotParts);
  if (!r.failed() && e.part > e.parts) r.out_of_range("part", "must be at most parts");
}

EventBody read_snapshot(FieldReader& r) {
  Snapshot e;
  e.request_id = r.id_or_empty("request_id");
  Json* slots = r.array("slots");
  if (slots != nullptr && slots->size() > static_cast<size_t>(kMaxSlot)) {
    r.out_of_range("slots", "must have at most " + std::to_string(kMaxSlot) + " entries");
  }
  std::bitset<kMaxSlot + 1> seen;
  for (size_t i = 0; slots != nullptr && i < slots->size() && !r.failed(); ++i) {
    SlotSnapshot slot = read_slot((*slots)[i], i, r);
    if (r.failed()) break;
    if (seen.test(slot.slot)) {
      r.out_of_range("slots[" + std::to_string(i) + "].slot",
                     "repeats slot " + std::to_string(slot.slot));
      break;
    }
    seen.set(slot.slot);
    e.slots.push_back(std::move(slot));
  }
  e.outbox_depth = r.uint64_in("outbox_depth", 0);
  read_snapshot_part(r, e);
  return e;
}

EventBody read_fault(FieldReader& r) {
  Fault e;
  e.code = r.id("code");
  e.message = r.text("message");
  e.slot = r.integer("slot", 0, kMaxSlot);
  return e;
}

// ---- Message types --------------------------------------------------------

template <typename Body>
struct MessageType {
  std::string_view name;
  Names fields;  // besides kBaseFields / kEnvelopeFields
  Body (*read)(FieldReader&);
};

constexpr std::array<std::string_view, 8> kDispenseFields = {
    "device",        "order_id",  "slot",       "token",
    "expires_at_ms", "ledger_id", "ledger_seq", "ledger_mac"};
constexpr std::array<std::string_view, 4> kRestockFields = {"device", "restock_id", "slot",
                                                            "count"};
constexpr std::array<std::string_view, 3> kSnapshotRequestFields = {"device", "request_id", "full"};
constexpr std::array<std::string_view, 4> kAckFields = {"device", "upto_seq", "ledger_id",
                                                        "upto_mac"};
constexpr std::array<std::string_view, 3> kResendFields = {"device", "from_seq", "ledger_id"};
constexpr std::array<std::string_view, 1> kStatusRequestFields = {"device"};
constexpr std::array<std::string_view, 7> kUpdateFields = {
    "device", "update_id", "version", "url", "size_bytes", "sha256", "signature"};
constexpr std::array<std::string_view, 4> kUpdateStatusFields = {"update_id", "state", "version",
                                                                 "reason"};
constexpr std::array<std::string_view, 2> kEventsUnavailableFields = {"from_seq", "oldest_seq"};
constexpr std::array<std::string_view, 6> kDispenseResultFields = {
    "order_id", "slot", "token", "status", "reason", "token_consumed"};
constexpr std::array<std::string_view, 3> kDispenseStartedFields = {"order_id", "slot", "token"};
constexpr std::array<std::string_view, 4> kTokensFields = {"restock_id", "slot", "tokens",
                                                           "physical_count"};
constexpr std::array<std::string_view, 5> kSnapshotFields = {"request_id", "slots", "outbox_depth",
                                                             "part", "parts"};
constexpr std::array<std::string_view, 3> kFaultFields = {"code", "message", "slot"};
constexpr std::array<std::string_view, 4> kStatusFields = {"device", "boot_id", "state", "ts_ms"};

constexpr std::array<MessageType<Command>, 7> kCommandTypes = {{
    {"dispense", kDispenseFields, read_dispense},
    {"restock", kRestockFields, read_restock},
    {"snapshot_request", kSnapshotRequestFields, read_snapshot_request},
    {"ack", kAckFields, read_ack},
    {"resend", kResendFields, read_resend},
    {"status_request", kStatusRequestFields, read_status_request},
    {"update", kUpdateFields, read_update},
}};

constexpr std::array<MessageType<EventBody>, 7> kEventTypes = {{
    {"dispense_result", kDispenseResultFields, read_dispense_result},
    {"tokens", kTokensFields, read_tokens},
    {"snapshot", kSnapshotFields, read_snapshot},
    {"fault", kFaultFields, read_fault},
    {"events_unavailable", kEventsUnavailableFields, read_events_unavailable},
    {"dispense_started", kDispenseStartedFields, read_dispense_started},
    {"update_status", kUpdateStatusFields, read_update_status},
}};

// ---- Decoding -------------------------------------------------------------

// `v` is an integer in 1..max_version; `version` (when given) receives it.
std::optional<Error> check_version(const Json& object, int max_version, int* version) {
  auto it = object.find("v");
  if (it == object.end()) return Error{kErrMissingField, "missing field 'v'"};
  if (!it->is_number_integer()) return Error{kErrWrongType, "field 'v' must be an integer"};
  uint64_t v = it->is_number_unsigned() ? it->get<uint64_t>() : 0;
  if (v < 1 || v > static_cast<uint64_t>(max_version)) {
    return Error{kErrBadVersion,
                 "field 'v' is " + it->dump() + ", only " +
                     (max_version == 1 ? std::string("1") : "1.." + std::to_string(max_version)) +
                     " is supported"};
  }
  if (version != nullptr) *version = static_cast<int>(v);
  return std::nullopt;
}

// Size, JSON syntax, object, version: what every message shares.
std::optional<Error> parse_message(std::string_view payload, Json& object,
                                   int max_version = kVersion, int* version = nullptr) {
  if (payload.size() > kMaxPayloadBytes) {
    return Error{kErrOversize, "payload of " + std::to_string(payload.size()) + " bytes exceeds " +
                                   std::to_string(kMaxPayloadBytes)};
  }
  if (auto problem = json::parse_strict(payload, object)) {
    return Error{kErrBadJson, std::move(problem->message)};
  }
  if (!object.is_object()) return Error{kErrBadJson, "payload is not a JSON object"};
  return check_version(object, max_version, version);
}

// The canonical JSON of a parsed message: every field but "mac", dumped
// before a FieldReader moves the strings out. Once the strict reader accepts
// the object, it holds exactly the fields encode_canonical() writes, with the
// same values, and dump() sorts keys like it — fuzz_decode checks that the
// two agree. Rebuilding it from the decoded struct would construct the whole
// tree again, and the agent decodes every event of the fleet.
std::string canonical_without_mac(Json& object) {
  auto it = object.find("mac");
  if (it == object.end()) return object.dump(-1, ' ', false, Json::error_handler_t::replace);
  Json mac = std::move(*it);
  object.erase(it);
  std::string out = object.dump(-1, ' ', false, Json::error_handler_t::replace);
  object["mac"] = std::move(mac);
  return out;
}

// The `type` field, as a string (not yet checked against a list).
Result<std::string_view> read_type(const Json& object, std::string_view kind) {
  auto it = object.find("type");
  if (it == object.end())
    return Error{kErrMissingField, "missing field 'type' in " + std::string(kind)};
  if (!it->is_string()) return Error{kErrWrongType, "field 'type' must be a string"};
  return std::string_view(it->get_ref<const std::string&>());
}

template <typename Body, size_t N>
Result<const MessageType<Body>*> find_type(const Json& object,
                                           const std::array<MessageType<Body>, N>& types,
                                           std::string_view kind) {
  auto name = read_type(object, kind);
  if (!name.ok()) return name.error();
  for (const MessageType<Body>& type : types) {
    if (type.name == *name) return &type;
  }
  return Error{kErrUnknownType,
               "unknown " + std::string(kind) + " type '" + printable(*name) + "'"};
}

Result<Decoded<Command>> decode_command_unguarded(std::string_view payload) {
  Json object;
  int version = 1;
  if (auto error = parse_message(payload, object, kCommandVersion, &version)) {
    return *std::move(error);
  }
  auto type = find_type(object, kCommandTypes, "command");
  if (!type.ok()) return type.error();
  if (version < 2 && (*type)->name == "update") {
    return Error{kErrBadVersion, "field 'v' is 1, an update command exists only in v2"};
  }
  std::string canonical = canonical_without_mac(object);
  FieldReader r(object, (*type)->name);
  if (version >= 2) {
    r.only(kCommandV2Fields, (*type)->fields);
  } else {
    r.only(kBaseFields, (*type)->fields);
  }
  std::string mac = r.hex64("mac");
  Command command = (*type)->read(r);
  std::visit(
      [&](auto& c) {
        c.v = version;
        if (version >= 2 && !std::is_same_v<std::decay_t<decltype(c)>, DispenseCommand>) {
          c.expires_at_ms = r.int64_in("expires_at_ms", 1, kInt64Max);
        }
      },
      command);
  if (r.failed()) return r.take_error();
  return Decoded<Command>{std::move(command), std::move(mac), std::move(canonical)};
}

Result<Decoded<DeviceEvent>> decode_event_unguarded(std::string_view payload) {
  Json object;
  if (auto error = parse_message(payload, object)) return *std::move(error);
  auto type = find_type(object, kEventTypes, "event");
  if (!type.ok()) return type.error();
  std::string canonical = canonical_without_mac(object);
  FieldReader r(object, (*type)->name);
  r.only(kEnvelopeFields, (*type)->fields);
  std::string mac = r.hex64("mac");
  DeviceEvent event;
  event.device = r.id("device");
  event.seq = r.uint64_in("seq", 1);
  event.boot_id = r.token("boot_id");
  event.ts_ms = r.int64_in("ts_ms", 0, kInt64Max);
  if (r.has("ledger_id")) event.ledger_id = r.token("ledger_id");
  event.body = (*type)->read(r);
  if (r.failed()) return r.take_error();
  return Decoded<DeviceEvent>{std::move(event), std::move(mac), std::move(canonical)};
}

Result<Decoded<PresenceStatus>> decode_status_unguarded(std::string_view payload) {
  Json object;
  if (auto error = parse_message(payload, object)) return *std::move(error);
  auto name = read_type(object, "status");
  if (!name.ok()) return name.error();
  if (*name != "status") {
    return Error{kErrUnknownType, "unknown status type '" + printable(*name) + "'"};
  }
  std::string canonical = canonical_without_mac(object);
  FieldReader r(object, "status");
  r.only(kBaseFields, kStatusFields);
  std::string mac = r.hex64("mac");
  PresenceStatus status;
  status.device = r.id("device");
  status.boot_id = r.token("boot_id");
  const std::string state = r.text("state");
  if (!r.failed() && state != "online" && state != "offline") {
    r.out_of_range("state", "must be online or offline");
  }
  status.online = state == "online";
  status.ts_ms = r.int64_in("ts_ms", 0, kInt64Max);
  if (r.failed()) return r.take_error();
  return Decoded<PresenceStatus>{std::move(status), std::move(mac), std::move(canonical)};
}

// Malformed input never throws; this catches what is left (allocation
// failure), so no exception leaves a decode function.
template <typename T, typename Decode>
Result<T> guarded(Decode decode, std::string_view payload) {
  try {
    return decode(payload);
  } catch (const std::exception& e) {
    return Error{kErrBadJson, std::string("could not decode: ") + e.what()};
  }
}

}  // namespace

Result<Decoded<Command>> decode_command(std::string_view payload) {
  return guarded<Decoded<Command>>(decode_command_unguarded, payload);
}

Result<Decoded<DeviceEvent>> decode_event(std::string_view payload) {
  return guarded<Decoded<DeviceEvent>>(decode_event_unguarded, payload);
}

Result<Decoded<PresenceStatus>> decode_status(std::string_view payload) {
  return guarded<Decoded<PresenceStatus>>(decode_status_unguarded, payload);
}

}  // namespace vend::proto
