#include "live/live_report.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

namespace vend::sim {

int64_t percentile(std::vector<int64_t> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
  return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1];
}

std::string LiveReport::human() const {
  std::ostringstream o;
  o << "vend-sim report: " << machines << " machines x " << slots << " slots, " << seconds
    << " s of sales\n"
    << "  orders     " << orders << " (" << (seconds > 0 ? orders / seconds : 0) << "/s), refused "
    << refused << ", agent unreachable " << http_errors << "\n"
    << "  paid       " << paid << " (+" << double_payments << " second payments), abandoned "
    << abandoned << "\n"
    << "  outcome    dispensed " << completed << ", expired " << expired << ", refunded "
    << refunded << ", needs review " << needs_review << ", unfinished " << unfinished << "\n"
    << "  restocks   " << restocks << "; faults: machine crashes " << machine_crashes
    << ", offline " << offline_events << ", agent restarts " << agent_restarts << "\n";
  if (agents > 1) {
    o << "  agents     " << agents << " addresses; requests retried on another " << retried
      << " (503 while a shard moved, or no answer)\n";
  }
  o << "  latency    order->dispense ms: p50 " << percentile(latencies_ms, 50) << ", p90 "
    << percentile(latencies_ms, 90) << ", p99 " << percentile(latencies_ms, 99) << ", max "
    << percentile(latencies_ms, 100) << " (" << latencies_ms.size() << " samples)\n";
  if (!agent_db_not_checked.empty()) o << "  note       " << agent_db_not_checked << "\n";
  for (const auto& line : unsettled_paid) o << "  PROMISE BROKEN (HTTP): " << line << "\n";
  for (const auto& line : oversold) o << "  PROMISE BROKEN (HTTP): " << line << "\n";
  if (unsettled_paid.empty() && oversold.empty()) {
    o << "  over HTTP  every paid order settled; no machine dispensed more than it was stocked\n";
  }
  if (check_error) {
    o << "  invariants COULD NOT BE CHECKED: " << check_error_text << "\n";
  } else if (violations.empty()) {
    o << "  invariants hold: every ledger" << (checked_agent_db ? " and the agent database" : "")
      << " (" << work_dir << ")\n";
  } else {
    o << "  INVARIANTS BROKEN:\n" << format_violations(violations);
  }
  return o.str();
}

std::string LiveReport::json() const {
  nlohmann::json v = nlohmann::json::array();
  for (const auto& x : violations)
    v.push_back({{"invariant", x.invariant}, {"evidence", x.evidence}});
  nlohmann::json j = {{"ok", ok()},
                      {"machines", machines},
                      {"slots", slots},
                      {"seconds", seconds},
                      {"orders", orders},
                      {"orders_per_s", seconds > 0 ? orders / seconds : 0},
                      {"refused", refused},
                      {"http_errors", http_errors},
                      {"paid", paid},
                      {"double_payments", double_payments},
                      {"abandoned", abandoned},
                      {"completed", completed},
                      {"expired", expired},
                      {"refunded", refunded},
                      {"needs_review", needs_review},
                      {"unfinished", unfinished},
                      {"restocks", restocks},
                      {"faults",
                       {{"machine_crashes", machine_crashes},
                        {"offline", offline_events},
                        {"agent_restarts", agent_restarts}}},
                      {"latency_ms",
                       {{"samples", latencies_ms.size()},
                        {"p50", percentile(latencies_ms, 50)},
                        {"p90", percentile(latencies_ms, 90)},
                        {"p99", percentile(latencies_ms, 99)},
                        {"max", percentile(latencies_ms, 100)}}},
                      {"agents", agents},
                      {"retried", retried},
                      {"unsettled_paid", unsettled_paid},
                      {"oversold", oversold},
                      {"checked_agent_db", checked_agent_db},
                      {"agent_db_not_checked", agent_db_not_checked},
                      {"check_error", check_error_text},
                      {"violations", v},
                      {"work_dir", work_dir}};
  return j.dump(2);
}

}  // namespace vend::sim
