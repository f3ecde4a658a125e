// AgentCore::State: snapshot events, whole or in parts. A part is processed
// (its seq advances and is acknowledged like any event's) once the
// assembler holds it; only the whole snapshot is stored and reconciled. A
// restart loses the held parts, while the device has already deleted the
// acknowledged ones: the later parts then arrive as orphans and the agent
// asks for a new full snapshot (docs/design-decisions.md).
#include <algorithm>

#include "agent_state.hpp"

namespace vend::agent {

using Outcome = SnapshotAssembler::Outcome;

void AgentCore::State::on_snapshot(DeviceRecord& device, const proto::DeviceEvent& event,
                                   const std::string& canonical, proto::Snapshot snapshot,
                                   Changeset& changes) {
  const int parts = snapshot.parts;
  SnapshotAssembler::Added added =
      snapshot_parts.add(device.id, event.boot_id, event.seq, std::move(snapshot));
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
  if (full) resolve_overdue(device, event.ts_ms, whole, changes);
  reconcile(device, event, std::move(whole), changes);
}

void AgentCore::State::snapshot_part_dropped(DeviceRecord& device, const proto::DeviceEvent& event,
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
    reject_message(device.id, "bad_snapshot_part", what);
  }
  if (added.outcome == Outcome::kTooLarge) return;  // it would be too large again
  proto::SnapshotRequest request{device.id, "prt-" + random.id128().substr(0, 16), true};
  (void)publish_command(device, request);
}

}  // namespace vend::agent
