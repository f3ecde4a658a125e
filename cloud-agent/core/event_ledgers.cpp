// EventDesk: each event's place in its device's stream -- its ledger
// (current, first, replaced, retired), its seq (next, duplicate, beyond a
// gap), a ledger that went back in time -- and the late results of retired
// ledgers.
#include <algorithm>

#include "core/event_desk.hpp"
#include "core/order_desk.hpp"
#include "core/output.hpp"
#include "core/writes.hpp"

namespace vend::agent {

namespace {
// Late results of retired ledgers judged per device, remembered so that a
// swapped board still sending its outbox is not judged again every resend.
constexpr size_t kLateResultsRemembered = 64;
}  // namespace

bool EventDesk::admit_event(DeviceRecord& dev, const proto::DeviceEvent& event,
                            const std::string& mac, const std::string& what) {
  const device_rules::Intake intake = device_rules::decide_intake(dev, event, mac);
  using Action = device_rules::Intake::Action;
  if (intake.ledger == device_rules::Intake::Ledger::kRetired) {
    on_retired_event(dev, event, mac, what);
    return false;
  }
  if (intake.ledger != device_rules::Intake::Ledger::kCurrent) {
    if (!writes_.writable().ok()) return false;  // unacknowledged: it comes again
    switch_ledger(dev, event.ledger_id, intake.ledger == device_rules::Intake::Ledger::kReplaced);
  }
  switch (intake.action) {
    case Action::kRefuse: return false;  // kRetired, above
    case Action::kReack:
      ++counters.duplicate_events_total;
      want_ack(dev);  // its ack may have been lost
      return false;
    case Action::kDiverged: ledger_diverged(dev, event, what); return false;
    case Action::kResend:
      if (!writes_.writable().ok()) return false;
      out_.request_resend(dev);
      log.debug(detail::kLog, dev.id + " " + what + " skipped: waiting for seq " +
                                  std::to_string(dev.acks.last_processed() + 1));
      return false;  // unacknowledged: the device resends in order
    case Action::kSkip:
      if (!writes_.writable().ok()) return false;
      skip_seq_gap(dev, intake);
      return intake.process_after_skip;  // else older held ones first
    case Action::kProcess: return true;
  }
  return false;
}

// The device's file went back in time under the same ledger id (a restored
// or cloned SD card, a power loss at synchronous=normal): its new events
// reuse seqs the log holds other events under. None is processed or
// acknowledged as a duplicate; the ack of what was processed, with its mac,
// tells the device that its ledger is not the one processed here, and it
// goes on as a new ledger (the board-replacement path, switch_ledger).
void EventDesk::ledger_diverged(DeviceRecord& dev, const proto::DeviceEvent& event,
                                const std::string& what) {
  ++counters.diverged_events_total;
  if (!dev.acks.diverged()) {
    dev.acks.diverge();
    log.warn(detail::kLog, dev.id + ": " + what + " is not the event processed under seq " +
                               std::to_string(dev.acks.last_processed()) + ": ledger '" +
                               event.ledger_id +
                               "' went back in time; waiting for the device's new ledger");
  }
  out_.reject_message(
      dev.id, "ledger_diverged",
      what + " of ledger '" + event.ledger_id + "', which went back in time: not processed");
  want_ack(dev);  // the device learns it from the ack's seq and mac
}

// A late event of a card or board that was replaced: its ledger is gone from
// the machine, so it no longer adds tokens or snapshots. A dispense result
// is another matter: the item left (or did not leave) the machine whatever
// became of the board, so the order desk judges it like any result -- it
// settles an order still waiting for it, or raises the dispense
// contradiction for one settled otherwise. Never acknowledged (the cloud
// keeps no seqs of a retired ledger); each result is judged once.
void EventDesk::on_retired_event(DeviceRecord& dev, const proto::DeviceEvent& event,
                                 const std::string& mac, const std::string& what) {
  ++counters.retired_ledger_events_total;
  const auto* result = std::get_if<proto::DispenseResult>(&event.body);
  const std::string where =
      " of retired ledger '" + event.ledger_id + "' (current '" + dev.ledger_id + "')";
  if (result == nullptr) return out_.reject_message(dev.id, "retired_ledger", what + where);
  auto& judged = dev.late_results_judged;
  if (std::find(judged.begin(), judged.end(), mac) != judged.end()) return;
  if (!writes_.writable().ok()) return;  // judged when it comes again
  Changeset changes;
  if (auto s = order_desk_.on_result(dev, *result, changes); !s.ok()) {
    log.warn(detail::kLog,
             dev.id + " " + what + where + " not judged yet: " + s.error().to_string());
    return;
  }
  if (!changes.empty()) (void)writes_.commit(std::move(changes));
  judged.push_back(mac);
  if (judged.size() > kLateResultsRemembered) judged.pop_front();
  log.info(detail::kLog, dev.id + " " + what + where + ": judged as a late result");
  out_.mark_device_dirty(dev.id);
}

// The device sends seq N+k while the cloud expects N+1. Nothing is ever
// acknowledged past N, so the device still holds N+1.. unless it deleted
// them on an earlier ack the cloud no longer remembers (a restored
// database). Ask it to resend from N+1; only its signed events_unavailable
// answer lets the seq skip, and then a full snapshot repairs the token views.
void EventDesk::skip_seq_gap(DeviceRecord& device, const device_rules::Intake& gap) {
  Changeset changes;
  changes.advance_device_seq(device.id, device.acks.last_processed(), gap.skip_to, "");
  device.acks.processed(gap.skip_to, writes_.commit(std::move(changes)));
  schedule_ack(device);
  ++counters.seq_gaps_total;
  out_.raise_alert(
      device.id, 0, "seq_gap", "critical",
      "events " + std::to_string(gap.gap_from) + ".." + std::to_string(gap.skip_to) +
          " were acknowledged to the device but are missing here (restored database?); "
          "the device confirmed they are gone; reconciling from a full snapshot");
  out_.request_check_snapshot(device, "gap-");
  device.resend_requested_mono_ms = 0;
  if (!gap.process_after_skip) out_.request_resend(device);  // from its oldest held event on
}

void EventDesk::switch_ledger(DeviceRecord& dev, const std::string& ledger_id, bool replaced) {
  Changeset changes;
  changes.switch_ledger(dev.id, dev.ledger_id, dev.acks.last_processed(), ledger_id,
                        clock.wall_ms());
  // What was dispatched under the old ledger may have run there, in a part
  // the new one does not hold: those tokens are never sold again. Marked in
  // the switch's changeset: durable with it, or neither.
  const size_t marked = replaced ? order_desk_.mark_ledger_replaced(dev.id, changes) : 0;
  // The old ledger's commits still run in order before the new one's; its
  // acks are moot (the device no longer holds those seqs), a failed write
  // still stops the core through the writer's failure count.
  Ticket switched = writes_.commit(std::move(changes));
  const std::string old_id = dev.ledger_id;
  const uint64_t old_seq = dev.acks.last_processed();
  dev.retired_ledgers.insert(old_id);  // "" too: a named ledger never goes back to none
  dev.ledger_id = ledger_id;
  dev.acks.restart(std::move(switched));
  dev.resend_requested_mono_ms = 0;
  out_.mark_device_dirty(dev.id);
  if (!replaced) {
    log.info(detail::kLog, dev.id + ": ledger " + ledger_id);
    return;
  }
  ++counters.ledgers_replaced_total;
  out_.raise_alert(dev.id, 0, "ledger_replaced", "warning",
                   "new ledger '" + ledger_id + "' (seq from 1) replaces ledger '" + old_id +
                       "' at seq " + std::to_string(old_seq) +
                       " (reflashed SD card, new board, or a ledger that went back in time); "
                       "reconciling from a full snapshot" +
                       (marked == 0 ? std::string()
                                    : "; " + std::to_string(marked) +
                                          " order(s) dispatched under the old ledger keep "
                                          "their tokens out of sale"));
  out_.request_check_snapshot(dev, "ledger-");
}

}  // namespace vend::agent
