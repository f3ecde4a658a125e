// Reconciliation as a pure function: a device's snapshot and the cloud's
// view of each slot it sells (pool, tokens held by open orders, active
// alerts) go in, with a look-up of which unknown tokens the cloud has never
// seen; the report and the changes that repair the cloud's view come out.
// No clock, no randomness, no repository, no core state: the caller (the
// agent core) gathers the inputs and answers the look-up, then applies the
// changes in the order given.
//
// Per slot, three views are compared:
//
//   cloud   pool + reserved + dispatched   must equal the device's available
//           tokens (count and digest). Dispatched tokens the device already
//           consumed are in flight (their result follows); anything else is
//           repaired from the device: tokens the cloud lacks join the pool,
//           tokens the device no longer has leave it (burned) and cancel a
//           RESERVED order that held one.
//   device  physical count                 must equal its available tokens
//           (plus in-flight dispenses); else an alert, never a sale.
//
// A digest mismatch not explained by in-flight dispatches (tried on a
// digest-only snapshot) asks for the full token list; the exact difference
// is computed from that.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "vend/ops.hpp"
#include "vend/protocol.hpp"
#include "vend/result.hpp"

namespace vend::agent::reconcile {

// A token held by an open order (RESERVED, PAID or DISPATCHED).
struct HeldToken {
  std::string token;
  std::string order_id;
  // RESERVED: a lost token cancels the order. A PAID order's token is held
  // but never cancelled here (its dispatch settles it).
  bool cancellable = false;
};

// The cloud's view of one slot it sells, before the snapshot.
struct CloudSlot {
  // Tokens for sale, in selling order: views of the caller's own copy (the
  // stock's pool), which must outlive the call and not change during it.
  std::vector<std::string_view> pool;
  std::vector<HeldToken> reserved;      // held by RESERVED and PAID orders
  std::vector<std::string> dispatched;  // held by DISPATCHED orders
  int64_t reserved_count = 0;           // the slot's counters (reported)
  int64_t dispatched_count = 0;
  // Alerts of this slot active before the snapshot.
  bool physical_mismatch_alert = false;
  bool token_resurrected_alert = false;
};

// Of `candidates` (well-formed tokens a slot's full list holds and its view
// lacks), the ones the cloud has never seen, neither in memory nor in its
// log: the only ones that may join the pool. Asked only for a slot that has
// such tokens, so a slot that matches costs no look-up. An error (a failed
// read) leaves them neither added nor alerted on.
using FreshLookup = std::function<Result<std::set<std::string>>(
    int slot, const std::vector<std::string>& candidates)>;

struct Input {
  std::string device;
  std::string report_id;  // given by the caller (random)
  int64_t now_ms = 0;     // wall time of the report
  uint64_t snapshot_seq = 0;
  proto::Snapshot snapshot;        // REQUIRES: each slot at most once (the decoder's rule)
  std::map<int, CloudSlot> cloud;  // the slots the cloud sells, by slot number
  FreshLookup fresh;               // unset: no unknown token is fresh
};

// An alert to raise (again, perhaps with a new message) or to clear.
struct AlertChange {
  int slot = 0;
  std::string code;  // "unknown_slot", "token_resurrected", "physical_mismatch", "seq_gap"
  bool raise = false;
  std::string severity;  // raise only: "warning" or "critical"
  std::string message;   // raise only
  bool operator==(const AlertChange&) const = default;
};

// What to change for one snapshot slot, applied in this order: burn, cancel,
// add, request, alerts.
struct SlotChanges {
  int slot = 0;
  bool known = false;      // the cloud sells it (an unknown slot only raises an alert)
  int physical_count = 0;  // the device's view, to remember
  int device_tokens = 0;
  std::vector<std::string> burn_from_pool;  // pool tokens the device no longer has
  std::vector<HeldToken> cancel;            // RESERVED orders whose token is gone
  std::vector<std::string> add_to_pool;     // fresh tokens the cloud lacked, appended
  bool request_full_snapshot = false;       // digest mismatch: ask for the token lists
  std::vector<AlertChange> alerts;          // in order
  std::vector<std::string> warnings;        // lines worth a warning in the log
};

struct Outcome {
  ops::ReconcileReport report;
  std::vector<SlotChanges> slots;   // one per snapshot slot, in snapshot order
  std::vector<AlertChange> alerts;  // device-wide (slot 0), after the slots
};

// The reconciliation of `in.snapshot` against `in.cloud`. Deterministic:
// the same input gives the same outcome. A token added to one slot's pool
// counts as known for the slots after it (it never joins two pools).
Outcome reconcile(const Input& in);

// What asked for the snapshot, from its request id's prefix: "periodic",
// "on_demand", "deadline", "seq_gap", "digest_mismatch",
// "incomplete_snapshot", or "device" (unrequested).
std::string trigger_of(std::string_view request_id);

}  // namespace vend::agent::reconcile
