#include "http/metrics.hpp"

#include <span>

namespace vend::agent {

namespace {

constexpr OrderState kAllStates[] = {
    OrderState::kReserved,  OrderState::kPaid,     OrderState::kDispatched,
    OrderState::kCompleted, OrderState::kExpired,  OrderState::kCancelled,
    OrderState::kFailed,    OrderState::kRefunded, OrderState::kNeedsReview,
};

constexpr MetricType kCounter = MetricType::kCounter;
constexpr MetricType kGauge = MetricType::kGauge;

// Every state gets a series, even at 0, so dashboards see stable series.
void render_orders(const AgentMetrics& m, PrometheusText& text) {
  text.family("vend_orders", kGauge, "Orders by state.");
  for (OrderState state : kAllStates) {
    int64_t n = 0;
    for (const auto& [name, count] : m.orders_by_state) {
      if (name == to_string(state)) n = count;
    }
    text.sample({{"state", to_string(state)}}, n);
  }
}

// One unlabelled counter or gauge of AgentMetrics.
struct CoreScalar {
  const char* name;
  MetricType type;
  const char* help;
  int64_t AgentMetrics::*value;
};

// Reconciliation runs, what they repaired, the alerts they raised and the
// refund outbox, in /metrics order.
constexpr CoreScalar kReconcileScalars[] = {
    {"vend_reconcile_runs_total", kCounter, "Reconciliations run (one per snapshot).",
     &AgentMetrics::reconcile_runs_total},
    {"vend_reconcile_tokens_added_total", kCounter,
     "Tokens a device held that the cloud lacked, added to pools.",
     &AgentMetrics::tokens_added_total},
    {"vend_reconcile_tokens_removed_total", kCounter,
     "Tokens the cloud held that a device no longer had, removed.",
     &AgentMetrics::tokens_removed_total},
    {"vend_device_seq_gaps_total", kCounter,
     "Event seq gaps skipped on the device's word that it no longer holds them.",
     &AgentMetrics::seq_gaps_total},
    {"vend_device_ledgers_replaced_total", kCounter,
     "Device ledgers replaced by a new one (reflashed SD card, new board).",
     &AgentMetrics::ledgers_replaced_total},
    {"vend_device_retired_ledger_events_total", kCounter,
     "Events of a replaced device ledger (refused; dispense results judged).",
     &AgentMetrics::retired_ledger_events_total},
    {"vend_device_diverged_events_total", kCounter,
     "Device events under a processed seq with other content (a ledger that went back in "
     "time), refused.",
     &AgentMetrics::diverged_events_total},
    {"vend_device_key_rotations_total", kCounter,
     "Devices that signed with their new key (the old one revoked).",
     &AgentMetrics::key_rotations_total},
    {"vend_device_decommissioned_messages_total", kCounter,
     "Messages of decommissioned devices, refused.", &AgentMetrics::decommissioned_messages_total},
    {"vend_device_resend_requests_total", kCounter,
     "Resend commands sent to devices for a seq gap.", &AgentMetrics::resend_requests_total},
    {"vend_dispense_contradictions_total", kCounter,
     "DISPENSED results for orders already settled otherwise (alert dispense_contradiction).",
     &AgentMetrics::contradictions_total},
    {"vend_device_status_requests_total", kCounter,
     "status_request commands sent (no trusted status of the device).",
     &AgentMetrics::status_requests_total},
    {"vend_restocks_resent_total", kCounter,
     "Restock commands sent again: not minted yet at a connect or a periodic reconcile.",
     &AgentMetrics::restocks_resent_total},
    {"vend_alerts_raised_total", kCounter, "Alerts raised.", &AgentMetrics::alerts_raised_total},
    {"vend_refunds_pending", kGauge,
     "Refunds recorded and not yet confirmed by the payment gateway (the refund outbox).",
     &AgentMetrics::refunds_pending},
    {"vend_refund_attempts_total", kCounter, "Refund deliveries tried.",
     &AgentMetrics::refund_attempts_total},
    {"vend_refunds_delivered_total", kCounter, "Refunds the payment gateway confirmed.",
     &AgentMetrics::refunds_delivered_total},
    {"vend_refunds_given_up_total", kCounter,
     "Refunds given up to an alert (refused by the gateway, or too many failures).",
     &AgentMetrics::refunds_given_up_total},
};

// Reservations and device events, after the orders.
constexpr CoreScalar kReservationScalars[] = {
    {"vend_reservations_total", kCounter, "Reservations made.", &AgentMetrics::reservations_total},
    {"vend_reservations_rejected_total", kCounter,
     "Reservations refused (sold out, device offline, no broker connection).",
     &AgentMetrics::reservations_rejected_total},
    {"vend_reservations_broker_unreachable_total", kCounter,
     "Reservations refused because the agent had no broker connection.",
     &AgentMetrics::reservations_broker_unreachable_total},
};
constexpr CoreScalar kEventScalars[] = {
    {"vend_device_events_total", kCounter, "Device events processed.",
     &AgentMetrics::events_processed_total},
    {"vend_device_events_rejected_total", kCounter,
     "Device events rejected (bad MAC, unknown device, malformed).",
     &AgentMetrics::events_rejected_total},
    {"vend_device_events_duplicate_total", kCounter, "Device events received again and ignored.",
     &AgentMetrics::duplicate_events_total},
    {"vend_stock_items", kGauge, "Sale tokens in all pools.", &AgentMetrics::stock_total},
};

void render_scalars(const AgentMetrics& m, std::span<const CoreScalar> scalars,
                    PrometheusText& text) {
  for (const CoreScalar& s : scalars) text.scalar(s.name, s.type, s.help, m.*s.value);
}

void render_reconcile(const AgentMetrics& m, PrometheusText& text) {
  render_scalars(m, kReconcileScalars, text);
  text.family("vend_alerts_active", kGauge, "Alerts raised and not cleared, by code.");
  for (const auto& [code, n] : m.alerts_active) text.sample({{"code", code}}, n);
}

}  // namespace

void Histogram::observe(double seconds) {
  for (size_t i = 0; i < kBounds.size(); ++i) {
    if (seconds <= kBounds[i]) {
      ++buckets_[i];
      break;
    }
  }
  ++count_;
  sum_ += seconds;
}

void Histogram::render(PrometheusText& text) const {
  std::array<uint64_t, kBounds.size()> cumulative{};
  uint64_t running = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    running += buckets_[i];
    cumulative[i] = running;
  }
  text.histogram(kBounds, cumulative, sum_, count_);
}

std::vector<std::string> AgentHealth::reasons() const {
  std::vector<std::string> out;
  if (storage_failed) out.emplace_back("storage_failed");
  if (broker_down) out.emplace_back("broker_down");
  if (inbound_saturated) out.emplace_back("inbound_saturated");
  return out;
}

namespace {

void render_health(const AgentHealth& h, PrometheusText& text) {
  text.scalar("vend_healthy", kGauge, "1 when /healthz answers 200.", h.reasons().empty() ? 1 : 0);
  text.scalar("vend_storage_failed", kGauge,
              "1 when the repository fail-stopped (restart to rebuild from the log).",
              h.storage_failed ? 1 : 0);
  text.scalar("vend_mqtt_connected", kGauge, "1 when the agent's MQTT session is up.",
              h.mqtt_connected ? 1 : 0);
  text.scalar("vend_mqtt_down_seconds", kGauge,
              "How long the broker connection has been down (0 while up).", h.mqtt_down_ms / 1000);
  text.scalar("vend_broker_down", kGauge, "1 when the broker has been down past the grace.",
              h.broker_down ? 1 : 0);
  text.scalar("vend_inbound_queue_messages", kGauge, "MQTT messages waiting for the core.",
              h.inbound_messages);
  text.scalar("vend_inbound_saturated", kGauge,
              "1 when the inbound queue is at 90% of its bound or more.",
              h.inbound_saturated ? 1 : 0);
  text.family("vend_inbound_dropped_total", kCounter,
              "MQTT messages dropped before the core: the queue was full, or their machine had "
              "its share waiting.");
  text.sample({{"reason", "queue_full"}}, h.inbound_dropped - h.inbound_dropped_machine_share);
  text.sample({{"reason", "machine_share"}}, h.inbound_dropped_machine_share);
}

}  // namespace

std::string MetricsExporter::render(const AgentMetrics& m, const AgentHealth& health) {
  PrometheusText text;
  render_orders(m, text);
  render_scalars(m, kReservationScalars, text);
  render_reconcile(m, text);
  render_scalars(m, kEventScalars, text);
  text.scalar("vend_devices_online", kGauge, "Devices online.", m.devices_online);
  render_health(health, text);
  text.family("vend_device_clock_skew_ms", kGauge,
              "Device clock minus agent clock, ms (largest recent sample of event ts_ms - now).");
  for (const auto& [device, skew] : m.device_clock_skew_ms) {
    text.sample({{"device", device}}, skew);
  }
  text.family("vend_dispatch_latency_seconds", MetricType::kHistogram,
              "Time from payment to the device's dispense result.");
  std::lock_guard lock(histogram_mu_);
  for (double ms : m.dispatch_latency_ms) dispatch_latency_.observe(ms / 1000.0);
  dispatch_latency_.render(text);
  return text.take();
}

std::string MetricsExporter::scrape(AgentCore& core, const AgentHealth& health) {
  std::lock_guard lock(scrape_mu_);
  return render(core.take_metrics(), health);
}

}  // namespace vend::agent
