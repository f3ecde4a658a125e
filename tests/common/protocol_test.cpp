// Protocol v1 codec. The golden examples here are the ones in
// docs/protocol.md: change both together.
#include "vend/protocol.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "protocol_examples.hpp"
#include "test_support.hpp"
#include "vend/crypto.hpp"

namespace vend::proto {
namespace {

using nlohmann::json;
using namespace examples;  // NOLINT: the example messages are the test's vocabulary

TEST_CASE("golden canonical form of every command") {
  CHECK(encode_canonical(Command{dispense()}) == kDispenseGolden);
  CHECK(encode_canonical(Command{restock()}) == kRestockGolden);
  CHECK(encode_canonical(Command{snapshot_request()}) == kSnapshotRequestGolden);
  CHECK(encode_canonical(Command{ack()}) == kAckGolden);
  CHECK(encode_canonical(Command{resend()}) == kResendGolden);
  CHECK(encode_canonical(Command{status_request()}) == kStatusRequestGolden);
}

TEST_CASE("golden canonical form of every v1 command (an agent before v2)") {
  CHECK(encode_canonical(Command{as_v1(dispense())}) == kDispenseV1Golden);
  CHECK(encode_canonical(Command{as_v1(restock())}) == kRestockV1Golden);
  CHECK(encode_canonical(Command{as_v1(snapshot_request())}) == kSnapshotRequestV1Golden);
  CHECK(encode_canonical(Command{as_v1(ack())}) == kAckV1Golden);
  CHECK(encode_canonical(Command{as_v1(resend())}) == kResendV1Golden);
  CHECK(encode_canonical(Command{as_v1(status_request())}) == kStatusRequestV1Golden);
}

TEST_CASE("v1 commands decode as v1: no expiry but a dispense's") {
  for (const Command& command :
       {Command{as_v1(dispense())}, Command{as_v1(restock())}, Command{as_v1(snapshot_request())},
        Command{as_v1(ack())}, Command{as_v1(resend())}, Command{as_v1(status_request())}}) {
    CAPTURE(encode_canonical(command));
    auto decoded = decode_command(encode(command, kMac));
    REQUIRE_MESSAGE(decoded.ok(), vend::test::error_text(decoded));
    CHECK(decoded->message == command);
    CHECK(command_version(decoded->message) == 1);
    CHECK(decoded->canonical == encode_canonical(command));
  }
  CHECK(command_expires_at_ms(Command{as_v1(dispense())}) == kExpiresAt);
  CHECK(command_expires_at_ms(Command{as_v1(status_request())}) == 0);
}

TEST_CASE("golden canonical form of every event and of status") {
  CHECK(encode_canonical(dispense_result()) == kDispenseResultGolden);
  CHECK(encode_canonical(tokens_minted()) == kTokensGolden);
  CHECK(encode_canonical(full_snapshot()) == kFullSnapshotGolden);
  CHECK(encode_canonical(periodic_snapshot()) == kPeriodicSnapshotGolden);
  CHECK(encode_canonical(fault()) == kFaultGolden);
  CHECK(encode_canonical(events_unavailable()) == kEventsUnavailableGolden);
  CHECK(encode_canonical(online()) == kStatusGolden);
  PresenceStatus offline = online();
  offline.online = false;
  CHECK(encode_canonical(offline).find(R"("state":"offline")") != std::string::npos);
}

TEST_CASE("wire form is the canonical object plus mac, and the golden MAC") {
  // The signed example of docs/protocol.md: key 00 01 02 ... 1f.
  auto key =
      crypto::Key::from_hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
  REQUIRE(key.ok());
  const std::string mac = crypto::sign(*key, kDispenseGolden);
  CHECK(mac == "997181cff70679e98922c05cb653bf968c01bc5829744f0ee29c628f438d3f36");
  CHECK(encode(Command{dispense()}, mac) ==
        R"({"device":"vm-0042","expires_at_ms":1700000060000,)"
        R"("mac":"997181cff70679e98922c05cb653bf968c01bc5829744f0ee29c628f438d3f36",)"
        R"("order_id":"ord-7f3a","slot":12,"token":"0123456789abcdef0123456789abcdef",)"
        R"("type":"dispense","v":2})");
}

TEST_CASE("docs/protocol.md shows every golden example") {
  const char* source_dir = std::getenv("VEND_SOURCE_DIR");  // set by ctest
  REQUIRE_MESSAGE(source_dir != nullptr, "run through ctest (VEND_SOURCE_DIR unset)");
  const std::string doc = test::read_file(std::string(source_dir) + "/docs/protocol.md");
  REQUIRE_FALSE(doc.empty());
  for (const char* golden :
       {kDispenseGolden, kRestockGolden, kSnapshotRequestGolden, kAckGolden, kDispenseResultGolden,
        kTokensGolden, kFullSnapshotGolden, kPeriodicSnapshotGolden, kFaultGolden, kStatusGolden,
        kResendGolden, kEventsUnavailableGolden, kStatusRequestGolden, kDispenseStartedGolden}) {
    CHECK_MESSAGE(doc.find(std::string("\n") + golden + "\n") != std::string::npos, golden);
  }
}

TEST_CASE("every command round-trips") {
  for (const Command& command :
       {Command{dispense()}, Command{restock()}, Command{snapshot_request()}, Command{ack()},
        Command{Ack{kDevice, 0, "", "", 1}}, Command{SnapshotRequest{kDevice, "r", false, 1}},
        Command{resend()}, Command{ResendRequest{kDevice, 1, "", kExpiresAt}},
        Command{status_request()}}) {
    CAPTURE(encode_canonical(command));
    auto decoded = decode_command(encode(command, kMac));
    REQUIRE_MESSAGE(decoded.ok(), vend::test::error_text(decoded));
    CHECK(decoded->message == command);
    CHECK(decoded->mac == kMac);
    CHECK(decoded->canonical == encode_canonical(command));
  }
}

TEST_CASE("every event round-trips") {
  DeviceEvent rejected =
      event(1, DispenseResult{"o", 1, kToken, DispenseStatus::kRejected, reason::kExpired, false});
  DeviceEvent uncertain = event(
      2, DispenseResult{"o", 255, kToken, DispenseStatus::kUncertain, reason::kPowerLoss, true});
  DeviceEvent no_slot_fault = event(3, Fault{"outbox_near_full", "", 0});
  for (const DeviceEvent& e :
       {dispense_result(), tokens_minted(), full_snapshot(), periodic_snapshot(), fault(), rejected,
        uncertain, no_slot_fault, events_unavailable(), dispense_started()}) {
    CAPTURE(encode_canonical(e));
    auto decoded = decode_event(encode(e, kMac));
    REQUIRE_MESSAGE(decoded.ok(), vend::test::error_text(decoded));
    CHECK(decoded->message == e);
    CHECK(decoded->mac == kMac);
    CHECK(decoded->canonical == encode_canonical(e));
  }
}

TEST_CASE("status round-trips, online and offline") {
  PresenceStatus offline = online();
  offline.online = false;
  for (const PresenceStatus& s : {online(), offline}) {
    auto decoded = decode_status(encode(s, kMac));
    REQUIRE_MESSAGE(decoded.ok(), vend::test::error_text(decoded));
    CHECK(decoded->message == s);
    CHECK(decoded->canonical == encode_canonical(s));
  }
}

TEST_CASE("whitespace, key order and escapes do not change the canonical form") {
  const std::string spaced =
      "\n { \"v\" : 1 ,\t\"type\":\"dispense\", \"slot\" : 12,"
      " \"token\":\"0123456789abcdef0123456789abcdef\", \"mac\": \"" +
      kMac +
      "\",\r\n \"order_id\" : \"ord\\u002d7f3a\", \"expires_at_ms\":"
      "1700000060000, \"device\" : \"vm\\u002D0042\" } ";
  auto decoded = decode_command(spaced);
  REQUIRE_MESSAGE(decoded.ok(), vend::test::error_text(decoded));
  CHECK(decoded->canonical == kDispenseV1Golden);
  CHECK(decoded->message == Command{as_v1(dispense())});

  json reordered = json::parse(kFaultGolden);
  reordered["mac"] = kMac;
  reordered["message"] = "motor stalled after 1500 ms";
  std::string text = reordered.dump(2);  // indented; nlohmann sorts keys
  text.replace(text.find("motor stalled"), 13, "motor\\u0020stalled");
  auto decoded_fault = decode_event(text);
  REQUIRE_MESSAGE(decoded_fault.ok(), vend::test::error_text(decoded_fault));
  CHECK(decoded_fault->canonical == kFaultGolden);
  // Unicode text survives as raw UTF-8 in the canonical form.
  DeviceEvent accented = event(7, Fault{"jam", "caf\xc3\xa9 \"slot\"\n", 1});
  auto again = decode_event(encode(accented, kMac));
  REQUIRE(again.ok());
  CHECK(again->message == accented);
}

TEST_CASE("limits at the edge are accepted") {
  std::vector<std::string> many;
  for (size_t i = 0; i < kMaxTokensPerMessage; ++i) {
    char buf[33];
    std::snprintf(buf, sizeof buf, "%032zx", i);
    many.emplace_back(buf);
  }
  DeviceEvent big = event(UINT64_MAX, TokensMinted{std::string(64, 'r'), kMaxSlot, many, 100000});
  auto decoded = decode_event(encode(big, kMac));
  REQUIRE_MESSAGE(decoded.ok(), vend::test::error_text(decoded));
  CHECK(decoded->message == big);
  Command max_restock = RestockCommand{kDevice, "r", kMaxSlot, kMaxRestockCount, INT64_MAX};
  CHECK(decode_command(encode(max_restock, kMac)).ok());
  DeviceEvent long_text = event(1, Fault{"x", std::string(kMaxTextLength, 'm'), 0});
  CHECK(decode_event(encode(long_text, kMac)).ok());
}

TEST_CASE("command_device, type_name and DispenseStatus names") {
  CHECK(command_device(Command{restock()}) == kDevice);
  CHECK(std::string(type_name(Command{snapshot_request()})) == "snapshot_request");
  CHECK(std::string(type_name(EventBody{TokensMinted{}})) == "tokens");
  CHECK(std::string(type_name(Command{resend()})) == "resend");
  CHECK(std::string(type_name(EventBody{EventsUnavailable{}})) == "events_unavailable");
  for (auto s : {DispenseStatus::kDispensed, DispenseStatus::kFailed, DispenseStatus::kRejected,
                 DispenseStatus::kUncertain}) {
    CHECK(parse_dispense_status(to_string(s)) == s);
  }
  CHECK_FALSE(parse_dispense_status("dispensed").has_value());
}

TEST_CASE("is_valid_id and is_valid_token") {
  CHECK(is_valid_id("a"));
  CHECK(is_valid_id("Vm-01.x_y"));
  CHECK(is_valid_id(std::string(64, 'a')));
  CHECK_FALSE(is_valid_id(""));
  CHECK_FALSE(is_valid_id(std::string(65, 'a')));
  for (const char* bad : {"a/b", "a+b", "a#b", "a b", "caf\xc3\xa9", "a\n"}) {
    CHECK_FALSE(is_valid_id(bad));
  }
  CHECK(is_valid_token(kToken));
  CHECK_FALSE(is_valid_token("0123456789ABCDEF0123456789abcdef"));
  CHECK_FALSE(is_valid_token("0123456789abcdef0123456789abcde"));
  CHECK_FALSE(is_valid_token("0123456789abcdef0123456789abcdeg"));
}

// A ledger's identity (replaceable boards): optional on the wire, signed
// when present, strict like every other token-format field.
constexpr const char* kLedgerId = "00112233445566778899aabbccddeeff";
constexpr const char* kAckLedgerGolden =
    R"({"device":"vm-0042","expires_at_ms":1700000060000,)"
    R"("ledger_id":"00112233445566778899aabbccddeeff","type":"ack","upto_seq":41,"v":2})";
constexpr const char* kTokensLedgerGolden =
    R"({"boot_id":"fedcba9876543210fedcba9876543210","device":"vm-0042",)"
    R"("ledger_id":"00112233445566778899aabbccddeeff","physical_count":2,"restock_id":"rst-0009",)"
    R"("seq":1,"slot":3,"tokens":["9f86d081884c7d659a2feaa0c55ad015",)"
    R"("a3f2b8c41e6d4f0a9b7c5d3e1f2a4b6c"],"ts_ms":1700000001234,"type":"tokens","v":1})";

TEST_CASE("ledger_id: golden forms, round trips, strict decoding, shown in docs/protocol.md") {
  Ack acked{kDevice, 41, kLedgerId, "", kExpiresAt};
  CHECK(encode_canonical(Command{acked}) == kAckLedgerGolden);
  DeviceEvent minted = tokens_minted();
  minted.seq = 1;
  minted.ledger_id = kLedgerId;
  CHECK(encode_canonical(minted) == kTokensLedgerGolden);
  ResendRequest resent{kDevice, 1, kLedgerId, kExpiresAt};
  for (const Command& c : {Command{acked}, Command{resent}}) {
    auto decoded = decode_command(encode(c, kMac));
    REQUIRE_MESSAGE(decoded.ok(), vend::test::error_text(decoded));
    CHECK(decoded->message == c);
    CHECK(decoded->canonical == encode_canonical(c));
  }
  auto decoded = decode_event(encode(minted, kMac));
  REQUIRE_MESSAGE(decoded.ok(), vend::test::error_text(decoded));
  CHECK(decoded->message == minted);
  CHECK(decoded->canonical == kTokensLedgerGolden);

  std::string bad = encode(minted, kMac);
  bad.replace(bad.find(kLedgerId), 32, "00112233445566778899AABBCCDDEEFF");
  auto rejected = decode_event(bad);
  REQUIRE_FALSE(rejected.ok());
  CHECK(rejected.error().code == kErrOutOfRange);
  CHECK(rejected.error().message.find("ledger_id") != std::string::npos);

  const char* source_dir = std::getenv("VEND_SOURCE_DIR");
  REQUIRE(source_dir != nullptr);
  const std::string doc = test::read_file(std::string(source_dir) + "/docs/protocol.md");
  for (const char* golden : {kAckLedgerGolden, kTokensLedgerGolden}) {
    CHECK_MESSAGE(doc.find(std::string("\n") + golden + "\n") != std::string::npos, golden);
  }
}

// The event an ack covers up to, by its mac: optional, strict, in the doc.
constexpr const char* kAckMacGolden =
    R"({"device":"vm-0042","expires_at_ms":1700000060000,)"
    R"("ledger_id":"00112233445566778899aabbccddeeff","type":"ack",)"
    R"("upto_mac":"7c4a8d09ca3762af61e59520943dc26494f8941b7c4a8d09ca3762af61e59520",)"
    R"("upto_seq":41,"v":2})";

TEST_CASE("upto_mac: golden form, round trip, strict decoding, shown in docs/protocol.md") {
  const std::string mac = "7c4a8d09ca3762af61e59520943dc26494f8941b7c4a8d09ca3762af61e59520";
  Ack acked{kDevice, 41, kLedgerId, mac, kExpiresAt};
  CHECK(encode_canonical(Command{acked}) == kAckMacGolden);
  auto decoded = decode_command(encode(Command{acked}, kMac));
  REQUIRE_MESSAGE(decoded.ok(), vend::test::error_text(decoded));
  CHECK(decoded->message == Command{acked});
  CHECK(decoded->canonical == kAckMacGolden);

  std::string bad = encode(Command{acked}, kMac);
  bad.replace(bad.find(mac), 64, std::string(63, 'a'));
  auto rejected = decode_command(bad);
  REQUIRE_FALSE(rejected.ok());
  CHECK(rejected.error().code == kErrOutOfRange);
  CHECK(rejected.error().message.find("upto_mac") != std::string::npos);

  const char* source_dir = std::getenv("VEND_SOURCE_DIR");
  REQUIRE(source_dir != nullptr);
  const std::string doc = test::read_file(std::string(source_dir) + "/docs/protocol.md");
  CHECK(doc.find(std::string("\n") + kAckMacGolden + "\n") != std::string::npos);
}

// The cloud's view of the device's ledger in a dispense: optional, both
// fields together, strict, in the doc.
constexpr const char* kDispenseLedgerGolden =
    R"({"device":"vm-0042","expires_at_ms":1700000060000,)"
    R"("ledger_id":"00112233445566778899aabbccddeeff","ledger_seq":41,"order_id":"ord-7f3a",)"
    R"("slot":12,"token":"0123456789abcdef0123456789abcdef","type":"dispense","v":2})";

TEST_CASE("dispense ledger_id and ledger_seq: golden form, together or not at all, in the doc") {
  DispenseCommand c{kDevice, "ord-7f3a", 12, "0123456789abcdef0123456789abcdef", kExpiresAt};
  c.ledger_id = kLedgerId;
  c.ledger_seq = 41;
  CHECK(encode_canonical(Command{c}) == kDispenseLedgerGolden);
  auto decoded = decode_command(encode(Command{c}, kMac));
  REQUIRE_MESSAGE(decoded.ok(), vend::test::error_text(decoded));
  CHECK(decoded->message == Command{c});
  CHECK(decoded->canonical == kDispenseLedgerGolden);

  SUBCASE("seq 0 (nothing processed of that ledger yet) is sent and decoded") {
    c.ledger_seq = 0;
    auto zero = decode_command(encode(Command{c}, kMac));
    REQUIRE_MESSAGE(zero.ok(), vend::test::error_text(zero));
    CHECK(std::get<DispenseCommand>(zero->message).ledger_seq == 0);
    CHECK(encode_canonical(Command{c}).find("\"ledger_seq\":0") != std::string::npos);
  }
  SUBCASE("one without the other is missing_field, naming the absent one") {
    std::string wire = encode(Command{c}, kMac);
    std::string no_seq = wire;
    no_seq.erase(no_seq.find("\"ledger_seq\":41,"), std::string("\"ledger_seq\":41,").size());
    auto rejected = decode_command(no_seq);
    REQUIRE_FALSE(rejected.ok());
    CHECK(rejected.error().code == kErrMissingField);
    CHECK(rejected.error().message.find("ledger_seq") != std::string::npos);
    std::string no_id = wire;
    const std::string id_field = std::string("\"ledger_id\":\"") + kLedgerId + "\",";
    no_id.erase(no_id.find(id_field), id_field.size());
    auto rejected_id = decode_command(no_id);
    REQUIRE_FALSE(rejected_id.ok());
    CHECK(rejected_id.error().code == kErrMissingField);
    CHECK(rejected_id.error().message.find("ledger_id") != std::string::npos);
  }
  SUBCASE("a negative seq is out_of_range") {
    std::string wire = encode(Command{c}, kMac);
    wire.replace(wire.find("\"ledger_seq\":41"), std::string("\"ledger_seq\":41").size(),
                 "\"ledger_seq\":-1");
    auto rejected = decode_command(wire);
    REQUIRE_FALSE(rejected.ok());
    CHECK(rejected.error().code == kErrOutOfRange);
  }
  SUBCASE("without both, the form is the one before them") {
    c.ledger_id.clear();
    CHECK(encode_canonical(Command{c}).find("ledger") == std::string::npos);
  }

  const char* source_dir = std::getenv("VEND_SOURCE_DIR");
  REQUIRE(source_dir != nullptr);
  const std::string doc = test::read_file(std::string(source_dir) + "/docs/protocol.md");
  CHECK(doc.find(std::string("\n") + kDispenseLedgerGolden + "\n") != std::string::npos);
}

TEST_CASE("dispense_started: golden form, strict fields") {
  CHECK(encode_canonical(dispense_started()) == kDispenseStartedGolden);
  std::string wire = encode(dispense_started(), kMac);
  std::string no_token = wire;
  const std::string token_field = std::string("\"token\":\"") + kToken + "\",";
  no_token.erase(no_token.find(token_field), token_field.size());
  auto rejected = decode_event(no_token);
  REQUIRE_FALSE(rejected.ok());
  CHECK(rejected.error().code == kErrMissingField);
  CHECK(rejected.error().message.find("token") != std::string::npos);
}

TEST_CASE("dispense ledger_mac: sent with the ledger fields only, 64 hex, round-trips") {
  DispenseCommand c{kDevice, "ord-7f3a", 12, "0123456789abcdef0123456789abcdef", kExpiresAt};
  c.ledger_id = kLedgerId;
  c.ledger_seq = 41;
  c.ledger_mac = kMac;
  auto decoded = decode_command(encode(Command{c}, kMac));
  REQUIRE_MESSAGE(decoded.ok(), vend::test::error_text(decoded));
  CHECK(decoded->message == Command{c});
  CHECK(decoded->canonical.find("\"ledger_mac\":\"" + kMac + "\"") != std::string::npos);

  DispenseCommand bare{kDevice, "ord-7f3a", 12, "0123456789abcdef0123456789abcdef", kExpiresAt};
  std::string wire = encode(Command{bare}, kMac);
  wire.insert(1, "\"ledger_mac\":\"" + kMac + "\",");
  auto alone = decode_command(wire);
  REQUIRE_FALSE(alone.ok());
  CHECK(alone.error().code == kErrMissingField);
  CHECK(alone.error().message.find("ledger_id") != std::string::npos);

  std::string short_mac = encode(Command{c}, kMac);
  const std::string field = "\"ledger_mac\":\"";
  short_mac.replace(short_mac.find(field) + field.size(), kMac.size(), "abcd");
  auto bad = decode_command(short_mac);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("ledger_mac") != std::string::npos);
}

}  // namespace
}  // namespace vend::proto
