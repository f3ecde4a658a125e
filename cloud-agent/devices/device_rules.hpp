// What a device's authenticated messages do to its record, returned as a
// value: where an event falls in its stream (ledger, seq, a gap and how it
// closes) and what a presence status says. Pure functions: no state, no
// clock, no log, no I/O. The core's EventDesk (cloud-agent/core/event_desk.hpp)
// carries out what they decide: the ledger switch and the seq skip (durably), the resend
// request, the alert, the log line.
#pragma once

#include <cstdint>
#include <string>

#include "devices/device_book.hpp"
#include "vend/protocol.hpp"

namespace vend::agent::device_rules {

// An event whose MAC the device's key verified.
struct Intake {
  enum class Ledger {
    kCurrent,   // the ledger the record counts
    kFirst,     // the device names its first ledger (no event was counted yet)
    kReplaced,  // a new ledger (reflashed SD card, new board): seqs start again from 1
    kRetired,   // a replaced ledger's late event: refused
  };
  enum class Action {
    kRefuse,    // kRetired: nothing else happens
    kReack,     // processed already: its ack may have been lost, so ack again
    kDiverged,  // another event under a processed seq, or any event of a ledger
                // that did so: its ledger went back in time (restored SD card,
                // power loss at synchronous=normal). Not processed, not a
                // duplicate: the ack of what was processed, with its mac,
                // makes the device start a new ledger
    kResend,    // beyond a gap: dropped unacknowledged, the device asked to resend
    kSkip,      // the device's signed word that the gap is gone: skip to `skip_to`
    kProcess,   // the next event: process it
  };
  Ledger ledger = Ledger::kCurrent;
  Action action = Action::kProcess;
  // kSkip: the stream's new last seq (the device's oldest held event - 1),
  // the gap's first seq, and whether this event is then the next one
  // (processed) or an older held one must come first (resend).
  uint64_t skip_to = 0;
  uint64_t gap_from = 0;
  bool process_after_skip = false;
};
// Where `event` (signed `mac`) falls for `device`. A new ledger's seqs
// count from 1, so its first event is placed as if the switch were done. A
// duplicate is compared with what was processed where the record knows the
// mac (the last processed seq); the device compares the rest against the
// ack's mac.
Intake decide_intake(const DeviceRecord& device, const proto::DeviceEvent& event,
                     const std::string& mac);

// A verified presence status.
struct Presence {
  enum class Kind {
    kOnline,     // online, under `status.boot_id`
    kStaleWill,  // an older session's last will, published late: ignored
    kOffline,    // a genuine will, or a replay of one: offline, and asked for its status
  };
  Kind kind = Kind::kOnline;
  bool changed = false;       // online <-> offline, or a new boot (worth a log line)
  bool clock_sample = false;  // its ts_ms is a clock sample (live, and online)
};
// `live`: not a retained copy.
Presence decide_presence(const DeviceRecord& device, const proto::PresenceStatus& status,
                         bool live);

}  // namespace vend::agent::device_rules
