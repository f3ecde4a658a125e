// EventDesk: snapshot events, whole or in parts, and their reconciliation.
// A part is processed (its seq advances and is acknowledged like any
// event's) once the assembler holds it; only the whole snapshot is stored and
// reconciled. A restart loses the held parts, while the device has already
// deleted the acknowledged ones: the later parts then arrive as orphans and
// the agent asks for a new full snapshot (docs/design-decisions.md).
//
// Every snapshot a device sends (on its own, on the periodic request, on
// demand, or to settle a stuck dispatch) is compared slot by slot with the
// cloud's view by the pure reconcile::reconcile (cloud-agent/reconcile/);
// this file gathers its inputs from memory (and the log, for tokens it may
// never have seen) and applies the changes it returns. The snapshot is an
// event in the device's seq order, so every event before it (results,
// minted tokens) is already applied: the views are comparable exactly.
#include <algorithm>

#include "core/event_desk.hpp"
#include "core/order_desk.hpp"
#include "core/output.hpp"
#include "core/writes.hpp"

namespace vend::agent {

using Outcome = SnapshotAssembler::Outcome;

void EventDesk::on_snapshot(DeviceRecord& device, const proto::DeviceEvent& event,
                            const std::string& canonical, proto::Snapshot snapshot,
                            Changeset& changes) {
  const int parts = snapshot.parts;
  SnapshotAssembler::Added added =
      snapshot_parts_.add(device.id, event.boot_id, event.seq, std::move(snapshot));
  if (added.superseded) {
    log.info(detail::kLog, device.id + ": an unfinished snapshot in parts gave way to seq " +
                               std::to_string(event.seq));
  }
  if (added.outcome == Outcome::kPending || added.outcome == Outcome::kDuplicate) return;
  if (added.outcome != Outcome::kComplete) return snapshot_part_dropped(device, event, added);
  proto::Snapshot& whole = added.snapshot;
  if (parts == 1) {
    changes.put_snapshot(device.id, canonical, clock.wall_ms());
  } else {  // the joined parts, as one (unsigned) canonical event
    changes.put_snapshot(device.id,
                         proto::encode_canonical(proto::DeviceEvent{
                             event.device, event.seq, event.boot_id, event.ts_ms, whole}),
                         clock.wall_ms());
    log.info(detail::kLog, device.id + ": snapshot of " + std::to_string(parts) + " parts (seq " +
                               std::to_string(added.first_seq) + ".." + std::to_string(event.seq) +
                               ") joined");
  }
  bool full = std::any_of(whole.slots.begin(), whole.slots.end(),
                          [](const proto::SlotSnapshot& s) { return s.tokens.has_value(); });
  if (full) order_desk_.resolve_overdue(device.id, event.ts_ms, whole, changes);
  reconcile(device, event, std::move(whole), changes);
}

void EventDesk::snapshot_part_dropped(DeviceRecord& device, const proto::DeviceEvent& event,
                                      const SnapshotAssembler::Added& added) {
  const std::string what = "snapshot part seq " + std::to_string(event.seq) + " (" +
                           to_string(added.outcome) + "): " + added.problem;
  if (!added.first_drop) {
    log.debug(detail::kLog, device.id + ": " + what);
    return;
  }
  if (added.outcome == Outcome::kOrphan) {
    log.warn(detail::kLog, device.id + ": " + what + "; asking for a new snapshot");
  } else {
    // Signed by the device, yet the parts do not make one snapshot: counted.
    out_.reject_message(device.id, "bad_snapshot_part", what);
  }
  if (added.outcome == Outcome::kTooLarge) return;  // it would be too large again
  proto::SnapshotRequest request{device.id, "prt-" + random.id128().substr(0, 16), true};
  (void)out_.publish_command(device, request);
}

// The cloud's view of the snapshot's slots: pools (views of the stock's,
// which nothing changes before reconcile() returns), tokens held by open
// orders, the slots' alerts.
std::map<int, reconcile::CloudSlot> EventDesk::cloud_view(const DeviceRecord& device,
                                                          const proto::Snapshot& snapshot) {
  std::map<int, reconcile::CloudSlot> out;
  for (const auto& seen : snapshot.slots) {
    const StockSlot* found = stock_.find(device.id, seen.slot);
    if (found == nullptr) continue;
    const StockSlot& slot = *found;
    reconcile::CloudSlot& c = out[seen.slot];
    c.pool.assign(slot.pool.begin(), slot.pool.end());
    c.reserved_count = slot.reserved;
    c.dispatched_count = slot.dispatched;
    c.physical_mismatch_alert = out_.alert_active(device.id, seen.slot, "physical_mismatch");
    c.token_resurrected_alert = out_.alert_active(device.id, seen.slot, "token_resurrected");
  }
  if (out.empty()) return out;
  for (OrderRef ref : orders_.open_orders()) {
    const OrderRec& rec = *orders_.at(ref);
    if (rec.order.device != device.id) continue;
    auto c = out.find(rec.order.slot);
    if (c == out.end()) continue;
    if (rec.order.state == OrderState::kDispatched) {
      c->second.dispatched.push_back(rec.order.token);
    } else {
      bool cancellable = rec.order.state == OrderState::kReserved;
      c->second.reserved.push_back({rec.order.token, rec.order.id, cancellable});
    }
  }
  return out;
}

void EventDesk::reconcile(DeviceRecord& device, const proto::DeviceEvent& event,
                          proto::Snapshot snapshot, Changeset& changes) {
  reconcile::Input in;
  in.device = device.id;
  in.report_id = "rpt-" + random.id128().substr(0, 16);
  in.now_ms = clock.wall_ms();
  in.snapshot_seq = event.seq;
  in.snapshot = std::move(snapshot);
  in.cloud = cloud_view(device, in.snapshot);
  // Asked only for the listed tokens a slot's view lacks (memory, then the log).
  in.fresh = [this](int,
                    const std::vector<std::string>& candidates) -> Result<std::set<std::string>> {
    auto fresh = fresh_tokens(candidates);
    if (!fresh.ok()) return fresh.error();
    return std::set<std::string>(fresh->begin(), fresh->end());
  };
  reconcile::Outcome outcome = reconcile::reconcile(in);
  for (const auto& slot : outcome.slots) apply_reconcile(device, slot, changes);
  for (const auto& alert : outcome.alerts) apply_alert(device.id, alert);

  const ops::ReconcileReport& report = outcome.report;
  for (const auto& slot : report.slots) {
    counters.tokens_removed_total += slot.tokens_removed;
    counters.tokens_added_total += slot.tokens_added;
  }
  device.outbox_depth = in.snapshot.outbox_depth;
  device.snapshot_at_ms = report.ts_ms;
  device.last_verdict = report.verdict;
  device.last_report = ops::encode(report);
  changes.put_reconcile_report(device.id, device.last_report, report.ts_ms);
  out_.publish_reconcile_report(device.id, device.last_report);
  ++counters.reconcile_runs_total;
  out_.mark_device_dirty(device.id);
  if (report.verdict == "repaired" || report.verdict == "alert") {
    log.warn(detail::kLog, "reconcile " + device.id + " (" + report.trigger +
                               "): " + report.verdict + "; see GET /v1/reconcile/" + device.id);
  }
}

void EventDesk::apply_alert(const std::string& device, const reconcile::AlertChange& a) {
  if (a.raise) {
    out_.raise_alert(device, a.slot, a.code, a.severity, a.message);
  } else {
    out_.clear_alert(device, a.slot, a.code);
  }
}

// One slot's changes, in the order reconcile.hpp gives: burn, cancel, add,
// request, alerts.
void EventDesk::apply_reconcile(DeviceRecord& device, const reconcile::SlotChanges& c,
                                Changeset& changes) {
  StockSlot* slot = c.known ? stock_.find(device.id, c.slot) : nullptr;
  if (slot != nullptr) {
    slot->physical_count = c.physical_count;
    slot->device_tokens = c.device_tokens;
    burn_lost_tokens(device.id, c, changes);
    if (!c.add_to_pool.empty()) {
      stock_.add_to_pool(device.id, c.slot, c.add_to_pool);
      changes.insert_pool_tokens(device.id, c.slot, "reconcile", c.add_to_pool);
    }
    for (const auto& line : c.warnings) {
      log.warn(detail::kLog, device.id + " slot " + std::to_string(c.slot) + ": " + line);
    }
    if (c.request_full_snapshot) out_.request_check_snapshot(device, "full-");
  }
  for (const auto& alert : c.alerts) apply_alert(device.id, alert);
}

// Tokens the device no longer has leave the pool (burned); a reservation
// holding one is cancelled (rules::decide_token_lost).
void EventDesk::burn_lost_tokens(const std::string& device, const reconcile::SlotChanges& c,
                                 Changeset& changes) {
  for (const auto& t : stock_.burn_from_pool(device, c.slot, c.burn_from_pool)) {
    changes.move_token(t, TokenState::kPool, TokenState::kBurned, "");
  }
  for (const auto& held : c.cancel) {
    OrderRec* rec = orders_.find(held.order_id);
    if (rec == nullptr) continue;
    if (auto settlement = rules::decide_token_lost(rec->order))
      order_desk_.settle(*rec, *settlement, changes);
  }
}

}  // namespace vend::agent
