// ops_views (ops_views.hpp).
#include "ops/ops_views.hpp"

namespace vend::agent::ops_views {

ops::DeviceStatus device_status(const DeviceRecord& d, const Stock::Slots& slots, int64_t now_ms,
                                const std::string& owner) {
  ops::DeviceStatus out;
  out.device = d.id;
  out.online = d.online;
  out.boot_id = d.boot_id;
  out.last_seen_ms = d.last_seen_ms;
  out.last_seq = d.acks.last_processed();
  out.unacked_events = d.acks.unacked();
  out.outbox_depth = d.outbox_depth;
  out.snapshot_at_ms = d.snapshot_at_ms;
  out.last_verdict = d.last_verdict;
  for (const auto& [n, s] : slots) {
    out.slots.push_back(ops::SlotStatus{
        n, s.spec.product, s.spec.price_cents, s.spec.capacity, static_cast<int64_t>(s.pool.size()),
        s.reserved, s.dispatched, s.sold, s.burned, s.physical_count, s.device_tokens});
  }
  out.ts_ms = now_ms;
  out.clock_skew_ms = d.clock_skew.skew_ms();
  out.owner = owner;
  return out;
}

ops::FleetSummary fleet_summary(const DeviceBook& devices, const Stock& stock,
                                const OrderBook& orders, const AlertBook& alerts,
                                const FleetFacts& facts) {
  ops::FleetSummary f;
  f.ts_ms = facts.now_ms;
  f.devices = static_cast<int>(devices.size());
  for (const auto& [id, d] : devices) {
    if (d.online) ++f.online;
  }
  f.stock_total = stock.pool_total();
  for (size_t i = 0; i < kOrderStateCount; ++i) {
    f.orders_by_state[to_string(static_cast<OrderState>(i))] = orders.state_counts()[i];
  }
  f.orders_total = orders.created();
  f.alerts_active = static_cast<int64_t>(alerts.size());
  f.storage_ok = facts.storage_ok;
  f.instance = facts.instance;
  return f;
}

}  // namespace vend::agent::ops_views
