// Strict decoding: a table of malformed messages, each rejected with the
// expected error code and a message naming the offending field. One row (at
// least) per rule of docs/protocol.md "Decoding rules".
#include <doctest/doctest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "protocol_examples.hpp"
#include "vend/protocol.hpp"

namespace vend::proto {
namespace {

using nlohmann::json;
using namespace examples;  // NOLINT: the example messages are the test's vocabulary

enum class Decoder { kCommand, kEvent, kStatus };
constexpr Decoder kCmd = Decoder::kCommand;
constexpr Decoder kEvt = Decoder::kEvent;
constexpr Decoder kSts = Decoder::kStatus;

struct Case {
  std::string what;
  Decoder decoder;
  std::string payload;
  std::string code;
  std::string needle;  // must appear in the error message
};

std::optional<Error> decode_error(Decoder decoder, std::string_view payload) {
  switch (decoder) {
    case Decoder::kCommand: {
      auto r = decode_command(payload);
      return r.ok() ? std::nullopt : std::optional<Error>(r.error());
    }
    case Decoder::kEvent: {
      auto r = decode_event(payload);
      return r.ok() ? std::nullopt : std::optional<Error>(r.error());
    }
    case Decoder::kStatus: {
      auto r = decode_status(payload);
      return r.ok() ? std::nullopt : std::optional<Error>(r.error());
    }
  }
  return std::nullopt;
}

// Wire forms of the examples, and edits of them.
std::string wire(const Command& c) { return encode(c, kMac); }
std::string wire(const DeviceEvent& e) { return encode(e, kMac); }
std::string edit(const std::string& payload, const std::function<void(json&)>& change) {
  json j = json::parse(payload);
  change(j);
  return j.dump();
}
std::string with(const std::string& payload, const std::string& key, json value) {
  return edit(payload, [&](json& j) { j[key] = std::move(value); });
}
std::string without(const std::string& payload, const std::string& key) {
  return edit(payload, [&](json& j) { j.erase(key); });
}
// Replaces the first `from` in the text (for number spellings json can't build).
std::string replaced(std::string payload, const std::string& from, const std::string& to) {
  const size_t at = payload.find(from);
  REQUIRE(at != std::string::npos);
  return payload.replace(at, from.size(), to);
}

std::vector<std::string> hex_tokens(size_t n) {
  std::vector<std::string> tokens;
  for (size_t i = 0; i < n; ++i) {
    char buf[33];
    std::snprintf(buf, sizeof buf, "%032zx", i);
    tokens.emplace_back(buf);
  }
  return tokens;
}

std::vector<Case> envelope_cases() {
  const std::string d = wire(Command{dispense()});
  return {
      {"oversize", kCmd, std::string(kMaxPayloadBytes + 1, ' '), kErrOversize, "bytes"},
      {"oversize even if valid", kCmd,
       replaced(d, "\"ord-7f3a\"", "\"" + std::string(kMaxPayloadBytes, 'o') + "\""), kErrOversize,
       "262144"},
      {"empty", kCmd, "", kErrBadJson, "JSON"},
      {"truncated", kCmd, d.substr(0, d.size() - 1), kErrBadJson, "JSON"},
      {"trailing garbage", kCmd, d + "x", kErrBadJson, "JSON"},
      {"two objects", kCmd, d + d, kErrBadJson, "JSON"},
      {"trailing comma", kCmd, replaced(d, "}", ",}"), kErrBadJson, "JSON"},
      {"array", kCmd, "[" + d + "]", kErrBadJson, "object"},
      {"string", kCmd, "\"dispense\"", kErrBadJson, "object"},
      {"invalid utf-8", kCmd, replaced(d, "ord-7f3a", "ord-\xff"), kErrBadJson, "JSON"},
      {"duplicate key", kCmd, replaced(d, "\"slot\":12", "\"slot\":12,\"slot\":13"), kErrBadJson,
       "'slot'"},
      {"deep nesting", kCmd, std::string(100000, '[') + std::string(100000, ']'), kErrBadJson,
       "nesting too deep"},
      {"deep nesting in a field", kCmd, with(d, "x", json::parse("[[[[[[[[[[1]]]]]]]]]]")),
       kErrBadJson, "nesting too deep"},
      {"v missing", kCmd, without(d, "v"), kErrMissingField, "'v'"},
      {"v 3", kCmd, with(d, "v", 3), kErrBadVersion, "'v'"},
      {"v 0", kCmd, with(d, "v", 0), kErrBadVersion, "'v'"},
      {"v -1", kCmd, with(d, "v", -1), kErrBadVersion, "'v'"},
      {"v string", kCmd, with(d, "v", "1"), kErrWrongType, "'v'"},
      {"v float", kCmd, replaced(d, "\"v\":2", "\"v\":2.0"), kErrWrongType, "'v'"},
      {"v bool", kCmd, with(d, "v", true), kErrWrongType, "'v'"},
      {"type missing", kCmd, without(d, "type"), kErrMissingField, "'type'"},
      {"type number", kCmd, with(d, "type", 1), kErrWrongType, "'type'"},
      {"type unknown", kCmd, with(d, "type", "explode"), kErrUnknownType, "'explode'"},
      {"event type as command", kCmd, with(d, "type", "fault"), kErrUnknownType, "'fault'"},
      {"unknown field", kCmd, with(d, "extra", 1), kErrUnknownField, "'extra'"},
      {"mac missing", kCmd, without(d, "mac"), kErrMissingField, "'mac'"},
      {"mac upper case", kCmd, with(d, "mac", std::string(64, 'A')), kErrOutOfRange, "'mac'"},
      {"mac short", kCmd, with(d, "mac", std::string(63, 'a')), kErrOutOfRange, "'mac'"},
      {"mac not hex", kCmd, with(d, "mac", std::string(64, 'g')), kErrOutOfRange, "'mac'"},
      {"mac number", kCmd, with(d, "mac", 5), kErrWrongType, "'mac'"},
      {"mac null", kCmd, with(d, "mac", nullptr), kErrWrongType, "'mac'"},
  };
}

std::vector<Case> command_cases() {
  const std::string d = wire(Command{dispense()});
  const std::string r = wire(Command{restock()});
  const std::string s = wire(Command{snapshot_request()});
  const std::string a = wire(Command{ack()});
  const std::string rs = wire(Command{resend()});
  return {
      {"device missing", kCmd, without(d, "device"), kErrMissingField, "'device'"},
      {"device empty", kCmd, with(d, "device", ""), kErrOutOfRange, "'device'"},
      {"device with /", kCmd, with(d, "device", "vm/1"), kErrOutOfRange, "'device'"},
      {"device with +", kCmd, with(d, "device", "+"), kErrOutOfRange, "'device'"},
      {"device with #", kCmd, with(d, "device", "#"), kErrOutOfRange, "'device'"},
      {"device too long", kCmd, with(d, "device", std::string(65, 'd')), kErrOutOfRange,
       "'device'"},
      {"device number", kCmd, with(d, "device", 42), kErrWrongType, "'device'"},
      {"order_id with space", kCmd, with(d, "order_id", "ord 1"), kErrOutOfRange, "'order_id'"},
      {"order_id missing", kCmd, without(d, "order_id"), kErrMissingField, "'order_id'"},
      {"slot 0", kCmd, with(d, "slot", 0), kErrOutOfRange, "'slot'"},
      {"slot 256", kCmd, with(d, "slot", 256), kErrOutOfRange, "'slot'"},
      {"slot negative", kCmd, with(d, "slot", -1), kErrOutOfRange, "'slot'"},
      {"slot string", kCmd, with(d, "slot", "12"), kErrWrongType, "'slot'"},
      {"slot bool", kCmd, with(d, "slot", true), kErrWrongType, "'slot'"},
      {"slot float", kCmd, with(d, "slot", 12.5), kErrWrongType, "'slot'"},
      {"slot 12.0", kCmd, replaced(d, "\"slot\":12", "\"slot\":12.0"), kErrWrongType, "'slot'"},
      {"slot 1e1", kCmd, replaced(d, "\"slot\":12", "\"slot\":1e1"), kErrWrongType, "'slot'"},
      {"slot beyond uint64", kCmd, replaced(d, "\"slot\":12", "\"slot\":18446744073709551616"),
       kErrWrongType, "'slot'"},
      {"slot 2^64-1", kCmd, replaced(d, "\"slot\":12", "\"slot\":18446744073709551615"),
       kErrOutOfRange, "'slot'"},
      {"slot null", kCmd, with(d, "slot", nullptr), kErrWrongType, "'slot'"},
      {"token upper case", kCmd, with(d, "token", "0123456789ABCDEF0123456789ABCDEF"),
       kErrOutOfRange, "'token'"},
      {"token 31 chars", kCmd, with(d, "token", std::string(31, 'a')), kErrOutOfRange, "'token'"},
      {"token array", kCmd, with(d, "token", json::array()), kErrWrongType, "'token'"},
      {"expires_at_ms 0", kCmd, with(d, "expires_at_ms", 0), kErrOutOfRange, "'expires_at_ms'"},
      {"expires_at_ms negative", kCmd, with(d, "expires_at_ms", -5), kErrOutOfRange,
       "'expires_at_ms'"},
      {"expires_at_ms 2^63", kCmd, with(d, "expires_at_ms", 9223372036854775808ULL), kErrOutOfRange,
       "'expires_at_ms'"},
      {"expires_at_ms float", kCmd, with(d, "expires_at_ms", 1.7e12), kErrWrongType,
       "'expires_at_ms'"},
      {"dispense unknown field", kCmd, with(d, "count", 1), kErrUnknownField, "'count'"},
      {"restock count 0", kCmd, with(r, "count", 0), kErrOutOfRange, "'count'"},
      {"restock count 1001", kCmd, with(r, "count", 1001), kErrOutOfRange, "'count'"},
      {"restock count missing", kCmd, without(r, "count"), kErrMissingField, "'count'"},
      {"restock_id bad", kCmd, with(r, "restock_id", "r!"), kErrOutOfRange, "'restock_id'"},
      {"restock slot 0", kCmd, with(r, "slot", 0), kErrOutOfRange, "'slot'"},
      {"snapshot_request full int", kCmd, with(s, "full", 1), kErrWrongType, "'full'"},
      {"snapshot_request full missing", kCmd, without(s, "full"), kErrMissingField, "'full'"},
      {"snapshot_request id empty", kCmd, with(s, "request_id", ""), kErrOutOfRange,
       "'request_id'"},
      {"ack upto_seq negative", kCmd, with(a, "upto_seq", -1), kErrOutOfRange, "'upto_seq'"},
      {"ack upto_seq float", kCmd, with(a, "upto_seq", 1.5), kErrWrongType, "'upto_seq'"},
      {"ack upto_seq string", kCmd, with(a, "upto_seq", "1"), kErrWrongType, "'upto_seq'"},
      {"ack upto_seq missing", kCmd, without(a, "upto_seq"), kErrMissingField, "'upto_seq'"},
      {"ack with slot", kCmd, with(a, "slot", 1), kErrUnknownField, "'slot'"},
      {"resend from_seq 0", kCmd, with(rs, "from_seq", 0), kErrOutOfRange, "'from_seq'"},
      {"resend from_seq float", kCmd, with(rs, "from_seq", 2.0), kErrWrongType, "'from_seq'"},
      {"resend from_seq missing", kCmd, without(rs, "from_seq"), kErrMissingField, "'from_seq'"},
      {"resend with upto_seq", kCmd, with(rs, "upto_seq", 1), kErrUnknownField, "'upto_seq'"},
      // v2: every command expires; v1 ones (but a dispense) carry no expiry.
      {"v2 ack expiry missing", kCmd, without(a, "expires_at_ms"), kErrMissingField,
       "'expires_at_ms'"},
      {"v2 snapshot_request expiry missing", kCmd, without(s, "expires_at_ms"), kErrMissingField,
       "'expires_at_ms'"},
      {"v2 restock expiry 0", kCmd, with(r, "expires_at_ms", 0), kErrOutOfRange, "'expires_at_ms'"},
      {"v2 status_request expiry string", kCmd,
       with(wire(Command{status_request()}), "expires_at_ms", "1"), kErrWrongType,
       "'expires_at_ms'"},
      {"v1 snapshot_request with expiry", kCmd, with(s, "v", 1), kErrUnknownField,
       "'expires_at_ms'"},
      {"v1 dispense expiry missing", kCmd, with(without(d, "expires_at_ms"), "v", 1),
       kErrMissingField, "'expires_at_ms'"},
      {"status_request device missing", kCmd, without(wire(Command{status_request()}), "device"),
       kErrMissingField, "'device'"},
      {"status_request with state", kCmd, with(wire(Command{status_request()}), "state", "online"),
       kErrUnknownField, "'state'"},
  };
}

std::vector<Case> event_cases() {
  const std::string dr = wire(dispense_result());
  const std::string t = wire(tokens_minted());
  const std::string f = wire(fault());
  const std::string eu = wire(events_unavailable());
  return {
      {"command type as event", kEvt, wire(Command{as_v1(ack())}), kErrUnknownType, "'ack'"},
      {"resend as event", kEvt, wire(Command{as_v1(resend())}), kErrUnknownType, "'resend'"},
      {"v2 command as event", kEvt, wire(Command{ack()}), kErrBadVersion, "'v'"},
      {"events_unavailable oldest = from", kEvt, with(eu, "oldest_seq", 42), kErrOutOfRange,
       "'oldest_seq'"},
      {"events_unavailable from_seq 0", kEvt, with(eu, "from_seq", 0), kErrOutOfRange,
       "'from_seq'"},
      {"events_unavailable oldest missing", kEvt, without(eu, "oldest_seq"), kErrMissingField,
       "'oldest_seq'"},
      {"events_unavailable with slot", kEvt, with(eu, "slot", 1), kErrUnknownField, "'slot'"},
      {"seq 0", kEvt, with(dr, "seq", 0), kErrOutOfRange, "'seq'"},
      {"seq negative", kEvt, with(dr, "seq", -1), kErrOutOfRange, "'seq'"},
      {"seq missing", kEvt, without(dr, "seq"), kErrMissingField, "'seq'"},
      {"seq bool", kEvt, with(dr, "seq", true), kErrWrongType, "'seq'"},
      {"boot_id bad", kEvt, with(dr, "boot_id", "boot-1"), kErrOutOfRange, "'boot_id'"},
      {"boot_id missing", kEvt, without(dr, "boot_id"), kErrMissingField, "'boot_id'"},
      {"ts_ms negative", kEvt, with(dr, "ts_ms", -1), kErrOutOfRange, "'ts_ms'"},
      {"ts_ms missing", kEvt, without(dr, "ts_ms"), kErrMissingField, "'ts_ms'"},
      {"device in event bad", kEvt, with(dr, "device", "a b"), kErrOutOfRange, "'device'"},
      {"status unknown", kEvt, with(dr, "status", "OK"), kErrOutOfRange, "'status'"},
      {"status lower case", kEvt, with(dr, "status", "dispensed"), kErrOutOfRange, "'status'"},
      {"status number", kEvt, with(dr, "status", 0), kErrWrongType, "'status'"},
      {"reason too long", kEvt, with(dr, "reason", std::string(kMaxTextLength + 1, 'r')),
       kErrOutOfRange, "'reason'"},
      {"reason missing", kEvt, without(dr, "reason"), kErrMissingField, "'reason'"},
      {"token_consumed string", kEvt, with(dr, "token_consumed", "yes"), kErrWrongType,
       "'token_consumed'"},
      {"token_consumed int", kEvt, with(dr, "token_consumed", 1), kErrWrongType,
       "'token_consumed'"},
      {"result token bad", kEvt, with(dr, "token", "x"), kErrOutOfRange, "'token'"},
      {"result slot 256", kEvt, with(dr, "slot", 256), kErrOutOfRange, "'slot'"},
      {"result unknown field", kEvt, with(dr, "tokens", json::array()), kErrUnknownField,
       "'tokens'"},
      {"tokens not array", kEvt, with(t, "tokens", kToken), kErrWrongType, "'tokens'"},
      {"tokens too many", kEvt, with(t, "tokens", hex_tokens(kMaxTokensPerMessage + 1)),
       kErrOutOfRange, "'tokens'"},
      {"tokens bad entry", kEvt, with(t, "tokens", json::array({kToken, "nope"})), kErrOutOfRange,
       "'tokens[1]'"},
      {"tokens non-string entry", kEvt, with(t, "tokens", json::array({1})), kErrWrongType,
       "'tokens[0]'"},
      {"tokens repeated", kEvt, with(t, "tokens", json::array({kToken, kToken})), kErrOutOfRange,
       "'tokens'"},
      {"physical_count negative", kEvt, with(t, "physical_count", -1), kErrOutOfRange,
       "'physical_count'"},
      {"physical_count too big", kEvt, with(t, "physical_count", 100001), kErrOutOfRange,
       "'physical_count'"},
      {"fault code bad", kEvt, with(f, "code", "no spaces"), kErrOutOfRange, "'code'"},
      {"fault message too long", kEvt, with(f, "message", std::string(kMaxTextLength + 1, 'm')),
       kErrOutOfRange, "'message'"},
      {"fault slot 256", kEvt, with(f, "slot", 256), kErrOutOfRange, "'slot'"},
      {"fault slot negative", kEvt, with(f, "slot", -1), kErrOutOfRange, "'slot'"},
  };
}

std::vector<Case> snapshot_cases() {
  const std::string s = wire(full_snapshot());
  json slot = json::parse(s)["slots"][0];
  json many = json::array();
  for (int i = 1; i <= kMaxSlot + 1; ++i) {
    slot["slot"] = i;
    many.push_back(slot);
  }
  auto slot0 = [&](const std::string& key, json value) {
    return edit(s, [&](json& j) { j["slots"][0][key] = value; });
  };
  return {
      {"request_id bad", kEvt, with(s, "request_id", "a/b"), kErrOutOfRange, "'request_id'"},
      {"slots not array", kEvt, with(s, "slots", json::object()), kErrWrongType, "'slots'"},
      {"slots too many", kEvt, with(s, "slots", many), kErrOutOfRange, "'slots'"},
      {"slot entry not object", kEvt, with(s, "slots", json::array({1})), kErrWrongType,
       "'slots[0]'"},
      {"slot repeated", kEvt, edit(s, [](json& j) { j["slots"][1]["slot"] = 3; }), kErrOutOfRange,
       "'slots[1].slot'"},
      {"slot number 0", kEvt, slot0("slot", 0), kErrOutOfRange, "'slots[0].slot'"},
      {"slot digest bad", kEvt, slot0("digest", "abc"), kErrOutOfRange, "'slots[0].digest'"},
      {"slot digest missing", kEvt, edit(s, [](json& j) { j["slots"][1].erase("digest"); }),
       kErrMissingField, "'slots[1].digest'"},
      {"slot unknown field", kEvt, slot0("extra", 1), kErrUnknownField, "'slots[0].extra'"},
      {"available_tokens too big", kEvt, slot0("available_tokens", 100001), kErrOutOfRange,
       "'slots[0].available_tokens'"},
      {"available_tokens negative", kEvt, slot0("available_tokens", -1), kErrOutOfRange,
       "'slots[0].available_tokens'"},
      {"slot physical_count negative", kEvt, slot0("physical_count", -1), kErrOutOfRange,
       "'slots[0].physical_count'"},
      {"slot tokens bad entry", kEvt, slot0("tokens", json::array({"zz"})), kErrOutOfRange,
       "'slots[0].tokens[0]'"},
      {"slot tokens null", kEvt, slot0("tokens", nullptr), kErrWrongType, "'slots[0].tokens'"},
      {"outbox_depth negative", kEvt, with(s, "outbox_depth", -1), kErrOutOfRange,
       "'outbox_depth'"},
      {"outbox_depth missing", kEvt, without(s, "outbox_depth"), kErrMissingField,
       "'outbox_depth'"},
  };
}

std::vector<Case> status_cases() {
  const std::string st = encode(online(), kMac);
  return {
      {"state unknown", kSts, with(st, "state", "away"), kErrOutOfRange, "'state'"},
      {"state bool", kSts, with(st, "state", true), kErrWrongType, "'state'"},
      {"state missing", kSts, without(st, "state"), kErrMissingField, "'state'"},
      {"online bool field", kSts, with(st, "online", true), kErrUnknownField, "'online'"},
      {"boot_id missing", kSts, without(st, "boot_id"), kErrMissingField, "'boot_id'"},
      {"boot_id bad", kSts, with(st, "boot_id", std::string(32, 'G')), kErrOutOfRange, "'boot_id'"},
      {"ts_ms negative", kSts, with(st, "ts_ms", -1), kErrOutOfRange, "'ts_ms'"},
      {"type not status", kSts, with(st, "type", "dispense"), kErrUnknownType, "'dispense'"},
      {"mac missing", kSts, without(st, "mac"), kErrMissingField, "'mac'"},
      {"v 2", kSts, with(st, "v", 2), kErrBadVersion, "'v'"},
  };
}

void check_rejected(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    CAPTURE(c.what);
    auto error = decode_error(c.decoder, c.payload);
    REQUIRE_MESSAGE(error.has_value(), c.what << ": accepted");
    CHECK(error->code == c.code);
    CHECK_MESSAGE(error->message.find(c.needle) != std::string::npos,
                  error->message << " does not name " << c.needle);
  }
}

TEST_CASE("malformed envelopes are rejected naming the problem") {
  check_rejected(envelope_cases());
}
TEST_CASE("malformed commands are rejected naming the field") { check_rejected(command_cases()); }
TEST_CASE("malformed events are rejected naming the field") { check_rejected(event_cases()); }
TEST_CASE("malformed snapshots are rejected naming the field") { check_rejected(snapshot_cases()); }
TEST_CASE("malformed statuses are rejected naming the field") { check_rejected(status_cases()); }

TEST_CASE("edge values that look odd are accepted") {
  CHECK(decode_command(with(wire(Command{ack()}), "upto_seq", 0)).ok());
  CHECK(decode_event(with(wire(fault()), "slot", 0)).ok());
  CHECK(decode_event(with(wire(full_snapshot()), "request_id", "")).ok());
  CHECK(decode_event(with(wire(fault()), "message", "")).ok());
  CHECK(decode_event(with(wire(tokens_minted()), "tokens", json::array())).ok());
  CHECK(decode_event(replaced(wire(fault()), "\"ts_ms\":1700000001234", "\"ts_ms\":-0")).ok());
  CHECK(decode_status(with(encode(online(), kMac), "state", "offline")).ok());
}

}  // namespace
}  // namespace vend::proto
