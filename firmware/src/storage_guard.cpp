// A full ledger disk: the core stays up, refuses new dispenses with a clear
// reason, keeps the outcome of work under way, and reports a `storage_full`
// fault as soon as there is room to write one.
#include "vend/fw/storage_guard.hpp"

#include "vend/assert.hpp"

namespace vend::fw {

namespace {
constexpr const char* kLog = "core";
}

StorageGuard::StorageGuard(Ledger& ledger, const Clock& clock, Logger& log)
    : ledger_(ledger), clock_(clock), log_(log) {}

bool StorageGuard::note_error(const Error& error) {
  if (error.code != "sqlite_full") return false;
  if (!full_) {
    full_ = true;
    full_since_ms_ = clock_.wall_ms();
    next_probe_ms_ = clock_.monotonic_ms() + kProbeMs;
    log_.error(kLog, "ledger storage is full (" + error.message +
                         "): new dispenses are refused until there is room; work under way "
                         "is kept and recorded then");
  }
  return true;
}

void StorageGuard::count_refused() {
  VEND_ASSERT(full_);
  ++refused_;
}

bool StorageGuard::probe() {
  if (!full_ || clock_.monotonic_ms() < next_probe_ms_) return false;
  next_probe_ms_ = clock_.monotonic_ms() + kProbeMs;
  int64_t seconds = (clock_.wall_ms() - full_since_ms_) / 1000;
  proto::Fault fault{"storage_full",
                     "ledger storage was full for " + std::to_string(seconds) + " s; " +
                         std::to_string(refused_) + " dispense command(s) refused",
                     0};
  if (!ledger_.append_event(fault, clock_.wall_ms()).ok()) return false;  // still full
  full_ = false;
  refused_ = 0;
  log_.info(kLog, "ledger storage has room again: " + fault.message);
  return true;
}

}  // namespace vend::fw
