// AgentCore::State: the operator views on vend/v1/ops/... (vend/ops.hpp,
// docs/asyncapi.yaml). Informational only: published at QoS 0 (order events)
// or 1 (the rest), a failed publish is counted and forgotten — the retained
// views are re-published on the next change, and nothing depends on them.

#include "agent_state.hpp"
#include "vend/topics.hpp"

namespace vend::agent {

void AgentCore::State::publish_ops(std::string topic, std::string payload, int qos, bool retained) {
  if (!options.ops_enabled) return;
  if (!connected) {
    log.debug(detail::kLog, "ops message on " + topic + " dropped: the broker connection is down");
    return;
  }
  effects.publishes.push_back(
      detail::Publish{Message{std::move(topic), std::move(payload), qos, retained}, ""});
}

void AgentCore::State::ops_order_event(const OrderRec& rec, const std::string& from) {
  mark_device_dirty(rec.order.device);
  if (!options.ops_enabled) return;
  const Order& o = rec.order;
  // Bounded: a burst between two ticks goes out in several messages.
  if (pending_order_events.add(ops::OrderEventView{o.id, o.device, o.slot, from, to_string(o.state),
                                                   o.price_cents, o.reason, o.updated_ms})) {
    flush_order_events();
  }
}

void AgentCore::State::flush_order_events() {
  if (auto payload = pending_order_events.take()) {
    publish_ops(topics::ops_orders(), std::move(*payload), 0, false);
  }
}

void AgentCore::State::mark_device_dirty(const std::string& device_id) {
  if (!options.ops_enabled) return;
  ops_views.device_changed(device_id, clock.monotonic_ms());
}

bool AgentCore::State::alert_active(const std::string& device, int slot,
                                    std::string_view code) const {
  return alerts.active(device, slot, code);
}

void AgentCore::State::raise_alert(const std::string& device, int slot, const std::string& code,
                                   const std::string& severity, const std::string& message) {
  auto raised = alerts.raise(device, slot, code, severity, message, clock.wall_ms());
  if (!raised.publish) return;  // already said
  if (raised.new_alert) {
    ++counters.alerts_raised_total;
    log.warn(detail::kLog,
             "ALERT " + code + " " + device + " slot " + std::to_string(slot) + ": " + message);
  }
  ops_views.fleet_changed();
  publish_ops(topics::ops_alerts(), ops::encode(*raised.publish), 1, false);
}

void AgentCore::State::clear_alert(const std::string& device, int slot, std::string_view code) {
  auto cleared = alerts.clear(device, slot, code, clock.wall_ms());
  if (!cleared) return;
  log.info(detail::kLog, "alert " + std::string(code) + " " + device + " slot " +
                             std::to_string(slot) + " cleared");
  ops_views.fleet_changed();
  publish_ops(topics::ops_alerts(), ops::encode(*cleared), 1, false);
}

ops::DeviceStatus AgentCore::State::device_status(const DeviceRecord& d) const {
  return ops_views::device_status(d, stock.slots(d.id), clock.wall_ms(), options.instance_id);
}

ops::FleetSummary AgentCore::State::fleet_summary() const {
  return ops_views::fleet_summary(
      devices, stock, orders, alerts,
      ops_views::FleetFacts{!storage_failed, clock.wall_ms(), options.instance_id});
}

void AgentCore::State::publish_ops_views() {
  if (!options.ops_enabled) return;
  flush_order_events();
  int64_t now = clock.monotonic_ms();
  for (const auto& id : ops_views.take_due_devices(now)) {
    const DeviceRecord* dev = devices.find(id);
    if (dev == nullptr) continue;
    publish_ops(topics::ops_device(id), ops::encode(device_status(*dev)), 1, true);
  }
  if (ops_views.take_fleet_due(now)) {
    // Several agents: each its own summary (of its machines).
    publish_ops(options.instance_id.empty() ? topics::ops_fleet()
                                            : topics::ops_fleet_of(options.instance_id),
                ops::encode(fleet_summary()), 1, true);
  }
}

}  // namespace vend::agent
