// Operator messages: what the cloud agent publishes under vend/v1/ops/...
// for people and tools watching the fleet (vendctl watch, mosquitto_sub,
// dashboards). They are informational: unsigned, JSON, versioned ("v": 1),
// and never drive a sale. docs/asyncapi.yaml documents every topic and
// payload; these structs are the single source of that shape.
//
//   vend/v1/ops/fleet              FleetSummary   retained, on change (at most 1/s)
//   vend/v1/ops/devices/{device}   DeviceStatus   retained, on change (at most 1/s per device)
//   vend/v1/ops/orders             OrderEvents    stream: the order transitions of one
//                                                 agent tick (10 ms), oldest first
//   vend/v1/ops/alerts             Alert          stream, raised and cleared
//   vend/v1/ops/reconcile/{device} ReconcileReport retained, one per reconciliation run
//
// Decoding is strict like the device protocol: unknown "v", missing or
// wrong-typed fields fail with a message naming the field. Unknown extra
// fields are ignored (operators' tools must survive a newer agent).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vend/result.hpp"

namespace vend::ops {

inline constexpr int kVersion = 1;

struct SlotStatus {
  int slot = 0;
  std::string product;
  int64_t price_cents = 0;
  int capacity = 0;
  int64_t pool = 0;        // tokens for sale
  int64_t reserved = 0;    // held by RESERVED/PAID orders
  int64_t dispatched = 0;  // held by DISPATCHED orders
  int64_t sold = 0;
  int64_t burned = 0;
  int physical_count = -1;  // from the device's last snapshot; -1 = none yet
  int device_tokens = -1;   // available tokens in that snapshot; -1 = none yet
  bool operator==(const SlotStatus&) const = default;
};

struct DeviceStatus {
  std::string device;
  bool online = false;
  std::string boot_id;
  int64_t last_seen_ms = 0;     // wall clock of its last message; 0 = never
  uint64_t last_seq = 0;        // last event seq the cloud processed
  uint64_t unacked_events = 0;  // processed, not acknowledged yet (cloud side)
  uint64_t outbox_depth = 0;    // device outbox, from its last snapshot
  int64_t snapshot_at_ms = 0;   // wall clock of that snapshot; 0 = none
  // Of the last reconciliation: "" (none), "ok", "repaired", "alert", "pending".
  std::string last_verdict;
  std::vector<SlotStatus> slots;
  int64_t ts_ms = 0;  // when this status was composed
  // Its clock minus the agent's, ms; absent (nullopt) before the first sample.
  std::optional<int64_t> clock_skew_ms;
  // The agent instance serving it (several agents); "" (absent) for one agent.
  std::string owner;
  bool operator==(const DeviceStatus&) const = default;
};

struct FleetSummary {
  int64_t ts_ms = 0;
  int devices = 0;
  int online = 0;
  int64_t stock_total = 0;                         // sum of pools
  std::map<std::string, int64_t> orders_by_state;  // "RESERVED" -> n, ...
  int64_t orders_total = 0;                        // orders created since the agent started
  int64_t alerts_active = 0;
  bool storage_ok = true;  // false once a repository write failed (see /healthz)
  // Several agents: the instance this summary is of (its machines only; on
  // vend/v1/ops/fleet/{instance}); "" (absent) for one agent.
  std::string instance;
  bool operator==(const FleetSummary&) const = default;
};

struct OrderEvent {
  std::string order_id;
  std::string device;
  int slot = 0;
  std::string from_state;  // "" for a new order
  std::string to_state;
  int64_t price_cents = 0;
  std::string reason;  // why FAILED / REFUNDED / NEEDS_REVIEW / CANCELLED; may be ""
  int64_t ts_ms = 0;
  bool operator==(const OrderEvent&) const = default;
};

// What vend/v1/ops/orders carries: transitions batched per agent tick, so a
// fleet selling thousands of orders a second costs the broker tens of
// messages, not thousands (one message per transition delayed the agent's
// own dispense commands in the same MQTT client: docs/benchmarks.md #4).
struct OrderEvents {
  std::vector<OrderEvent> events;  // oldest first; at least one
  bool operator==(const OrderEvents&) const = default;
};

// An order event's fields as views, for OrderEventsWriter: an event is
// written straight from the order, its strings not copied first.
struct OrderEventView {
  std::string_view order_id;
  std::string_view device;
  int slot = 0;
  std::string_view from_state;
  std::string_view to_state;
  int64_t price_cents = 0;
  std::string_view reason;
  int64_t ts_ms = 0;
};

// Writes an OrderEvents message one event at a time (the agent adds each
// transition as it happens and sends the message at its tick): finish()
// returns the bytes encode() gives for the same events, oldest first.
class OrderEventsWriter {
 public:
  void add(const OrderEventView& event);
  size_t size() const { return count_; }
  // The message (with no events added: an empty list). The writer is
  // empty afterwards.
  std::string finish();

 private:
  void open();  // starts the message in out_
  // An event's bytes beyond its texts: the keys, punctuation and three
  // numbers of at most 24 characters each (with room to spare).
  static constexpr size_t kEventBound = 192;

  std::string out_;
  size_t count_ = 0;
  size_t last_bytes_ = 0;  // the previous message's size: the next one's reserve
};

struct Alert {
  std::string code;      // "physical_mismatch", "token_resurrected", "seq_gap", ...
  std::string severity;  // "warning" or "critical"
  std::string state;     // "raised" or "cleared"
  std::string device;    // "" for a fleet-wide alert
  int slot = 0;          // 0 when not about one slot
  std::string message;
  int64_t ts_ms = 0;
  bool operator==(const Alert&) const = default;
};

// One slot of a reconciliation: the cloud and device views, the verdict and what was done.
struct SlotReconcile {
  int slot = 0;
  int64_t pool = 0;
  int64_t reserved = 0;
  int64_t dispatched = 0;
  int physical_count = 0;  // device view
  int device_tokens = 0;   // device view: available tokens
  bool digest_match = false;
  // "match", "in_flight" (differences explained by dispatched work),
  // "repaired" (actions taken), "alert" (needs a person), "pending"
  // (digest mismatch: the full token list was requested).
  std::string verdict;
  std::vector<std::string> actions;  // human-readable, e.g. "+2 tokens the cloud lacked"
  int64_t tokens_added = 0;          // tokens the cloud lacked, added to the pool
  int64_t tokens_removed = 0;        // tokens the device no longer has
  bool operator==(const SlotReconcile&) const = default;
};

struct ReconcileReport {
  std::string id;
  std::string device;
  int64_t ts_ms = 0;
  std::string trigger;        // "periodic", "device", "on_demand", "deadline", "seq_gap"
  std::string request_id;     // of the snapshot it used; "" for an unrequested one
  uint64_t snapshot_seq = 0;  // the snapshot event's seq
  bool full = false;          // the snapshot carried token lists
  std::string verdict;        // worst slot verdict: "ok", "repaired", "alert", "pending"
  std::vector<SlotReconcile> slots;
  bool operator==(const ReconcileReport&) const = default;
};

// Topics (also in vend/topics.hpp: ops_fleet(), ops_device(id), ...).
std::string encode(const FleetSummary& m);
std::string encode(const DeviceStatus& m);
std::string encode(const OrderEvents& m);
std::string encode(const Alert& m);
std::string encode(const ReconcileReport& m);

// Errors use the device protocol's codes (proto::kErr*: "bad_json",
// "oversize", "bad_version", "missing_field", "wrong_type", "out_of_range")
// with a message naming the field ("missing field 'slots[1].pool' in device
// status"). State and verdict strings are not checked against a list (a newer
// agent may add values); ids are checked like protocol ids.
Result<FleetSummary> decode_fleet(std::string_view json);
Result<DeviceStatus> decode_device(std::string_view json);
Result<OrderEvents> decode_order_events(std::string_view json);
Result<Alert> decode_alert(std::string_view json);
Result<ReconcileReport> decode_reconcile(std::string_view json);

}  // namespace vend::ops
