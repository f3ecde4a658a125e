// DeviceDesk: when reconciliation runs. Periodic snapshot requests staggered
// across the fleet, on-demand requests and their reports. The comparison
// itself is EventDesk's (event_snapshots.cpp).
#include "core/device_desk.hpp"
#include "core/output.hpp"
#include "core/writes.hpp"

namespace vend::agent {

int64_t DeviceDesk::first_reconcile_at(const std::string& device_id) const {
  if (options.reconcile_interval_ms <= 0) return 0;
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across runs and builds
  for (unsigned char c : device_id) h = (h ^ c) * 1099511628211ull;
  return clock.monotonic_ms() + 1 +
         static_cast<int64_t>(h % static_cast<uint64_t>(options.reconcile_interval_ms));
}

void DeviceDesk::schedule_reconcile(DeviceRecord& device, int64_t at_ms) {
  if (options.reconcile_interval_ms <= 0) return;
  deadlines_.schedule(device.reconcile_timer, TimerKind::kReconcile, device.index, at_ms);
}

void DeviceDesk::fire_timer(const FiredTimer& timer) {
  DeviceRecord* dev = devices_.at_index(timer.subject);
  if (dev == nullptr) return;
  TimerSlot& slot =
      timer.kind == TimerKind::kRestockResend ? dev->restock_timer : dev->reconcile_timer;
  if (!Deadlines::take(slot, timer)) return;
  if (!serves(dev->id)) {  // not served now: waits (see OrderDesk::fire_timer)
    return deadlines_.schedule(slot, timer.kind, dev->index,
                               clock.monotonic_ms() + detail::kUnservedRetryMs);
  }
  if (timer.kind == TimerKind::kRestockResend) return on_restock_timer(*dev);
  on_reconcile_timer(*dev);
}

void DeviceDesk::on_reconcile_timer(DeviceRecord& dev) {
  if (dev.decommissioned_ms != 0) return;  // no more periodic checks
  if (dev.online) {
    proto::SnapshotRequest request{dev.id, "rec-" + random.id128().substr(0, 16), false};
    (void)out_.publish_command(dev, request);
    resend_restocks(dev.id);
  }
  schedule_reconcile(dev, clock.monotonic_ms() + options.reconcile_interval_ms);
}

Result<Ticket> DeviceDesk::record_audit(const std::string& device_id, const AuditEntry& audit) {
  if (auto owner = owner_check(device_id); !owner.ok()) return owner.error();
  auto* dev = devices_.find(device_id);
  if (dev == nullptr) return make_error("not_found", "no device '" + device_id + "'");
  if (!dev->online) {
    return make_error("device_offline",
                      device_id + " is offline; it is reconciled when it returns");
  }
  if (auto s = writes_.writable(); !s.ok()) return s.error();
  Changeset changes;
  changes.fence_device(device_id);
  writes_.attribute(audit);
  return writes_.commit(std::move(changes));
}

Result<std::string> DeviceDesk::request_reconcile(const std::string& device_id) {
  if (auto owner = owner_check(device_id); !owner.ok()) return owner.error();
  auto* it = devices_.find(device_id);
  if (it == nullptr) return make_error("not_found", "no device '" + device_id + "'");
  DeviceRecord& dev = *it;
  if (!dev.online) {
    return make_error("device_offline",
                      device_id + " is offline; it is reconciled when it returns");
  }
  proto::SnapshotRequest request{dev.id, "ond-" + random.id128().substr(0, 16), true};
  if (auto s = out_.publish_command(dev, request); !s.ok()) {
    return make_error("unavailable", "snapshot request not sent: " + s.error().message);
  }
  return request.request_id;
}

Result<std::string> DeviceDesk::reconcile_report(const std::string& device_id) {
  if (auto owner = owner_check(device_id); !owner.ok()) return owner.error();
  auto* it = devices_.find(device_id);
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

}  // namespace vend::agent
