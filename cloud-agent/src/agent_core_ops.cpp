// AgentCore::State: the operator views on vend/v1/ops/... (vend/ops.hpp,
// docs/asyncapi.yaml). Informational only: published at QoS 0 (order events)
// or 1 (the rest), a failed publish is counted and forgotten — the retained
// views are re-published on the next change, and nothing depends on them.
#include <algorithm>

#include "agent_state.hpp"
#include "vend/topics.hpp"

namespace vend::agent {

using detail::DeviceRec;

namespace {
constexpr size_t kMaxOrderEventsPerMessage = 500;
}  // namespace

void AgentCore::State::publish_ops(const std::string& topic, const std::string& payload, int qos,
                                   bool retained) {
  if (!options.ops_enabled) return;
  if (!connected) {
    log.debug(detail::kLog, "ops message on " + topic + " dropped: the broker connection is down");
    return;
  }
  effects.publishes.push_back(detail::Publish{Message{topic, payload, qos, retained}, ""});
}

void AgentCore::State::ops_order_event(const detail::OrderRec& rec, const std::string& from) {
  mark_device_dirty(rec.order.device);
  if (!options.ops_enabled) return;
  const Order& o = rec.order;
  pending_order_events.events.push_back(ops::OrderEvent{
      o.id, o.device, o.slot, from, to_string(o.state), o.price_cents, o.reason, o.updated_ms});
  // Bounded: a burst between two ticks goes out in several messages.
  if (pending_order_events.events.size() >= kMaxOrderEventsPerMessage) flush_order_events();
}

void AgentCore::State::flush_order_events() {
  if (pending_order_events.events.empty()) return;
  publish_ops(topics::ops_orders(), ops::encode(pending_order_events), 0, false);
  pending_order_events.events.clear();
}

void AgentCore::State::mark_device_dirty(const std::string& device_id) {
  if (!options.ops_enabled) return;
  dirty_devices.insert(device_id);
  fleet_dirty = true;
  // A device not published for an interval is due now: scan at the next tick.
  auto dev = devices.find(device_id);
  if (dev != devices.end() &&
      (dev->second.ops_published_mono_ms == 0 ||
       clock.monotonic_ms() - dev->second.ops_published_mono_ms >= options.ops_interval_ms)) {
    ops_scan_due_mono_ms = 0;
  }
}

bool AgentCore::State::alert_active(const std::string& device, int slot,
                                    std::string_view code) const {
  if (active_alerts.empty()) return false;  // the usual case, without building a key
  return active_alerts.count(detail::AlertKey{device, slot, std::string(code)}) != 0;
}

void AgentCore::State::raise_alert(const std::string& device, int slot, const std::string& code,
                                   const std::string& severity, const std::string& message) {
  detail::AlertKey key{device, slot, code};
  auto it = active_alerts.find(key);
  if (it != active_alerts.end() && it->second.message == message) return;  // already said
  ops::Alert alert{code, severity, "raised", device, slot, message, clock.wall_ms()};
  if (it == active_alerts.end()) {
    ++counters.alerts_raised_total;
    log.warn(detail::kLog,
             "ALERT " + code + " " + device + " slot " + std::to_string(slot) + ": " + message);
  }
  active_alerts[key] = alert;
  fleet_dirty = true;
  publish_ops(topics::ops_alerts(), ops::encode(alert), 1, false);
}

void AgentCore::State::clear_alert(const std::string& device, int slot, std::string_view code) {
  if (active_alerts.empty()) return;
  auto it = active_alerts.find(detail::AlertKey{device, slot, std::string(code)});
  if (it == active_alerts.end()) return;
  ops::Alert alert = it->second;
  active_alerts.erase(it);
  alert.state = "cleared";
  alert.ts_ms = clock.wall_ms();
  log.info(detail::kLog, "alert " + std::string(code) + " " + device + " slot " +
                             std::to_string(slot) + " cleared");
  fleet_dirty = true;
  publish_ops(topics::ops_alerts(), ops::encode(alert), 1, false);
}

ops::DeviceStatus AgentCore::State::device_status(const DeviceRec& d) const {
  ops::DeviceStatus out;
  out.device = d.id;
  out.online = d.online;
  out.boot_id = d.boot_id;
  out.last_seen_ms = d.last_seen_ms;
  out.last_seq = d.last_processed_seq;
  out.unacked_events = d.last_processed_seq - d.committed_seq;
  out.outbox_depth = d.outbox_depth;
  out.snapshot_at_ms = d.snapshot_at_ms;
  out.last_verdict = d.last_verdict;
  for (const auto& [n, s] : d.slots) {
    out.slots.push_back(ops::SlotStatus{
        n, s.spec.product, s.spec.price_cents, s.spec.capacity, static_cast<int64_t>(s.pool.size()),
        s.reserved, s.dispatched, s.sold, s.burned, s.physical_count, s.device_tokens});
  }
  out.ts_ms = clock.wall_ms();
  out.clock_skew_ms = d.clock_skew_ms;
  return out;
}

ops::FleetSummary AgentCore::State::fleet_summary() const {
  ops::FleetSummary f;
  f.ts_ms = clock.wall_ms();
  f.devices = static_cast<int>(devices.size());
  for (const auto& [id, d] : devices) {
    if (d.online) ++f.online;
    for (const auto& [n, s] : d.slots) f.stock_total += static_cast<int64_t>(s.pool.size());
  }
  for (size_t i = 0; i < detail::kStateCount; ++i) {
    f.orders_by_state[to_string(static_cast<OrderState>(i))] = state_counts[i];
  }
  f.orders_total = orders_created;
  f.alerts_active = static_cast<int64_t>(active_alerts.size());
  f.storage_ok = !storage_failed;
  return f;
}

void AgentCore::State::publish_ops_views() {
  if (!options.ops_enabled) return;
  flush_order_events();
  int64_t now = clock.monotonic_ms();
  // Dirty devices published less than an interval ago wait; the scan runs
  // again only when the first of them is due (not on every 10 ms tick).
  if (now >= ops_scan_due_mono_ms) {
    int64_t next_due = 0;
    for (auto it = dirty_devices.begin(); it != dirty_devices.end();) {
      auto dev = devices.find(*it);
      if (dev == devices.end()) {
        it = dirty_devices.erase(it);
        continue;
      }
      DeviceRec& d = dev->second;
      if (d.ops_published_mono_ms != 0 && now - d.ops_published_mono_ms < options.ops_interval_ms) {
        int64_t due = d.ops_published_mono_ms + options.ops_interval_ms;
        next_due = next_due == 0 ? due : std::min(next_due, due);
        ++it;
        continue;
      }
      d.ops_published_mono_ms = now;
      publish_ops(topics::ops_device(d.id), ops::encode(device_status(d)), 1, true);
      it = dirty_devices.erase(it);
    }
    ops_scan_due_mono_ms = next_due;
  }
  if (fleet_dirty &&
      (fleet_published_mono_ms == 0 || now - fleet_published_mono_ms >= options.ops_interval_ms)) {
    fleet_dirty = false;
    fleet_published_mono_ms = now;
    publish_ops(topics::ops_fleet(), ops::encode(fleet_summary()), 1, true);
  }
}

}  // namespace vend::agent
