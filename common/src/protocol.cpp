// Protocol v1: encoding, names and validators. Decoding lives in
// protocol_decode.cpp.
#include "vend/protocol.hpp"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace vend::proto {

namespace {

using Json = nlohmann::json;

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

bool is_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

Json message_base(const char* type, int version = kVersion) {
  Json j = Json::object();
  j["v"] = version;
  j["type"] = type;
  return j;
}

// The canonical text: sorted keys (nlohmann's std::map order, i.e. byte
// order), no whitespace. Invalid UTF-8 in a string is replaced rather than
// thrown on: encoding never fails, and decoded strings are always valid.
std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json to_json(const SlotSnapshot& s) {
  Json j = Json::object();
  j["slot"] = s.slot;
  j["physical_count"] = s.physical_count;
  j["available_tokens"] = s.available_tokens;
  j["digest"] = s.digest;
  if (s.tokens) j["tokens"] = *s.tokens;
  return j;
}

void add_fields(Json& j, const DispenseCommand& c) {
  j["device"] = c.device;
  j["order_id"] = c.order_id;
  j["slot"] = c.slot;
  j["token"] = c.token;
  j["expires_at_ms"] = c.expires_at_ms;
  if (!c.ledger_id.empty()) {  // together or not at all
    j["ledger_id"] = c.ledger_id;
    j["ledger_seq"] = c.ledger_seq;
    if (!c.ledger_mac.empty()) j["ledger_mac"] = c.ledger_mac;
  }
}

void add_fields(Json& j, const RestockCommand& c) {
  j["device"] = c.device;
  j["restock_id"] = c.restock_id;
  j["slot"] = c.slot;
  j["count"] = c.count;
}

void add_fields(Json& j, const SnapshotRequest& c) {
  j["device"] = c.device;
  j["request_id"] = c.request_id;
  j["full"] = c.full;
}

void add_fields(Json& j, const Ack& c) {
  j["device"] = c.device;
  j["upto_seq"] = c.upto_seq;
  if (!c.ledger_id.empty()) j["ledger_id"] = c.ledger_id;
  if (!c.upto_mac.empty()) j["upto_mac"] = c.upto_mac;
}

void add_fields(Json& j, const ResendRequest& c) {
  j["device"] = c.device;
  j["from_seq"] = c.from_seq;
  if (!c.ledger_id.empty()) j["ledger_id"] = c.ledger_id;
}

void add_fields(Json& j, const StatusRequest& c) { j["device"] = c.device; }

void add_fields(Json& j, const UpdateCommand& c) {
  j["device"] = c.device;
  j["update_id"] = c.update_id;
  j["version"] = c.version;
  j["url"] = c.url;
  j["size_bytes"] = c.size_bytes;
  j["sha256"] = c.sha256;
  j["signature"] = c.signature;
}

void add_fields(Json& j, const UpdateStatus& e) {
  j["update_id"] = e.update_id;
  j["state"] = to_string(e.state);
  j["version"] = e.version;
  j["reason"] = e.reason;
}

void add_fields(Json& j, const EventsUnavailable& e) {
  j["from_seq"] = e.from_seq;
  j["oldest_seq"] = e.oldest_seq;
}

void add_fields(Json& j, const DispenseResult& r) {
  j["order_id"] = r.order_id;
  j["slot"] = r.slot;
  j["token"] = r.token;
  j["status"] = to_string(r.status);
  j["reason"] = r.reason;
  j["token_consumed"] = r.token_consumed;
}

void add_fields(Json& j, const DispenseStarted& s) {
  j["order_id"] = s.order_id;
  j["slot"] = s.slot;
  j["token"] = s.token;
}

void add_fields(Json& j, const TokensMinted& t) {
  j["restock_id"] = t.restock_id;
  j["slot"] = t.slot;
  j["tokens"] = t.tokens;
  j["physical_count"] = t.physical_count;
}

void add_fields(Json& j, const Snapshot& s) {
  j["request_id"] = s.request_id;
  Json slots = Json::array();
  for (const SlotSnapshot& slot : s.slots) slots.push_back(to_json(slot));
  j["slots"] = std::move(slots);
  j["outbox_depth"] = s.outbox_depth;
  if (s.parts != 1) {  // one canonical form: a snapshot in one message has neither field
    j["part"] = s.part;
    j["parts"] = s.parts;
  }
}

void add_fields(Json& j, const Fault& f) {
  j["code"] = f.code;
  j["message"] = f.message;
  j["slot"] = f.slot;
}

Json to_json(const Command& command) {
  int version = command_version(command);
  Json j = message_base(type_name(command), version);
  std::visit([&j](const auto& c) { add_fields(j, c); }, command);
  // v2: every command expires (a dispense carries its expiry in v1 too).
  if (version >= 2) j["expires_at_ms"] = command_expires_at_ms(command);
  return j;
}

Json to_json(const DeviceEvent& event) {
  Json j = message_base(type_name(event.body));
  j["device"] = event.device;
  j["seq"] = event.seq;
  j["boot_id"] = event.boot_id;
  j["ts_ms"] = event.ts_ms;
  if (!event.ledger_id.empty()) j["ledger_id"] = event.ledger_id;
  std::visit([&j](const auto& body) { add_fields(j, body); }, event.body);
  return j;
}

Json to_json(const PresenceStatus& status) {
  Json j = message_base("status");
  j["device"] = status.device;
  j["boot_id"] = status.boot_id;
  j["state"] = status.online ? "online" : "offline";
  j["ts_ms"] = status.ts_ms;
  return j;
}

template <typename Message>
std::string encode_with_mac(const Message& message, std::string_view mac_hex) {
  Json j = to_json(message);
  j["mac"] = mac_hex;
  return dump(j);
}

}  // namespace

const char* to_string(DispenseStatus status) {
  switch (status) {
    case DispenseStatus::kDispensed: return "DISPENSED";
    case DispenseStatus::kFailed: return "FAILED";
    case DispenseStatus::kRejected: return "REJECTED";
    case DispenseStatus::kUncertain: return "UNCERTAIN";
  }
  return "UNKNOWN";
}

std::optional<DispenseStatus> parse_dispense_status(std::string_view text) {
  for (DispenseStatus s : {DispenseStatus::kDispensed, DispenseStatus::kFailed,
                           DispenseStatus::kRejected, DispenseStatus::kUncertain}) {
    if (text == to_string(s)) return s;
  }
  return std::nullopt;
}

const char* to_string(UpdateState state) {
  switch (state) {
    case UpdateState::kDownloading: return "downloading";
    case UpdateState::kVerified: return "verified";
    case UpdateState::kInstalling: return "installing";
    case UpdateState::kInstalled: return "installed";
    case UpdateState::kFailed: return "failed";
    case UpdateState::kRolledBack: return "rolled_back";
  }
  return "unknown";
}

std::optional<UpdateState> parse_update_state(std::string_view text) {
  for (UpdateState s : {UpdateState::kDownloading, UpdateState::kVerified, UpdateState::kInstalling,
                        UpdateState::kInstalled, UpdateState::kFailed, UpdateState::kRolledBack}) {
    if (text == to_string(s)) return s;
  }
  return std::nullopt;
}

std::string encode_canonical(const Command& command) { return dump(to_json(command)); }
std::string encode_canonical(const DeviceEvent& event) { return dump(to_json(event)); }
std::string encode_canonical(const PresenceStatus& status) { return dump(to_json(status)); }

std::string encode(const Command& command, std::string_view mac_hex) {
  return encode_with_mac(command, mac_hex);
}
std::string encode(const DeviceEvent& event, std::string_view mac_hex) {
  return encode_with_mac(event, mac_hex);
}
std::string encode(const PresenceStatus& status, std::string_view mac_hex) {
  return encode_with_mac(status, mac_hex);
}

int command_version(const Command& command) {
  return std::visit([](const auto& c) { return c.v; }, command);
}

int64_t command_expires_at_ms(const Command& command) {
  return std::visit([](const auto& c) { return c.expires_at_ms; }, command);
}

const std::string& command_device(const Command& command) {
  return std::visit([](const auto& c) -> const std::string& { return c.device; }, command);
}

const char* type_name(const Command& command) {
  return std::visit(Overloaded{
                        [](const DispenseCommand&) { return "dispense"; },
                        [](const RestockCommand&) { return "restock"; },
                        [](const SnapshotRequest&) { return "snapshot_request"; },
                        [](const Ack&) { return "ack"; },
                        [](const ResendRequest&) { return "resend"; },
                        [](const StatusRequest&) { return "status_request"; },
                        [](const UpdateCommand&) { return "update"; },
                    },
                    command);
}

const char* type_name(const EventBody& body) {
  return std::visit(Overloaded{
                        [](const DispenseResult&) { return "dispense_result"; },
                        [](const TokensMinted&) { return "tokens"; },
                        [](const Snapshot&) { return "snapshot"; },
                        [](const Fault&) { return "fault"; },
                        [](const EventsUnavailable&) { return "events_unavailable"; },
                        [](const DispenseStarted&) { return "dispense_started"; },
                        [](const UpdateStatus&) { return "update_status"; },
                    },
                    body);
}

bool is_valid_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxIdLength) return false;
  for (char c : id) {
    if (!is_id_char(c)) return false;
  }
  return true;
}

bool is_valid_token(std::string_view token) {
  if (token.size() != 32) return false;
  for (char c : token) {
    if (!is_lower_hex(c)) return false;
  }
  return true;
}

namespace {

// The numbers of a valid version, most significant first.
std::vector<uint64_t> version_numbers(std::string_view version) {
  std::vector<uint64_t> out;
  uint64_t n = 0;
  for (char c : version) {
    if (c == '.') {
      out.push_back(n);
      n = 0;
    } else {
      n = n * 10 + static_cast<uint64_t>(c - '0');
    }
  }
  out.push_back(n);
  return out;
}

}  // namespace

bool is_valid_version(std::string_view version) {
  if (version.empty() || version.size() > kMaxVersionLength) return false;
  int parts = 1;
  size_t digits = 0;
  for (char c : version) {
    if (c == '.') {
      if (digits == 0) return false;
      ++parts;
      digits = 0;
    } else if (c >= '0' && c <= '9') {
      if (++digits > 9) return false;
    } else {
      return false;
    }
  }
  return digits > 0 && parts <= 4;
}

bool is_valid_update_url(std::string_view url) {
  if (url.size() > kMaxUrlLength) return false;
  for (std::string_view scheme : {"http://", "https://"}) {
    if (url.size() > scheme.size() && url.substr(0, scheme.size()) == scheme) {
      return url.find_first_of(" \"<>\\^`{|}") == std::string_view::npos;
    }
  }
  return false;
}

int compare_versions(std::string_view a, std::string_view b) {
  std::vector<uint64_t> x = version_numbers(a);
  std::vector<uint64_t> y = version_numbers(b);
  size_t n = std::max(x.size(), y.size());
  x.resize(n, 0);
  y.resize(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  }
  return 0;
}

}  // namespace vend::proto
