// device_rules (device_rules.hpp): the event stream's and presence's decisions.
#include "devices/device_rules.hpp"

#include <variant>

namespace vend::agent::device_rules {

Intake decide_intake(const DeviceRecord& device, const proto::DeviceEvent& event,
                     const std::string& mac) {
  Intake out;
  uint64_t last = device.acks.last_processed();
  if (event.ledger_id != device.ledger_id) {
    if (device.retired_ledgers.count(event.ledger_id) > 0) {
      out.ledger = Intake::Ledger::kRetired;
      out.action = Intake::Action::kRefuse;
      return out;
    }
    // A device that never sent an event under its first id just names it.
    const bool replaced = !device.ledger_id.empty() || last > 0;
    out.ledger = replaced ? Intake::Ledger::kReplaced : Intake::Ledger::kFirst;
    last = 0;  // the new ledger's seqs start again
  } else if (device.acks.diverged()) {
    out.action = Intake::Action::kDiverged;
    return out;
  }
  if (event.seq <= last) {
    const std::string& known = device.acks.last_mac();
    const bool other = out.ledger == Intake::Ledger::kCurrent && event.seq == last &&
                       !known.empty() && mac != known;
    out.action = other ? Intake::Action::kDiverged : Intake::Action::kReack;
    return out;
  }
  const uint64_t next = last + 1;
  if (event.seq == next) return out;  // kProcess
  // Beyond a gap. Only the device's signed events_unavailable, covering the
  // gap's start and pointing at an event not newer than itself, closes it.
  const auto* gone = std::get_if<proto::EventsUnavailable>(&event.body);
  if (gone == nullptr || gone->from_seq > next || gone->oldest_seq <= next ||
      gone->oldest_seq > event.seq) {
    out.action = Intake::Action::kResend;
    return out;
  }
  out.action = Intake::Action::kSkip;
  out.gap_from = next;
  out.skip_to = gone->oldest_seq - 1;
  out.process_after_skip = event.seq == out.skip_to + 1;
  return out;
}

Presence decide_presence(const DeviceRecord& device, const proto::PresenceStatus& status,
                         bool live) {
  Presence out;
  if (status.online) {
    out.kind = Presence::Kind::kOnline;
    out.changed = !device.online || device.boot_id != status.boot_id;
    out.clock_sample = live;
    return out;
  }
  if (!device.boot_id.empty() && status.boot_id != device.boot_id) {
    out.kind = Presence::Kind::kStaleWill;
    return out;
  }
  out.kind = Presence::Kind::kOffline;
  out.changed = device.online;
  return out;
}

}  // namespace vend::agent::device_rules
