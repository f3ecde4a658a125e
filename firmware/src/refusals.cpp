#include "vend/fw/refusals.hpp"

namespace vend::fw {

namespace {
constexpr const char* kLog = "core";
}

Refusals::Refusals(Ledger& ledger, const Clock& clock, Logger& log, CoreStats& stats)
    : ledger_(ledger),
      clock_(clock),
      stats_(stats),
      log_(clock, log, RateLimitedLog::Options{kLogIntervalMs, 64}) {}

CommandOutcome Refusals::refuse(const std::string& type, const std::string& reason,
                                const std::string& detail) {
  ++stats_.refused;
  ++unreported_;
  last_ = reason + ": " + detail;
  const std::string what = type.empty() ? std::string("command") : type;
  log_.log(LogLevel::kWarn, kLog, what, reason, "refused " + what + " (" + reason + "): " + detail);
  return CommandOutcome{type, "refused", reason};
}

bool Refusals::report(bool hold) {
  log_.flush();
  if (unreported_ == 0) return false;
  int64_t now = clock_.monotonic_ms();
  if (last_report_ms_ != 0 && now - last_report_ms_ < kReportMs) return false;
  if (hold) return false;
  last_report_ms_ = now;
  std::string message =
      std::to_string(unreported_) + " command(s) refused; last: " + last_.substr(0, 200);
  if (!ledger_.append_event(proto::Fault{"refused_commands", message, 0}, clock_.wall_ms()).ok()) {
    return false;
  }
  unreported_ = 0;
  return true;
}

}  // namespace vend::fw
