// AgentCore::State: replaceable boards. A device's seqs count within one
// ledger (the SQLite file on its SD card, named by the ledger_id it signs
// into every event). A reflashed card or a replacement board is a new ledger
// from seq 1: its events are new, never duplicates of the old ledger's.
#include "agent_state.hpp"

namespace vend::agent {

void AgentCore::State::switch_ledger(DeviceRecord& dev, const std::string& ledger_id,
                                     bool replaced) {
  Changeset changes;
  changes.switch_ledger(dev.id, dev.ledger_id, dev.acks.last_processed(), ledger_id,
                        clock.wall_ms());
  // The old ledger's commits still run in order before the new one's; its
  // acks are moot (the device no longer holds those seqs), a failed write
  // still stops the core through the writer's failure count.
  Ticket switched = commit(std::move(changes));
  const std::string old_id = dev.ledger_id;
  const uint64_t old_seq = dev.acks.last_processed();
  dev.retired_ledgers.insert(old_id);  // "" too: a named ledger never goes back to none
  dev.ledger_id = ledger_id;
  dev.acks.restart(std::move(switched));
  dev.resend_requested_mono_ms = 0;
  mark_device_dirty(dev.id);
  if (!replaced) {
    log.info(detail::kLog, dev.id + ": ledger " + ledger_id);
    return;
  }
  ++counters.ledgers_replaced_total;
  raise_alert(dev.id, 0, "ledger_replaced", "warning",
              "new ledger '" + ledger_id + "' (seq from 1) replaces ledger '" + old_id +
                  "' at seq " + std::to_string(old_seq) +
                  " (reflashed SD card or new board); reconciling from a full snapshot");
  request_check_snapshot(dev, "ledger-");
}

}  // namespace vend::agent
