// Values the device core's parts share: what a command did and the counters.
#pragma once

#include <cstdint>
#include <string>

namespace vend::fw {

// What one command did; for logs, tests and the simulator's trace.
struct CommandOutcome {
  std::string type;    // "dispense", "restock", "snapshot_request", "ack", or "" if undecodable
  std::string result;  // "accepted", "duplicate", "rejected", "ignored", "done", "new_ledger"
  std::string reason;  // rejection reason (proto::reason) or detail
};

// Counters since boot. Each field is written by one part of the core
// (named), read by anyone.
struct CoreStats {
  int64_t dispensed = 0;   // Dispenser
  int64_t failed = 0;      // Dispenser
  int64_t rejected = 0;    // Dispenser: authenticated rejections, reported
  int64_t refused = 0;     // Refusals: unauthenticated commands (bad_mac, wrong_device, malformed)
  int64_t duplicates = 0;  // Dispenser
  int64_t events_published = 0;  // EventSender
};

}  // namespace vend::fw
