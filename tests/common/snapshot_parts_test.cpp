// Snapshots in parts: the part / parts fields on the wire (golden, strict
// decoding) and split_snapshot, up to the largest machine (255 slots x 1000
// tokens) and a slot whose token list needs several parts.
#include "vend/snapshot_parts.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "protocol_examples.hpp"
#include "test_support.hpp"
#include "vend/crypto.hpp"
#include "vend/protocol.hpp"

namespace vend::proto {
namespace {

using nlohmann::json;
using namespace examples;  // NOLINT: the example messages are the test's vocabulary

// Part 2 of 2 of a full snapshot: slot 3's token list, continued.
DeviceEvent snapshot_part() {
  Snapshot s{
      "snap-0002", {SlotSnapshot{3, 2, 2, kDigestTwo, std::vector<std::string>{kToken3}}}, 0, 2, 2};
  return event(49, s);
}

constexpr const char* kSnapshotPartGolden =
    R"({"boot_id":"fedcba9876543210fedcba9876543210","device":"vm-0042","outbox_depth":0,)"
    R"("part":2,"parts":2,"request_id":"snap-0002","seq":49,"slots":[{"available_tokens":2,)"
    R"("digest":"4944a029fe42895808eaac56784d983c632ebefed84ab788f99888bec1098e12",)"
    R"("physical_count":2,"slot":3,"tokens":["a3f2b8c41e6d4f0a9b7c5d3e1f2a4b6c"]}],)"
    R"("ts_ms":1700000001234,"type":"snapshot","v":1})";

std::string with_mac(std::string canonical) {
  canonical.insert(1, R"("mac":")" + kMac + R"(",)");
  return canonical;
}

// The snapshot `canonical` with `edit` applied to its JSON, re-serialized.
std::string edited(const char* canonical, void (*edit)(json&)) {
  json j = json::parse(canonical);
  edit(j);
  j["mac"] = kMac;
  return j.dump();
}

std::vector<std::string> tokens_of(size_t n, size_t salt) {
  std::vector<std::string> out;
  out.reserve(n);
  char buf[33];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%016zx%016zx", salt, i);
    out.emplace_back(buf);
  }
  return out;
}

Snapshot full_machine(int slots, size_t tokens_per_slot) {
  Snapshot s;
  s.request_id = "chk-0123456789abcdef";
  s.outbox_depth = 12345;
  for (int slot = 1; slot <= slots; ++slot) {
    auto tokens = tokens_of(tokens_per_slot, static_cast<size_t>(slot));
    s.slots.push_back(SlotSnapshot{slot, static_cast<int>(tokens_per_slot),
                                   static_cast<int>(tokens_per_slot), crypto::token_digest(tokens),
                                   tokens});
  }
  return s;
}

// The largest envelope a device can give a part: a 64-char id, the largest
// seq and ts_ms.
std::string encoded_part(const Snapshot& part) {
  DeviceEvent e{std::string(64, 'd'), UINT64_MAX, kBootId, INT64_MAX, part};
  return encode(e, kMac);
}

// The parts joined back, as the agent's assembler does (slot continued as
// the next part's first entry).
Snapshot joined(const std::vector<Snapshot>& parts) {
  Snapshot whole{parts.front().request_id, {}, parts.front().outbox_depth};
  for (const Snapshot& p : parts) {
    for (size_t i = 0; i < p.slots.size(); ++i) {
      const SlotSnapshot& s = p.slots[i];
      if (i == 0 && !whole.slots.empty() && whole.slots.back().slot == s.slot) {
        auto& into = *whole.slots.back().tokens;
        into.insert(into.end(), s.tokens->begin(), s.tokens->end());
      } else {
        whole.slots.push_back(s);
      }
    }
  }
  return whole;
}

TEST_CASE("golden canonical form of a snapshot part, shown in docs/protocol.md") {
  CHECK(encode_canonical(snapshot_part()) == kSnapshotPartGolden);
  const char* source_dir = std::getenv("VEND_SOURCE_DIR");  // set by ctest
  REQUIRE(source_dir != nullptr);
  const std::string doc = test::read_file(std::string(source_dir) + "/docs/protocol.md");
  CHECK(doc.find(std::string("\n") + kSnapshotPartGolden + "\n") != std::string::npos);
  auto decoded = decode_event(with_mac(kSnapshotPartGolden));
  REQUIRE(decoded.ok());
  CHECK(decoded->message == snapshot_part());
  CHECK(decoded->canonical == kSnapshotPartGolden);
}

TEST_CASE("a snapshot in one message has no part fields and decodes as 1 of 1") {
  std::string canonical = encode_canonical(full_snapshot());
  CHECK(canonical.find("\"part") == std::string::npos);
  auto decoded = decode_event(with_mac(canonical));
  REQUIRE(decoded.ok());
  const auto& s = std::get<Snapshot>(decoded->message.body);
  CHECK(s.part == 1);
  CHECK(s.parts == 1);
}

TEST_CASE("part and parts are decoded strictly") {
  struct Row {
    const char* what;
    void (*edit)(json&);
    const char* code;
    const char* needle;
  };
  const Row rows[] = {
      {"part without parts", [](json& j) { j.erase("parts"); }, kErrMissingField, "'parts'"},
      {"parts without part", [](json& j) { j.erase("part"); }, kErrMissingField, "'part'"},
      {"explicit 1 of 1",
       [](json& j) {
         j["part"] = 1;
         j["parts"] = 1;
       },
       kErrOutOfRange, "'parts'"},
      {"part 0", [](json& j) { j["part"] = 0; }, kErrOutOfRange, "'part'"},
      {"part beyond parts", [](json& j) { j["part"] = 3; }, kErrOutOfRange, "'part'"},
      {"too many parts", [](json& j) { j["parts"] = kMaxSnapshotParts + 1; }, kErrOutOfRange,
       "'parts'"},
      {"parts as a string", [](json& j) { j["parts"] = "2"; }, kErrWrongType, "'parts'"},
      {"part as a float", [](json& j) { j["part"] = 1.0; }, kErrWrongType, "'part'"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.what);
    auto r = decode_event(edited(kSnapshotPartGolden, row.edit));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == row.code);
    CHECK(r.error().message.find(row.needle) != std::string::npos);
  }
  auto last = decode_event(edited(kSnapshotPartGolden, [](json& j) { j["parts"] = 256; }));
  CHECK(last.ok());
}

TEST_CASE("a snapshot that fits is one part, unchanged") {
  Snapshot s = std::get<Snapshot>(full_snapshot().body);
  auto parts = split_snapshot(s);
  REQUIRE(parts.ok());
  REQUIRE(parts->size() == 1);
  CHECK(parts->front() == s);
  auto empty = split_snapshot(Snapshot{});
  REQUIRE(empty.ok());
  CHECK(empty->size() == 1);
}

TEST_CASE("255 slots x 1000 tokens: parts under the cap that join back to the snapshot") {
  const Snapshot whole = full_machine(255, 1000);
  CHECK(encode_canonical(DeviceEvent{kDevice, 1, kBootId, 0, whole}).size() > kMaxPayloadBytes);
  auto parts = split_snapshot(whole);
  REQUIRE(parts.ok());
  const int n = static_cast<int>(parts->size());
  MESSAGE("255 x 1000 tokens: " << n << " parts");
  CHECK(n >= 34);
  CHECK(n <= 40);
  size_t largest = 0;
  for (int i = 0; i < n; ++i) {
    const Snapshot& p = (*parts)[static_cast<size_t>(i)];
    CHECK(p.part == i + 1);
    CHECK(p.parts == n);
    CHECK(p.request_id == whole.request_id);
    CHECK(p.outbox_depth == whole.outbox_depth);
    const std::string wire = encoded_part(p);
    largest = std::max(largest, wire.size());
    CHECK(wire.size() <= kMaxPayloadBytes);
    auto decoded = decode_event(wire);
    REQUIRE_MESSAGE(decoded.ok(), vend::test::error_text(decoded));
    CHECK(std::get<Snapshot>(decoded->message.body) == p);
  }
  MESSAGE("largest part: " << largest << " bytes");
  CHECK(largest > kMaxPayloadBytes * 9 / 10);  // parts are filled, not one slot each
  CHECK(joined(*parts) == whole);
}

TEST_CASE("a slot with more tokens than one part holds is continued across parts") {
  Snapshot whole = full_machine(3, 10);
  auto big = tokens_of(20'000, 99);
  whole.slots[1] = SlotSnapshot{2, 20'000, 20'000, crypto::token_digest(big), big};
  auto parts = split_snapshot(whole);
  REQUIRE(parts.ok());
  REQUIRE(parts->size() >= 3);
  for (const Snapshot& p : *parts) {
    CHECK(encoded_part(p).size() <= kMaxPayloadBytes);
    for (const SlotSnapshot& s : p.slots) CHECK(s.tokens->size() <= kMaxTokensPerMessage);
  }
  CHECK((*parts)[1].slots.front().slot == 2);  // the continuation leads the next part
  CHECK(joined(*parts) == whole);
}

TEST_CASE("digest-only snapshots split on the same rule") {
  Snapshot whole = full_machine(255, 0);
  for (auto& s : whole.slots) s.tokens.reset();
  auto one = split_snapshot(whole);
  REQUIRE(one.ok());
  CHECK(one->size() == 1);  // 255 digests fit one message
  auto small = split_snapshot(whole, 20 * kSlotEntryMaxBytes);
  REQUIRE(small.ok());
  CHECK(small->size() == 13);  // 20 entries a part
  CHECK(joined(*small) == whole);
}

TEST_CASE("more than kMaxSnapshotParts parts is an error") {
  Snapshot whole = full_machine(255, 0);
  for (auto& s : whole.slots) s.tokens.reset();
  auto r = split_snapshot(whole, kSlotEntryMaxBytes + kTokenEntryBytes);  // one entry a part
  CHECK(r.ok());                                                          // 255 parts
  whole.slots.push_back(whole.slots.back());
  whole.slots.push_back(whole.slots.back());
  auto over = split_snapshot(whole, kSlotEntryMaxBytes + kTokenEntryBytes);
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().code == "snapshot_too_large");
}

}  // namespace
}  // namespace vend::proto
