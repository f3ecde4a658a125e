// Protocol v1: every message between the cloud agent and a device, with a
// strict JSON codec. docs/protocol.md is the prose; tests/common/
// protocol_test.cpp holds golden examples.
//
// Wire form: one JSON object per MQTT message, `"v"` (1 for events and
// statuses; 2 for commands, which still decode v1), a `type`, the fields
// below (units in names), and `mac`: lowercase hex HMAC-SHA256, under the
// device's key, of the message's canonical form — the same object without
// `mac`, keys sorted, no whitespace (what encode_canonical returns).
//
// Decoding is strict: oversize payload, bad JSON, unknown `type`, unknown or
// missing field, wrong JSON type, out-of-range value all give an Error whose
// code is one of kErr* and whose message names the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "vend/result.hpp"

namespace vend::proto {

inline constexpr int kVersion = 1;  // events and statuses
// Commands: v2 adds `expires_at_ms` to every command, the hard bound after
// which the device must not act on it (its clock; the sender's tolerance for
// clock skew included). v1 commands (no expiry but a dispense's, which the
// device extends by its own core.expiry_skew_ms) still decode; whether a
// device accepts them is its configuration (docs/protocol.md, Versioning).
inline constexpr int kCommandVersion = 2;
// Largest payload accepted. A snapshot larger than this goes out in parts
// (Snapshot::part / parts, vend/snapshot_parts.hpp).
inline constexpr size_t kMaxPayloadBytes = 256 * 1024;
inline constexpr int kMaxSlot = 255;           // slots are numbered 1..kMaxSlot
inline constexpr int kMaxRestockCount = 1000;  // items in one restock
inline constexpr size_t kMaxTokensPerMessage = 4096;
inline constexpr size_t kMaxIdLength = 64;     // device, order, restock, request ids
inline constexpr size_t kMaxTextLength = 512;  // fault messages, reasons
// Parts of one snapshot. A full snapshot of 255 slots x 1000 tokens takes
// about 36; the bound leaves room and limits what a receiver buffers.
inline constexpr int kMaxSnapshotParts = 256;
// Update artifacts: a firmware package is a few MB; the bound keeps a bad
// command from filling the data partition.
inline constexpr uint64_t kMaxUpdateBytes = 256ull * 1024 * 1024;
inline constexpr size_t kMaxUrlLength = 512;
inline constexpr size_t kMaxVersionLength = 32;

// Error codes of decoding.
inline constexpr const char* kErrOversize = "oversize";
inline constexpr const char* kErrBadJson = "bad_json";
inline constexpr const char* kErrBadVersion = "bad_version";
inline constexpr const char* kErrUnknownType = "unknown_type";
inline constexpr const char* kErrMissingField = "missing_field";
inline constexpr const char* kErrUnknownField = "unknown_field";
inline constexpr const char* kErrWrongType = "wrong_type";
inline constexpr const char* kErrOutOfRange = "out_of_range";

// ---- Commands: cloud -> device, on vend/v1/dev/{device}/cmd -------------
// Each has `expires_at_ms` (wall clock, Unix ms; encoded for v2, and for a
// dispense in v1 too) and `v` (kCommandVersion unless decoded from a v1
// message).

// Dispense one item from `slot` for `order_id`, spending `token`.
// `ledger_id` and `ledger_seq` (optional, together; "" = not sent) are the
// sender's view of the device's ledger: its id and the last seq of it the
// cloud has processed. A device whose ledger is another one the cloud has
// not seen, or holds fewer seqs of that one (it went back in time), may not
// know what the lost part of its file did for this order: it refuses the
// command and starts a new ledger before it dispenses anything.
// `ledger_mac` (optional, with them; "" = unknown) is the mac of the event
// at ledger_seq: a file that holds another event there (an older copy that
// has since written its own seqs) went back in time too.
struct DispenseCommand {
  std::string device;
  std::string order_id;
  int slot = 0;
  std::string token;          // 32 lowercase hex chars (128 bits)
  int64_t expires_at_ms = 0;  // v2: the hard bound; v1: plus the device's skew tolerance
  int v = kCommandVersion;
  std::string ledger_id = {};
  uint64_t ledger_seq = 0;  // sent with ledger_id only
  std::string ledger_mac = {};
  bool operator==(const DispenseCommand&) const = default;
};

// A restock order: an operator is to load `count` items into `slot`. The
// device mints tokens only when the load is confirmed at the machine.
struct RestockCommand {
  std::string device;
  std::string restock_id;
  int slot = 0;
  int count = 0;
  int64_t expires_at_ms = 0;  // v2 only
  int v = kCommandVersion;
  bool operator==(const RestockCommand&) const = default;
};

// Ask for a snapshot; `full` adds every available token id.
struct SnapshotRequest {
  std::string device;
  std::string request_id;
  bool full = false;
  int64_t expires_at_ms = 0;  // v2 only
  int v = kCommandVersion;
  bool operator==(const SnapshotRequest&) const = default;
};

// The cloud has processed every event of this device with seq <= upto_seq.
// `ledger_id` (optional; "" = not sent) names the ledger whose seqs these
// are: a device ignores an ack for another ledger (an old SD card's).
// `upto_mac` (optional; "" = not sent) is the `mac` of the event at
// upto_seq as the cloud processed it: a device whose own event at that seq
// has another mac (its ledger went back in time: a restored or cloned SD
// card, a power loss at synchronous=normal) deletes nothing and starts a
// new ledger, as it does for an ack beyond its last seq.
struct Ack {
  std::string device;
  uint64_t upto_seq = 0;
  std::string ledger_id = {};
  std::string upto_mac = {};
  int64_t expires_at_ms = 0;  // v2 only
  int v = kCommandVersion;
  bool operator==(const Ack&) const = default;
};

// The cloud saw a seq gap: re-publish every held event with seq >= from_seq.
// A device that no longer holds from_seq (acknowledged earlier, e.g. before
// the cloud's database was restored) answers with an EventsUnavailable event
// and re-publishes from its oldest held one.
struct ResendRequest {
  std::string device;
  uint64_t from_seq = 1;       // >= 1
  std::string ledger_id = {};  // optional, as in Ack: a device ignores another ledger's
  int64_t expires_at_ms = 0;   // v2 only
  int v = kCommandVersion;
  bool operator==(const ResendRequest&) const = default;
};

// Publish the retained `online` status again (the cloud saw no verified
// status of this device, or one it cannot trust). Answered at most once a
// second.
struct StatusRequest {
  std::string device;
  int64_t expires_at_ms = 0;  // v2 only
  int v = kCommandVersion;
  bool operator==(const StatusRequest&) const = default;
};

// Install firmware `version`: download `size_bytes` from `url`, check that
// its SHA-256 is `sha256` and that `signature` (Ed25519, by the fleet's update
// key, not a device key: vend/update_signature.hpp) covers version, size and
// hash, then install it when the machine is idle. v2 only (a v1 `update` is
// bad_version): it expires like every v2 command. The device reports progress
// as UpdateStatus events carrying `update_id`.
struct UpdateCommand {
  std::string device;
  std::string update_id;
  std::string version;      // is_valid_version: dotted numbers, "1.4.0"
  std::string url;          // http:// or https://, at most kMaxUrlLength bytes
  uint64_t size_bytes = 0;  // 1..kMaxUpdateBytes
  std::string sha256;       // 64 lowercase hex chars
  std::string signature;    // 128 lowercase hex chars (64-byte Ed25519 signature)
  int64_t expires_at_ms = 0;
  int v = kCommandVersion;
  bool operator==(const UpdateCommand&) const = default;
};

using Command = std::variant<DispenseCommand, RestockCommand, SnapshotRequest, Ack, ResendRequest,
                             StatusRequest, UpdateCommand>;

// ---- Events: device -> cloud, on vend/v1/dev/{device}/evt ---------------

enum class DispenseStatus { kDispensed, kFailed, kRejected, kUncertain };
const char* to_string(DispenseStatus status);
std::optional<DispenseStatus> parse_dispense_status(std::string_view text);

// Rejection and failure reasons (the `reason` of a DispenseResult).
namespace reason {
inline constexpr const char* kBadMac = "bad_mac";
inline constexpr const char* kWrongDevice = "wrong_device";
inline constexpr const char* kUnknownSlot = "unknown_slot";
inline constexpr const char* kUnknownToken = "unknown_token";
inline constexpr const char* kTokenConsumed = "token_consumed";
inline constexpr const char* kExpired = "expired";
inline constexpr const char* kMalformed = "malformed";
inline constexpr const char* kBusy = "busy";
inline constexpr const char* kJam = "jam";               // FAILED: motor stalled
inline constexpr const char* kEmpty = "empty";           // FAILED: nothing dropped
inline constexpr const char* kPowerLoss = "power_loss";  // UNCERTAIN: reboot mid-motor
}  // namespace reason

// The outcome of one dispense command. `token_consumed` says whether the
// token is spent: false only for REJECTED (the cloud may put it back in the
// pool); a FAILED or UNCERTAIN dispense has consumed it.
struct DispenseResult {
  std::string order_id;
  int slot = 0;
  std::string token;
  DispenseStatus status = DispenseStatus::kRejected;
  std::string reason;  // empty for DISPENSED
  bool token_consumed = false;
  bool operator==(const DispenseResult&) const = default;
};

// The motor is about to move for an order: stored with MOTOR_RUNNING, in the
// same ledger transaction. Sent only for a dispense command that named the
// ledger (ledger_id): its agent processes this event and acknowledges it at
// once, and the motor waits for that ack. So the cloud has processed this
// seq before any item drops, and a restored copy of the ledger that lacks it
// is caught by the command fence (its last seq is below the cloud's).
struct DispenseStarted {
  std::string order_id;
  int slot = 0;
  std::string token;
  bool operator==(const DispenseStarted&) const = default;
};

// New sale tokens minted by a confirmed restock, one per item loaded.
struct TokensMinted {
  std::string restock_id;
  int slot = 0;
  std::vector<std::string> tokens;
  int physical_count = 0;  // items in the slot after the load
  bool operator==(const TokensMinted&) const = default;
};

struct SlotSnapshot {
  int slot = 0;
  int physical_count = 0;
  int available_tokens = 0;
  std::string digest;                              // token_digest() of the available token ids
  std::optional<std::vector<std::string>> tokens;  // only when asked for `full`
  bool operator==(const SlotSnapshot&) const = default;
};

// A snapshot too large for one message is sent as `parts` events (2..
// kMaxSnapshotParts) with consecutive seqs, written in one ledger
// transaction: part p (1..parts) has seq = first seq + p - 1, and every part
// carries the same request_id and outbox_depth. Slots are in ascending order
// across the parts; a slot whose token list does not fit is continued as the
// first entry of the next part (same slot, counts and digest; the next
// tokens). On the wire `part`/`parts` are absent for a snapshot in one
// message (1 of 1), and present only when parts >= 2.
struct Snapshot {
  std::string request_id;  // empty for a periodic snapshot
  std::vector<SlotSnapshot> slots;
  uint64_t outbox_depth = 0;
  int part = 1;   // 1..parts
  int parts = 1;  // 1..kMaxSnapshotParts
  bool operator==(const Snapshot&) const = default;
};

struct Fault {
  std::string code;  // e.g. "outbox_near_full", "jam", "uncertain_dispense"
  std::string message;
  int slot = 0;  // 0 when not about a slot
  bool operator==(const Fault&) const = default;
};

// The answer to a ResendRequest the device cannot fill: the events
// from_seq..oldest_seq-1 were acknowledged and deleted; oldest_seq is the
// oldest event it still holds (this event's own seq at most).
// The decoder checks from_seq < oldest_seq.
struct EventsUnavailable {
  uint64_t from_seq = 1;
  uint64_t oldest_seq = 2;
  bool operator==(const EventsUnavailable&) const = default;
};

// Where a firmware update stands on the device, one event per step:
// downloading, verified, installing, installed (`version` now runs), failed
// (`reason` says why; nothing changed), rolled_back (`version` did not pass
// its health check; the previous one runs again, `reason` says why).
enum class UpdateState { kDownloading, kVerified, kInstalling, kInstalled, kFailed, kRolledBack };
const char* to_string(UpdateState state);
std::optional<UpdateState> parse_update_state(std::string_view text);

struct UpdateStatus {
  std::string update_id;
  UpdateState state = UpdateState::kFailed;
  std::string version;  // the version the update is about
  std::string reason;   // empty but for failed and rolled_back
  bool operator==(const UpdateStatus&) const = default;
};

using EventBody = std::variant<DispenseResult, TokensMinted, Snapshot, Fault, EventsUnavailable,
                               DispenseStarted, UpdateStatus>;

// Every device event carries the device's persisted, strictly increasing
// `seq` (the dedup key with `device`) and the `boot_id` of the session that
// sent it. `ts_ms` is informational only. `ledger_id` (optional on the
// wire; "" = a device that sends none) names the ledger the seq belongs to: a
// new ledger (a reflashed SD card, a replacement board) starts at seq 1 under
// a new id, so the dedup key is (device, ledger_id, seq).
struct DeviceEvent {
  std::string device;
  uint64_t seq = 0;
  std::string boot_id;
  int64_t ts_ms = 0;
  EventBody body;
  std::string ledger_id = {};
  bool operator==(const DeviceEvent&) const = default;
};

// ---- Presence: device -> cloud, retained, on vend/v1/dev/{device}/status -

// `online` on connect; the last will is the same with online=false. The
// cloud ignores an `offline` whose boot_id is not the current session's.
struct PresenceStatus {
  std::string device;
  std::string boot_id;
  bool online = false;
  int64_t ts_ms = 0;
  bool operator==(const PresenceStatus&) const = default;
};

// ---- Codec --------------------------------------------------------------

// A decoded message with its claimed MAC and the canonical bytes the MAC
// must cover (recomputed from the decoded fields, so whitespace and key order
// on the wire do not matter).
template <typename T>
struct Decoded {
  T message;
  std::string mac;
  std::string canonical;
};

// A command's `v` and `expires_at_ms` (every command type has both).
int command_version(const Command& command);
int64_t command_expires_at_ms(const Command& command);

std::string encode_canonical(const Command& command);
std::string encode_canonical(const DeviceEvent& event);
std::string encode_canonical(const PresenceStatus& status);

// The wire form: canonical object plus "mac".
std::string encode(const Command& command, std::string_view mac_hex);
std::string encode(const DeviceEvent& event, std::string_view mac_hex);
std::string encode(const PresenceStatus& status, std::string_view mac_hex);

Result<Decoded<Command>> decode_command(std::string_view payload);
Result<Decoded<DeviceEvent>> decode_event(std::string_view payload);
Result<Decoded<PresenceStatus>> decode_status(std::string_view payload);

// The device a command is addressed to.
const std::string& command_device(const Command& command);
// "dispense", "restock", "snapshot_request", "ack", "resend", "status_request",
// "update" / "dispense_result", ..., "events_unavailable", "update_status"
const char* type_name(const Command& command);
const char* type_name(const EventBody& body);

// Validators shared by the codec, topics and config loaders.
// Ids: 1..kMaxIdLength chars of [A-Za-z0-9._-].
bool is_valid_id(std::string_view id);
// Tokens and boot ids: exactly 32 lowercase hex chars.
bool is_valid_token(std::string_view token);
// Firmware versions: 1..4 dot-separated decimal numbers of 1..9 digits each
// ("0.1.0", "1.12"), at most kMaxVersionLength chars.
bool is_valid_version(std::string_view version);
// Update URLs: http:// or https:// and a host, at most kMaxUrlLength bytes,
// no spaces, quotes, angle brackets, backslashes, carets, backquotes or braces.
bool is_valid_update_url(std::string_view url);
// Orders two valid versions number by number ("1.10" > "1.9", "1.2" ==
// "1.2.0"): negative, zero or positive.
int compare_versions(std::string_view a, std::string_view b);

}  // namespace vend::proto
