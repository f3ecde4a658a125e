// The example messages of the protocol (commands v2, events and statuses v1)
// and their golden canonical forms, shared by the codec tests; the v1 forms of
// the commands too, which are still decoded. docs/protocol.md shows the same
// examples: change both.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "vend/protocol.hpp"

namespace vend::proto::examples {

inline constexpr const char* kDevice = "vm-0042";
inline constexpr const char* kToken = "0123456789abcdef0123456789abcdef";
inline constexpr const char* kToken2 = "9f86d081884c7d659a2feaa0c55ad015";
inline constexpr const char* kToken3 = "a3f2b8c41e6d4f0a9b7c5d3e1f2a4b6c";
inline constexpr const char* kBootId = "fedcba9876543210fedcba9876543210";
inline constexpr const char* kDigestEmpty =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
inline constexpr const char* kDigestTwo =
    "4944a029fe42895808eaac56784d983c632ebefed84ab788f99888bec1098e12";
inline const std::string kMac(64, 'a');

// ---- The example messages -------------------------------------------------

inline constexpr int64_t kExpiresAt = 1700000060000;
inline DispenseCommand dispense() { return {kDevice, "ord-7f3a", 12, kToken, kExpiresAt}; }
inline RestockCommand restock() { return {kDevice, "rst-0009", 3, 10, kExpiresAt}; }
inline SnapshotRequest snapshot_request() { return {kDevice, "snap-0001", true, kExpiresAt}; }
inline Ack ack() { return {kDevice, 41, "", "", kExpiresAt}; }
inline ResendRequest resend() { return {kDevice, 42, "", kExpiresAt}; }
inline StatusRequest status_request() { return {kDevice, kExpiresAt}; }
// The same commands as a v1 sender (an agent before v2) encodes them.
template <typename C>
C as_v1(C c) {
  c.v = 1;
  if constexpr (!std::is_same_v<C, DispenseCommand>) c.expires_at_ms = 0;
  return c;
}

inline DeviceEvent event(uint64_t seq, EventBody body) {
  return {kDevice, seq, kBootId, 1700000001234, std::move(body)};
}
inline DeviceEvent dispense_result() {
  return event(42, DispenseResult{"ord-7f3a", 12, kToken, DispenseStatus::kDispensed, "", true});
}
inline DeviceEvent tokens_minted() {
  return event(43, TokensMinted{"rst-0009", 3, {kToken2, kToken3}, 2});
}
inline DeviceEvent full_snapshot() {
  Snapshot s{"snap-0001",
             {SlotSnapshot{3, 2, 2, kDigestTwo, std::vector<std::string>{kToken2, kToken3}},
              SlotSnapshot{12, 0, 0, kDigestEmpty, std::vector<std::string>{}}},
             0};
  return event(44, s);
}
inline DeviceEvent periodic_snapshot() {
  return event(45, Snapshot{"", {SlotSnapshot{3, 2, 2, kDigestTwo, std::nullopt}}, 7});
}
inline DeviceEvent fault() { return event(46, Fault{"jam", "motor stalled after 1500 ms", 12}); }
inline DeviceEvent events_unavailable() { return event(47, EventsUnavailable{42, 45}); }
inline DeviceEvent dispense_started() { return event(48, DispenseStarted{"ord-7f3a", 12, kToken}); }
inline PresenceStatus online() { return {kDevice, kBootId, true, 1700000000000}; }

// ---- Golden canonical forms (docs/protocol.md) -------------------------------

inline constexpr const char* kDispenseGolden =
    R"({"device":"vm-0042","expires_at_ms":1700000060000,"order_id":"ord-7f3a","slot":12,)"
    R"("token":"0123456789abcdef0123456789abcdef","type":"dispense","v":2})";
inline constexpr const char* kRestockGolden =
    R"({"count":10,"device":"vm-0042","expires_at_ms":1700000060000,"restock_id":"rst-0009",)"
    R"("slot":3,"type":"restock","v":2})";
inline constexpr const char* kSnapshotRequestGolden =
    R"({"device":"vm-0042","expires_at_ms":1700000060000,"full":true,"request_id":"snap-0001",)"
    R"("type":"snapshot_request","v":2})";
inline constexpr const char* kAckGolden =
    R"({"device":"vm-0042","expires_at_ms":1700000060000,"type":"ack","upto_seq":41,"v":2})";
inline constexpr const char* kResendGolden =
    R"({"device":"vm-0042","expires_at_ms":1700000060000,"from_seq":42,"type":"resend","v":2})";
inline constexpr const char* kStatusRequestGolden =
    R"({"device":"vm-0042","expires_at_ms":1700000060000,"type":"status_request","v":2})";
// v1 (still decoded; a device accepts them only with core.accept_v1_commands).
inline constexpr const char* kDispenseV1Golden =
    R"({"device":"vm-0042","expires_at_ms":1700000060000,"order_id":"ord-7f3a","slot":12,)"
    R"("token":"0123456789abcdef0123456789abcdef","type":"dispense","v":1})";
inline constexpr const char* kRestockV1Golden =
    R"({"count":10,"device":"vm-0042","restock_id":"rst-0009","slot":3,"type":"restock","v":1})";
inline constexpr const char* kSnapshotRequestV1Golden =
    R"({"device":"vm-0042","full":true,"request_id":"snap-0001","type":"snapshot_request","v":1})";
inline constexpr const char* kAckV1Golden =
    R"({"device":"vm-0042","type":"ack","upto_seq":41,"v":1})";
inline constexpr const char* kResendV1Golden =
    R"({"device":"vm-0042","from_seq":42,"type":"resend","v":1})";
inline constexpr const char* kStatusRequestV1Golden =
    R"({"device":"vm-0042","type":"status_request","v":1})";
inline constexpr const char* kDispenseResultGolden =
    R"({"boot_id":"fedcba9876543210fedcba9876543210","device":"vm-0042","order_id":"ord-7f3a",)"
    R"("reason":"","seq":42,"slot":12,"status":"DISPENSED",)"
    R"("token":"0123456789abcdef0123456789abcdef","token_consumed":true,"ts_ms":1700000001234,)"
    R"("type":"dispense_result","v":1})";
inline constexpr const char* kTokensGolden =
    R"({"boot_id":"fedcba9876543210fedcba9876543210","device":"vm-0042","physical_count":2,)"
    R"("restock_id":"rst-0009","seq":43,"slot":3,"tokens":["9f86d081884c7d659a2feaa0c55ad015",)"
    R"("a3f2b8c41e6d4f0a9b7c5d3e1f2a4b6c"],"ts_ms":1700000001234,"type":"tokens","v":1})";
inline constexpr const char* kFullSnapshotGolden =
    R"({"boot_id":"fedcba9876543210fedcba9876543210","device":"vm-0042","outbox_depth":0,)"
    R"("request_id":"snap-0001","seq":44,"slots":[{"available_tokens":2,)"
    R"("digest":"4944a029fe42895808eaac56784d983c632ebefed84ab788f99888bec1098e12",)"
    R"("physical_count":2,"slot":3,"tokens":["9f86d081884c7d659a2feaa0c55ad015",)"
    R"("a3f2b8c41e6d4f0a9b7c5d3e1f2a4b6c"]},{"available_tokens":0,)"
    R"("digest":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",)"
    R"("physical_count":0,"slot":12,"tokens":[]}],"ts_ms":1700000001234,"type":"snapshot","v":1})";
inline constexpr const char* kPeriodicSnapshotGolden =
    R"({"boot_id":"fedcba9876543210fedcba9876543210","device":"vm-0042","outbox_depth":7,)"
    R"("request_id":"","seq":45,"slots":[{"available_tokens":2,)"
    R"("digest":"4944a029fe42895808eaac56784d983c632ebefed84ab788f99888bec1098e12",)"
    R"("physical_count":2,"slot":3}],"ts_ms":1700000001234,"type":"snapshot","v":1})";
inline constexpr const char* kFaultGolden =
    R"({"boot_id":"fedcba9876543210fedcba9876543210","code":"jam","device":"vm-0042",)"
    R"("message":"motor stalled after 1500 ms","seq":46,"slot":12,"ts_ms":1700000001234,)"
    R"("type":"fault","v":1})";
inline constexpr const char* kEventsUnavailableGolden =
    R"({"boot_id":"fedcba9876543210fedcba9876543210","device":"vm-0042","from_seq":42,)"
    R"("oldest_seq":45,"seq":47,"ts_ms":1700000001234,"type":"events_unavailable","v":1})";
inline constexpr const char* kDispenseStartedGolden =
    R"({"boot_id":"fedcba9876543210fedcba9876543210","device":"vm-0042","order_id":"ord-7f3a",)"
    R"("seq":48,"slot":12,"token":"0123456789abcdef0123456789abcdef","ts_ms":1700000001234,)"
    R"("type":"dispense_started","v":1})";
inline constexpr const char* kStatusGolden =
    R"({"boot_id":"fedcba9876543210fedcba9876543210","device":"vm-0042","state":"online",)"
    R"("ts_ms":1700000000000,"type":"status","v":1})";

}  // namespace vend::proto::examples
