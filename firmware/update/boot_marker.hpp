// BootMarker: what the last update left for the next boot, in
// /var/lib/vend/update/marker. The root helper (vend-update, firmware/
// packaging/) writes `pending` before it installs a package and `failed` or
// `rolled_back` when an install or a rollback ends; the daemon writes `good`
// once it has reported the outcome. One `key=value` line per field:
//
//   state=pending
//   update_id=upd-0007
//   version=0.2.0
//   previous_version=0.1.0
//   reason=
//
// Extra keys (the helper's own: deadline_s, boots) are ignored here.
#pragma once

#include <string>
#include <string_view>

#include "vend/result.hpp"

namespace vend::fw {

struct BootMarker {
  enum class State { kNone, kPending, kGood, kFailed, kRolledBack };
  State state = State::kNone;  // kNone: no marker file
  std::string update_id;
  std::string version;           // the version the update installed (or tried to)
  std::string previous_version;  // the one it replaced, kept for a rollback
  std::string reason;            // kFailed, kRolledBack: why
  bool operator==(const BootMarker&) const = default;
};

// Parses a marker file's text. Errors ("bad_marker") name the line: an
// unknown state, a line without '=', a pending marker without version.
Result<BootMarker> parse_boot_marker(std::string_view text);
// The text of a marker, as parse_boot_marker reads it.
std::string format_boot_marker(const BootMarker& marker);
const char* to_string(BootMarker::State state);

}  // namespace vend::fw
