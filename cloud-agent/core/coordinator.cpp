// The coordinator (coordinator.hpp): start-up from the repository, the
// tick, timers and metrics.
#include "core/coordinator.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace vend::agent {

// The parameters share the public members' names; past options' move, the
// initialisers read the member (this->options).
Coordinator::Coordinator(Repository& repo, const Clock& clock, Random& random, Logger& log,
                         AgentOptions options)
    : repo(repo),
      clock(clock),
      random(random),
      log(log),
      options(std::move(options)),
      payments(RefundRetryPolicy{this->options.refund_retry_base_ms,
                                 this->options.refund_retry_max_ms,
                                 this->options.refund_max_attempts}),
      deadlines(clock.monotonic_ms(), 10),
      writes(env(), orders, payments),
      out(env(), devices, stock, orders, writes),
      order_desk(env(), devices, orders, payments, stock, deadlines, writes, out),
      device_desk(env(), devices, stock, restocks, orders, deadlines, writes, out, order_desk),
      event_desk(env(), devices, stock, restocks, orders, writes, out, order_desk, device_desk) {}

// ---- start-up ----------------------------------------------------------------

Status Coordinator::start() {
  auto loaded = load(owns);
  if (!loaded.ok()) return loaded.error();
  return install(*loaded);
}

Result<LoadedState> Coordinator::load(const AgentCore::Ownership& only) const {
  // Cluster mode: the repository reads this instance's machines alone, and
  // fewer finished orders (AgentOptions::cluster_finished_orders_max).
  size_t finished = only
                        ? std::min(options.finished_orders_max, options.cluster_finished_orders_max)
                        : options.finished_orders_max;
  return repo.load(finished, only);
}

Status Coordinator::install(const LoadedState& loaded) {
  if (writes.started) return make_error("invalid_state", "start() was already called");
  if (auto s = device_desk.load(loaded); !s.ok()) return s;
  size_t republished = order_desk.load(loaded);
  payments.load_refunds(loaded.pending_refunds, clock.monotonic_ms());
  writes.started = true;
  last_sweep_mono_ms_ = clock.monotonic_ms();
  device_desk.started();
  log.info(detail::kLog, "started: " + std::to_string(devices.size()) + " devices, " +
                             std::to_string(orders.open_count()) + " open orders, " +
                             std::to_string(loaded.pool.size()) + " tokens for sale, " +
                             std::to_string(republished) + " commands re-sent");
  return {};
}

Status Coordinator::absorb(const LoadedState& gained) {
  if (!writes.started) return make_error("invalid_state", "absorb() before start()");
  for (const auto& d : gained.devices) {
    if (devices.contains(d.id)) {
      return make_error("invalid_state", "machine " + d.id + " is in memory already");
    }
  }
  if (auto s = device_desk.load(gained); !s.ok()) return s;
  size_t republished = order_desk.absorb(gained);
  payments.load_refunds(gained.pending_refunds, clock.monotonic_ms());
  device_desk.started(gained);
  log.info(detail::kLog, "gained " + std::to_string(gained.devices.size()) + " devices, " +
                             std::to_string(gained.open_orders.size()) + " open orders, " +
                             std::to_string(gained.pool.size()) + " tokens for sale, " +
                             std::to_string(republished) + " commands re-sent");
  return {};
}

void Coordinator::on_connection(bool connected) {
  log.info(detail::kLog, connected ? "broker connection up" : "broker connection lost");
  out.connected = connected;
  if (!connected) return;
  event_desk.probe_presence_after(options.status_probe_delay_ms);
  // A SUBSCRIBE makes the broker send the retained presence statuses
  // again; a persistent session that still holds the subscription would
  // not, and every device would look offline after an agent restart.
  if (!owns) {
    out.subscribe_all();
  } else {
    out.subscribed_devices.clear();  // cluster mode: this instance's machines only
    for (const auto& [id, dev] : devices) out.subscribe_device(id);
  }
  // A command the broker accepted may be lost with a clean session or a
  // broker that lost its store: every live one goes out again.
  if (size_t sent = order_desk.republish_dispatched(""); sent > 0) {
    log.info(detail::kLog, std::to_string(sent) + " dispense commands re-sent on connect");
  }
}

void Coordinator::take_over_from(Coordinator& old) {
  out.connected = old.out.connected;
  counters = std::move(old.counters);
  counters.dispatch_latency_ms.clear();
  // The old subscriptions are the new coordinator's to keep (start() adds
  // only what is missing) or drop (keep_presence_of).
  out.subscribed_devices = old.out.subscribed_devices;
}

void Coordinator::keep_presence_of(const Coordinator& old) {
  for (auto& [id, dev] : devices) {
    const DeviceRecord* was = old.devices.find(id);
    if (was == nullptr) continue;
    dev.online = was->online;
    dev.boot_id = was->boot_id;
    dev.last_seen_ms = was->last_seen_ms;
    dev.clock_skew = was->clock_skew;
  }
  std::vector<std::string> gone;
  for (const auto& device : out.subscribed_devices) {
    if (!devices.contains(device)) gone.push_back(device);
  }
  for (const auto& device : gone) out.unsubscribe_device(device);
}

// ---- time ----------------------------------------------------------------------

void Coordinator::tick() {
  if (!writes.started) return;
  for (const FiredTimer& timer : deadlines.advance(clock.monotonic_ms())) fire_timer(timer);
  int64_t now = clock.monotonic_ms();
  if (now - last_sweep_mono_ms_ >= options.sweep_interval_ms) {
    last_sweep_mono_ms_ = now;
    order_desk.sweep();
  }
  order_desk.evict_finished();
  out.publish_ops_views();
  out.reject_log().flush();
  event_desk.probe_presence();
}

void Coordinator::fire_timer(const FiredTimer& timer) {
  if (timer.kind == TimerKind::kReconcile || timer.kind == TimerKind::kRestockResend) {
    return device_desk.fire_timer(timer);
  }
  order_desk.fire_timer(timer);
}

// ---- health and metrics ------------------------------------------------------------

Status Coordinator::health() {
  if (!writes.started) return make_error("unavailable", "not started");
  if (writes.failed()) {
    return make_error("unavailable",
                      "a repository write failed; the core is rebuilt from the log by a restart "
                      "(several agents: once the database answers)");
  }
  return {};
}

AgentMetrics Coordinator::take_metrics() {
  AgentMetrics m = counters;
  counters.dispatch_latency_ms.clear();
  for (size_t i = 0; i < kOrderStateCount; ++i) {
    m.orders_by_state.emplace_back(to_string(static_cast<OrderState>(i)), orders.state_counts()[i]);
  }
  for (const auto& [id, dev] : devices) {
    if (dev.online) ++m.devices_online;
    if (auto skew = dev.clock_skew.skew_ms()) m.device_clock_skew_ms.emplace_back(id, *skew);
  }
  m.stock_total = stock.pool_total();
  m.storage_failed = writes.storage_failed;
  m.refunds_pending = static_cast<int64_t>(payments.refunds_pending());
  m.alerts_active = out.alerts().counts_by_code();
  return m;
}

}  // namespace vend::agent
