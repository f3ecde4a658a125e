// Dispense outcomes, acknowledgements and snapshots.
#include <algorithm>
#include <map>
#include <vector>

#include "ledger_internal.hpp"
#include "vend/crypto.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/snapshot_parts.hpp"

namespace vend::fw {

using namespace detail;

namespace {

bool is_terminal(DispenseState s) {
  return s != DispenseState::kAccepted && s != DispenseState::kMotorRunning;
}

// The token's fate and the slot's count for an outcome; `from` is the state
// the dispense leaves.
Status apply_outcome(sql::Database& db, const DispenseRow& d, DispenseState to) {
  std::string token_sql;
  std::string slot_sql;
  switch (to) {
    case DispenseState::kDispensed:
      slot_sql = "UPDATE slots SET physical_count = max(physical_count - 1, 0) WHERE slot = ?";
      break;
    case DispenseState::kFailed:
      // A jam leaves the item in the slot (reconciliation sees it without a
      // token); an empty drop means the item was never there.
      token_sql = "UPDATE tokens SET state = 'BURNED' WHERE token = ?";
      if (d.reason == proto::reason::kEmpty) {
        slot_sql = "UPDATE slots SET physical_count = max(physical_count - 1, 0) WHERE slot = ?";
      }
      break;
    case DispenseState::kUncertain:
      token_sql = "UPDATE tokens SET state = 'BURNED' WHERE token = ?";
      break;
    case DispenseState::kRejected:
      // From ACCEPTED, or from a MOTOR_RUNNING whose start the cloud never
      // acknowledged (the motor waits for that ack): the motor never moved,
      // the item is still there, so its token is for sale again.
      token_sql = "UPDATE tokens SET state = 'AVAILABLE', order_id = NULL WHERE token = ?";
      break;
    default: return make_error("ledger_conflict", "not an outcome state");
  }
  if (!token_sql.empty()) {
    auto r = run(db, token_sql, [&](sql::Statement& st) { st.bind(1, d.token); });
    if (!r.ok()) return r.error();
  }
  if (!slot_sql.empty()) {
    auto r = run(db, slot_sql, [&](sql::Statement& st) { st.bind(1, d.slot); });
    if (!r.ok()) return r.error();
  }
  return {};
}

}  // namespace

Result<proto::DispenseResult> Ledger::finish_dispense(const std::string& order_id,
                                                      DispenseState state,
                                                      const std::string& reason, int64_t now_ms) {
  if (!is_terminal(state)) return make_error("ledger_conflict", "finish needs a terminal state");
  return in_transaction<proto::DispenseResult>(db_, [&]() -> Result<proto::DispenseResult> {
    auto found = find_dispense(order_id);
    if (!found.ok()) return found.error();
    if (!found->has_value()) return make_error("ledger_conflict", "no dispense for " + order_id);
    DispenseRow d = **found;
    bool from_ok = d.state == DispenseState::kMotorRunning ||
                   (d.state == DispenseState::kAccepted && state == DispenseState::kRejected);
    if (!from_ok) {
      return make_error("ledger_conflict", "order " + order_id + " cannot go from " +
                                               to_string(d.state) + " to " + to_string(state));
    }
    d.reason = reason;
    if (auto s = apply_outcome(db_, d, state); !s.ok()) return s.error();
    bool consumed = state != DispenseState::kRejected;
    auto up = run(db_,
                  "UPDATE dispenses SET state = ?, reason = ?, token_consumed = ?, updated_ms = ? "
                  "WHERE order_id = ?",
                  [&](sql::Statement& st) {
                    st.bind(1, to_string(state))
                        .bind(2, reason)
                        .bind(3, consumed ? 1 : 0)
                        .bind(4, now_ms)
                        .bind(5, order_id);
                  });
    if (!up.ok()) return up.error();
    proto::DispenseResult result{order_id, d.slot, d.token, to_status(state), reason, consumed};
    auto seq = append_event_in_tx(result, now_ms);
    if (!seq.ok()) return seq.error();
    return result;
  });
}

Result<proto::DispenseResult> Ledger::record_rejection(const proto::DispenseCommand& c,
                                                       const std::string& reason, int64_t now_ms) {
  return in_transaction<proto::DispenseResult>(db_, [&]() -> Result<proto::DispenseResult> {
    auto ins = run(db_,
                   "INSERT INTO dispenses(order_id, slot, token, state, reason, expires_at_ms, "
                   "token_consumed, accepted_ms, updated_ms) "
                   "VALUES (?, ?, ?, 'REJECTED', ?, ?, 0, ?, ?)",
                   [&](sql::Statement& st) {
                     st.bind(1, c.order_id)
                         .bind(2, c.slot)
                         .bind(3, c.token)
                         .bind(4, reason)
                         .bind(5, c.expires_at_ms)
                         .bind(6, now_ms)
                         .bind(7, now_ms);
                   });
    if (!ins.ok()) return ins.error();
    proto::DispenseResult result{c.order_id, c.slot, c.token, proto::DispenseStatus::kRejected,
                                 reason,     false};
    auto seq = append_event_in_tx(result, now_ms);
    if (!seq.ok()) return seq.error();
    return result;
  });
}

Result<std::map<int, int>> Ledger::sense_counts(InventorySensor* inventory) {
  std::map<int, int> sensed;
  if (inventory == nullptr) return sensed;
  auto st = db_.prepare("SELECT slot FROM slots ORDER BY slot");
  if (!st.ok()) return st.error();
  std::vector<int> slots;
  while (true) {
    auto more = st->step();
    if (!more.ok()) return more.error();
    if (!*more) break;
    slots.push_back(st->column_int(0));
  }
  for (int slot : slots) {
    if (auto count = inventory->count(slot)) sensed[slot] = *count;
  }
  return sensed;
}

Result<proto::Snapshot> Ledger::build_snapshot(const std::string& request_id, bool full,
                                               const std::map<int, int>& sensed) {
  auto rows = slots();
  if (!rows.ok()) return rows.error();
  proto::Snapshot snap;
  snap.request_id = request_id;
  for (const auto& row : *rows) {
    auto tokens = available_tokens(row.slot);
    if (!tokens.ok()) return tokens.error();
    proto::SlotSnapshot s;
    s.slot = row.slot;
    auto it = sensed.find(row.slot);
    s.physical_count = it != sensed.end() ? it->second : row.physical_count;
    s.available_tokens = static_cast<int>(tokens->size());
    s.digest = crypto::token_digest(*tokens);
    if (full) s.tokens = std::move(tokens).value();
    snap.slots.push_back(std::move(s));
  }
  auto depth = outbox_depth();
  if (!depth.ok()) return depth.error();
  snap.outbox_depth = static_cast<uint64_t>(*depth);
  return snap;
}

Result<proto::Snapshot> Ledger::snapshot(const std::string& request_id, bool full,
                                         InventorySensor* inventory) {
  auto sensed = sense_counts(inventory);
  if (!sensed.ok()) return sensed.error();
  return in_transaction<proto::Snapshot>(db_,
                                         [&] { return build_snapshot(request_id, full, *sensed); });
}

Result<uint64_t> Ledger::append_snapshot(const std::string& request_id, bool full,
                                         InventorySensor* inventory, int64_t now_ms) {
  // The sensor is read first, outside the write lock (it is hardware); the
  // ledger's part is read in the transaction that gives the snapshot its
  // seqs: every part is appended in it, so no other event falls between
  // them and all of them show one state of the ledger.
  auto sensed = sense_counts(inventory);
  if (!sensed.ok()) return sensed.error();
  return in_transaction<uint64_t>(db_, [&]() -> Result<uint64_t> {
    auto snap = build_snapshot(request_id, full, *sensed);
    if (!snap.ok()) return snap.error();
    auto parts = proto::split_snapshot(std::move(snap).value());
    if (!parts.ok()) return parts.error();
    uint64_t last = 0;
    for (proto::Snapshot& part : *parts) {
      auto seq = append_event_in_tx(std::move(part), now_ms);
      if (!seq.ok()) return seq.error();
      last = *seq;
    }
    return last;
  });
}

}  // namespace vend::fw
