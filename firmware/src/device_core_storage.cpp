// DeviceCore: a full ledger disk. The core stays up, refuses new dispenses
// with a clear reason, keeps the outcome of work under way, and reports a
// `storage_full` fault as soon as there is room to write one.
#include "vend/fw/device_core.hpp"

namespace vend::fw {

namespace {
constexpr const char* kLog = "core";
constexpr int64_t kStorageProbeMs = 2000;  // how often a full ledger is tried again
}  // namespace

bool DeviceCore::note_storage_error(const Error& error) {
  if (error.code != "sqlite_full") return false;
  if (!storage_full_) {
    storage_full_ = true;
    storage_full_since_ms_ = clock_.wall_ms();
    next_storage_probe_ms_ = clock_.monotonic_ms() + kStorageProbeMs;
    log_.error(kLog, "ledger storage is full (" + error.message +
                         "): new dispenses are refused until there is room; work under way "
                         "is kept and recorded then");
  }
  return true;
}

Status DeviceCore::recover_interrupted() {
  auto running = ledger_.dispenses_in(DispenseState::kMotorRunning);
  if (!running.ok()) return running.error();
  for (const auto& d : *running) {
    // The motor may or may not have dropped the item: never re-run it; let
    // an operator look.
    auto r = ledger_.finish_dispense(d.order_id, DispenseState::kUncertain,
                                     proto::reason::kPowerLoss, clock_.wall_ms());
    if (!r.ok()) return r.error();
    (void)ledger_.append_event(
        proto::Fault{"uncertain_dispense",
                     "order " + d.order_id + " was mid-rotation at power loss", d.slot},
        clock_.wall_ms());
    log_.warn(kLog, "order " + d.order_id + " interrupted mid-rotation: UNCERTAIN");
  }
  return {};
}

void DeviceCore::check_storage() {
  if (!storage_full_ || clock_.monotonic_ms() < next_storage_probe_ms_) return;
  next_storage_probe_ms_ = clock_.monotonic_ms() + kStorageProbeMs;
  int64_t seconds = (clock_.wall_ms() - storage_full_since_ms_) / 1000;
  proto::Fault fault{"storage_full",
                     "ledger storage was full for " + std::to_string(seconds) + " s; " +
                         std::to_string(refused_while_full_) + " dispense command(s) refused",
                     0};
  if (!ledger_.append_event(fault, clock_.wall_ms()).ok()) return;  // still full
  storage_full_ = false;
  refused_while_full_ = 0;
  outbox_dirty_ = true;
  log_.info(kLog, "ledger storage has room again: " + fault.message);
  if (recovery_pending_) {
    if (auto s = recover_interrupted(); s.ok()) {
      recovery_pending_ = false;
    } else if (!note_storage_error(s.error())) {
      log_.error(kLog, "crash recovery failed: " + s.error().to_string());
    }
  }
}

}  // namespace vend::fw
