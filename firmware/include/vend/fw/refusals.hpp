// Refusals: the commands a device core refused without acting on them
// (unauthenticated, malformed, or unable to be recorded). Owns their count,
// the last reason, a rate-limited log line per (type, reason), and the
// `refused_commands` fault that reports them to the cloud at most once a
// minute.
//
// Thread-safety: none (single-threaded core). Non-copyable.
#pragma once

#include <cstdint>
#include <string>

#include "vend/clock.hpp"
#include "vend/fw/core_types.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/log.hpp"
#include "vend/log_limiter.hpp"

namespace vend::fw {

class Refusals {
 public:
  // All references must outlive this object.
  Refusals(Ledger& ledger, const Clock& clock, Logger& log, CoreStats& stats);
  Refusals(const Refusals&) = delete;
  Refusals& operator=(const Refusals&) = delete;

  // Counts a refused command of `type` ("" when undecodable) and returns its
  // outcome {type, "refused", reason}; counted in stats.refused. Anyone on the broker can send
  // these: counted always, logged at a bounded rate.
  CommandOutcome refuse(const std::string& type, const std::string& reason,
                        const std::string& detail);

  // Flushes the log limiter and, unless `hold` (the outbox is under
  // pressure), writes a `refused_commands` fault for the refusals not yet
  // reported, at most once a minute. True when a fault was written.
  bool report(bool hold);

 private:
  static constexpr int64_t kLogIntervalMs = 60'000;  // one log line per (type, reason)
  static constexpr int64_t kReportMs = 60'000;       // one refused_commands fault

  Ledger& ledger_;
  const Clock& clock_;
  CoreStats& stats_;
  RateLimitedLog log_;
  int64_t unreported_ = 0;
  std::string last_;
  int64_t last_report_ms_ = 0;
};

}  // namespace vend::fw
