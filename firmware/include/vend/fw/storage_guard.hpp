// StorageGuard: the device core's degraded mode for a full ledger disk
// (SQLITE_FULL). Owns whether storage is full, since when, how many
// dispenses were refused meanwhile, and the probe that tries a
// `storage_full` fault every few seconds; once that fault is written the
// disk has room and the mode ends.
//
// It only decides and reports: the parts of the core ask full() before new
// work, and the core resumes deferred work when probe() says room is back.
//
// Thread-safety: none (single-threaded core). Non-copyable.
#pragma once

#include <cstdint>

#include "vend/clock.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/log.hpp"

namespace vend::fw {

class StorageGuard {
 public:
  static constexpr int64_t kProbeMs = 2000;  // how often a full ledger is tried again

  // All references must outlive this object.
  StorageGuard(Ledger& ledger, const Clock& clock, Logger& log);
  StorageGuard(const StorageGuard&) = delete;
  StorageGuard& operator=(const StorageGuard&) = delete;

  // True while the ledger's storage is full.
  bool full() const { return full_; }

  // Enters the full mode for an SQLITE_FULL error (logged once per episode)
  // and returns true; returns false, changing nothing, for any other error.
  bool note_error(const Error& error);

  // Counts a dispense refused because storage is full (named in the fault).
  // REQUIRES: full().
  void count_refused();

  // While full, every kProbeMs: tries to write the `storage_full` fault
  // (how long, how many refused). True when it was written: the mode has
  // ended and the caller resumes deferred work. False otherwise.
  bool probe();

 private:
  Ledger& ledger_;
  const Clock& clock_;
  Logger& log_;
  bool full_ = false;
  int64_t full_since_ms_ = 0;  // wall
  int64_t next_probe_ms_ = 0;  // monotonic
  int64_t refused_ = 0;
};

}  // namespace vend::fw
