// AgentCore::State: when reconciliation runs. Periodic snapshot requests
// staggered across the fleet, on-demand requests and their reports, and the
// acceptance of a seq gap the device can no longer fill (a restored database).
// The comparison itself is agent_core_reconcile.cpp.
#include "agent_state.hpp"

namespace vend::agent {

using detail::DeviceRec;

int64_t AgentCore::State::first_reconcile_at(const std::string& device_id) const {
  if (options.reconcile_interval_ms <= 0) return 0;
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across runs and builds
  for (unsigned char c : device_id) h = (h ^ c) * 1099511628211ull;
  return clock.wall_ms() + 1 +
         static_cast<int64_t>(h % static_cast<uint64_t>(options.reconcile_interval_ms));
}

void AgentCore::State::schedule_reconcile(DeviceRec& device, int64_t at_ms) {
  if (options.reconcile_interval_ms <= 0) return;
  uint64_t payload = next_timer++;
  timers[payload] = detail::TimerTarget{device.id, detail::TimerKind::kReconcile};
  wheel.schedule(at_ms, payload);
  device.reconcile_timer = payload;
}

void AgentCore::State::on_reconcile_timer(const std::string& device_id) {
  auto it = devices.find(device_id);
  if (it == devices.end()) return;
  DeviceRec& dev = it->second;
  if (dev.online) {
    proto::SnapshotRequest request{dev.id, "rec-" + random.id128().substr(0, 16), false};
    (void)publish_command(dev, request);
  }
  schedule_reconcile(dev, clock.wall_ms() + options.reconcile_interval_ms);
}

Result<std::string> AgentCore::State::request_reconcile(const std::string& device_id) {
  auto it = devices.find(device_id);
  if (it == devices.end()) return make_error("not_found", "no device '" + device_id + "'");
  DeviceRec& dev = it->second;
  if (!dev.online) {
    return make_error("device_offline",
                      device_id + " is offline; it is reconciled when it returns");
  }
  proto::SnapshotRequest request{dev.id, "ond-" + random.id128().substr(0, 16), true};
  if (auto s = publish_command(dev, request); !s.ok()) {
    return make_error("unavailable", "snapshot request not sent: " + s.error().message);
  }
  return request.request_id;
}

Result<std::string> AgentCore::State::reconcile_report(const std::string& device_id) {
  auto it = devices.find(device_id);
  if (it == devices.end()) return make_error("not_found", "no device '" + device_id + "'");
  if (!it->second.last_report.empty()) return it->second.last_report;
  auto stored = repo.reconcile_report(device_id);
  if (!stored.ok()) return make_error("unavailable", stored.error().message);
  if (!stored->has_value()) {
    return make_error("not_found", "no reconciliation report for " + device_id + " yet");
  }
  it->second.last_report = **stored;
  return it->second.last_report;
}

// The device sends seq N+k while the cloud expects N+1. Normally the missing
// ones arrive first (the device resends in order from its acked seq), so
// wait. If they never do, the device had them acknowledged and deleted: the
// cloud lost its own record (a restored database). Nothing can bring those
// events back; accept the gap, say so, and repair from a full snapshot.
bool AgentCore::State::accept_seq_gap(DeviceRec& device, uint64_t seq) {
  int64_t now = clock.monotonic_ms();
  if (device.gap_since_mono_ms == 0) {
    device.gap_since_mono_ms = now;
    return false;
  }
  if (now - device.gap_since_mono_ms < options.seq_gap_grace_ms) return false;
  device.gap_since_mono_ms = 0;
  ++counters.seq_gaps_total;
  raise_alert(device.id, 0, "seq_gap", "critical",
              "events " + std::to_string(device.last_processed_seq + 1) + ".." +
                  std::to_string(seq - 1) +
                  " were acknowledged to the device but are missing here (restored database?); "
                  "accepted, reconciling from a full snapshot");
  request_check_snapshot(device, "gap-");
  return true;
}

}  // namespace vend::agent
