// HealthWatch: after a boot, what the last update asks of this firmware, as
// a pure decision on an injected clock. Built from the boot marker the root
// helper left (boot_marker.hpp) and the running version:
//
//   pending, of this version  the new firmware runs: it must be healthy —
//                             online to the broker, its ledger passing
//                             `PRAGMA integrity_check`, its self-test (the
//                             HAL) passing — within `bound_ms` of the watch's
//                             start. Then: report `installed`, mark good.
//                             Else: ask the helper to roll back (it
//                             reinstalls the previous package, which reports
//                             `rolled_back` at its boot).
//   pending, of another       the install did not get as far as this boot
//                             (a power cut in dpkg): the helper's watchdog
//                             owns it; nothing here.
//   failed / rolled_back      report it (`failed` / `rolled_back`, with the
//                             helper's reason), then mark good.
//   good, none                nothing.
//
// Effects come out in the order the shell must run them: the report is
// appended to the ledger's outbox (durable) before the marker says good, so
// a crash in between reports twice, never not at all. The ledger itself is
// only read. Thread-safety: none. Non-copyable.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "update/boot_marker.hpp"
#include "update/update_core.hpp"
#include "vend/clock.hpp"

namespace vend::fw {

// This boot's health, as the shell sees it at a tick.
struct HealthInputs {
  bool online = false;        // connected to the broker
  bool ledger_ok = false;     // PRAGMA integrity_check answered "ok"
  bool self_test_ok = false;  // the HAL's check passed
};

// Rewrite the marker as `good`: its outcome is reported.
struct MarkGood {
  bool operator==(const MarkGood&) const = default;
};
// Ask the root helper to reinstall the previous package.
struct RequestRollback {
  std::string reason;
  bool operator==(const RequestRollback&) const = default;
};
using BootEffect = std::variant<ReportStatus, MarkGood, RequestRollback>;
using BootEffects = std::vector<BootEffect>;

class HealthWatch {
 public:
  HealthWatch(const Clock& clock, BootMarker marker, std::string running_version, int64_t bound_ms);
  HealthWatch(const HealthWatch&) = delete;
  HealthWatch& operator=(const HealthWatch&) = delete;

  // Once, after the core's boot: the reports and marker changes that need
  // no health (failed, rolled_back).
  void start(BootEffects& effects);
  // Every tick until done(): decides once the firmware is healthy or the
  // bound has passed.
  void tick(const HealthInputs& health, BootEffects& effects);
  // True while this boot must still prove itself.
  bool watching() const { return watching_; }

 private:
  const Clock& clock_;
  BootMarker marker_;
  std::string running_version_;
  int64_t bound_ms_;
  int64_t deadline_ms_ = 0;
  bool watching_ = false;
};

}  // namespace vend::fw
