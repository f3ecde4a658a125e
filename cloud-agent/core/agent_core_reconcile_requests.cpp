// AgentCore::State: when reconciliation runs. Periodic snapshot requests
// staggered across the fleet, on-demand requests and their reports, and the
// resend requests of a seq gap, and the skip of one the device says it can no
// longer fill (a restored database).
// The comparison itself is agent_core_reconcile.cpp.
#include "agent_state.hpp"

namespace vend::agent {

int64_t AgentCore::State::first_reconcile_at(const std::string& device_id) const {
  if (options.reconcile_interval_ms <= 0) return 0;
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across runs and builds
  for (unsigned char c : device_id) h = (h ^ c) * 1099511628211ull;
  return clock.wall_ms() + 1 +
         static_cast<int64_t>(h % static_cast<uint64_t>(options.reconcile_interval_ms));
}

void AgentCore::State::schedule_reconcile(DeviceRecord& device, int64_t at_ms) {
  if (options.reconcile_interval_ms <= 0) return;
  deadlines.schedule(device.reconcile_timer, TimerKind::kReconcile, device.index, at_ms);
}

void AgentCore::State::on_reconcile_timer(const std::string& device_id) {
  auto* it = devices.find(device_id);
  if (it == nullptr) return;
  DeviceRecord& dev = *it;
  if (dev.decommissioned_ms != 0) return;  // no more periodic checks
  if (dev.online) {
    proto::SnapshotRequest request{dev.id, "rec-" + random.id128().substr(0, 16), false};
    (void)publish_command(dev, request);
    resend_restocks(dev.id);
  }
  schedule_reconcile(dev, clock.wall_ms() + options.reconcile_interval_ms);
}

Result<std::string> AgentCore::State::request_reconcile(const std::string& device_id) {
  if (auto owner = owner_check(device_id); !owner.ok()) return owner.error();
  auto* it = devices.find(device_id);
  if (it == nullptr) return make_error("not_found", "no device '" + device_id + "'");
  DeviceRecord& dev = *it;
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
  if (auto owner = owner_check(device_id); !owner.ok()) return owner.error();
  auto* it = devices.find(device_id);
  if (it == nullptr) return make_error("not_found", "no device '" + device_id + "'");
  if (!it->last_report.empty()) return it->last_report;
  auto stored = repo.reconcile_report(device_id);
  if (!stored.ok()) return make_error("unavailable", stored.error().message);
  if (!stored->has_value()) {
    return make_error("not_found", "no reconciliation report for " + device_id + " yet");
  }
  it->last_report = **stored;
  return it->last_report;
}

// The device sends seq N+k while the cloud expects N+1. Nothing is ever
// acknowledged past N, so the device still holds N+1.. unless it deleted
// them on an earlier ack the cloud no longer remembers (a restored
// database). Ask it to resend from N+1; only its signed events_unavailable
// answer lets the seq skip, and then a full snapshot repairs the token views.
void AgentCore::State::skip_seq_gap(DeviceRecord& device, const device_rules::Intake& gap) {
  Changeset changes;
  changes.advance_device_seq(device.id, device.acks.last_processed(), gap.skip_to);
  device.acks.processed(gap.skip_to, commit(std::move(changes)));
  schedule_ack(device);
  ++counters.seq_gaps_total;
  raise_alert(device.id, 0, "seq_gap", "critical",
              "events " + std::to_string(gap.gap_from) + ".." + std::to_string(gap.skip_to) +
                  " were acknowledged to the device but are missing here (restored database?); "
                  "the device confirmed they are gone; reconciling from a full snapshot");
  request_check_snapshot(device, "gap-");
  device.resend_requested_mono_ms = 0;
  if (!gap.process_after_skip) request_resend(device);  // from its oldest held event on
}

void AgentCore::State::request_resend(DeviceRecord& device) {
  if (!detail::take_turn(device.resend_requested_mono_ms, clock.monotonic_ms(),
                         options.resend_interval_ms)) {
    return;
  }
  ++counters.resend_requests_total;
  uint64_t from = device.acks.last_processed() + 1;
  log.info(detail::kLog, device.id + ": seq gap, asking it to resend from " + std::to_string(from));
  (void)publish_command(device, proto::ResendRequest{device.id, from, device.ledger_id});
}

}  // namespace vend::agent
