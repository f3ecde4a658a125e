// The live run's final report: counters, latency percentiles, the invariant
// check; rendered for humans or as JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checker/invariant_checker.hpp"

namespace vend::sim {

struct LiveReport {
  int machines = 0, slots = 0;
  double seconds = 0;
  int64_t orders = 0, refused = 0, http_errors = 0, paid = 0, double_payments = 0, abandoned = 0,
          completed = 0, expired = 0, refunded = 0, needs_review = 0, unfinished = 0, restocks = 0;
  int64_t machine_crashes = 0, offline_events = 0, agent_restarts = 0;
  int agents = 1;       // addresses given to --agent
  int64_t retried = 0;  // requests sent again to another agent (503, no answer)
  std::vector<int64_t> latencies_ms;
  bool checked_agent_db = false;
  std::string agent_db_not_checked;  // why not, when it was given but cannot be read
  // The promise over the HTTP API: paid orders never settled, machines that
  // dispensed more than they were stocked with. Either breaks the run.
  std::vector<std::string> unsettled_paid;
  std::vector<std::string> oversold;
  bool check_error = false;
  std::string check_error_text;
  std::vector<Violation> violations;
  std::string work_dir;

  bool ok() const {
    return !check_error && violations.empty() && unsettled_paid.empty() && oversold.empty();
  }
  std::string human() const;
  std::string json() const;
};

// The p-th percentile (0..100) by nearest rank; 0 for no samples.
int64_t percentile(std::vector<int64_t> samples, double p);

}  // namespace vend::sim
