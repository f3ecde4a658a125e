#include "http/metrics.hpp"

#include <charconv>
#include <cmath>

namespace vend::agent {

namespace {

constexpr OrderState kAllStates[] = {
    OrderState::kReserved,  OrderState::kPaid,     OrderState::kDispatched,
    OrderState::kCompleted, OrderState::kExpired,  OrderState::kCancelled,
    OrderState::kFailed,    OrderState::kRefunded, OrderState::kNeedsReview,
};

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, const char* name, int64_t value) {
  out += name;
  out += ' ';
  out += std::to_string(value);
  out += '\n';
}

// Every state gets a series, even at 0, so dashboards see stable series.
void render_orders(const AgentMetrics& m, std::string& out) {
  header(out, "vend_orders", "gauge", "Orders by state.");
  for (OrderState state : kAllStates) {
    int64_t n = 0;
    for (const auto& [name, count] : m.orders_by_state) {
      if (name == to_string(state)) n = count;
    }
    out += "vend_orders{state=\"";
    out += to_string(state);
    out += "\"} " + std::to_string(n) + "\n";
  }
}

// Reconciliation runs, what they repaired, and the alerts they raised.
void render_reconcile(const AgentMetrics& m, std::string& out) {
  prometheus_scalar(out, "vend_reconcile_runs_total", "counter",
                    "Reconciliations run (one per snapshot).", m.reconcile_runs_total);
  prometheus_scalar(out, "vend_reconcile_tokens_added_total", "counter",
                    "Tokens a device held that the cloud lacked, added to pools.",
                    m.tokens_added_total);
  prometheus_scalar(out, "vend_reconcile_tokens_removed_total", "counter",
                    "Tokens the cloud held that a device no longer had, removed.",
                    m.tokens_removed_total);
  prometheus_scalar(out, "vend_device_seq_gaps_total", "counter",
                    "Event seq gaps skipped on the device's word that it no longer holds them.",
                    m.seq_gaps_total);
  prometheus_scalar(out, "vend_device_ledgers_replaced_total", "counter",
                    "Device ledgers replaced by a new one (reflashed SD card, new board).",
                    m.ledgers_replaced_total);
  prometheus_scalar(out, "vend_device_retired_ledger_events_total", "counter",
                    "Events of a replaced device ledger (refused; dispense results judged).",
                    m.retired_ledger_events_total);
  prometheus_scalar(out, "vend_device_diverged_events_total", "counter",
                    "Device events under a processed seq with other content (a ledger that "
                    "went back in time), refused.",
                    m.diverged_events_total);
  prometheus_scalar(out, "vend_device_key_rotations_total", "counter",
                    "Devices that signed with their new key (the old one revoked).",
                    m.key_rotations_total);
  prometheus_scalar(out, "vend_device_decommissioned_messages_total", "counter",
                    "Messages of decommissioned devices, refused.",
                    m.decommissioned_messages_total);
  prometheus_scalar(out, "vend_device_resend_requests_total", "counter",
                    "Resend commands sent to devices for a seq gap.", m.resend_requests_total);
  prometheus_scalar(
      out, "vend_dispense_contradictions_total", "counter",
      "DISPENSED results for orders already settled otherwise (alert dispense_contradiction).",
      m.contradictions_total);
  prometheus_scalar(out, "vend_device_status_requests_total", "counter",
                    "status_request commands sent (no trusted status of the device).",
                    m.status_requests_total);
  prometheus_scalar(out, "vend_restocks_resent_total", "counter",
                    "Restock commands sent again: not minted yet at a connect or a periodic "
                    "reconcile.",
                    m.restocks_resent_total);
  prometheus_scalar(out, "vend_alerts_raised_total", "counter", "Alerts raised.",
                    m.alerts_raised_total);
  prometheus_scalar(
      out, "vend_refunds_pending", "gauge",
      "Refunds recorded and not yet confirmed by the payment gateway (the refund outbox).",
      m.refunds_pending);
  prometheus_scalar(out, "vend_refund_attempts_total", "counter", "Refund deliveries tried.",
                    m.refund_attempts_total);
  prometheus_scalar(out, "vend_refunds_delivered_total", "counter",
                    "Refunds the payment gateway confirmed.", m.refunds_delivered_total);
  prometheus_scalar(out, "vend_refunds_given_up_total", "counter",
                    "Refunds given up to an alert (refused by the gateway, or too many failures).",
                    m.refunds_given_up_total);
  header(out, "vend_alerts_active", "gauge", "Alerts raised and not cleared, by code.");
  for (const auto& [code, n] : m.alerts_active) {
    out += "vend_alerts_active{code=\"" + code + "\"} " + std::to_string(n) + "\n";
  }
}

}  // namespace

std::string format_double(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return ec == std::errc() ? std::string(buf, end) : std::string("NaN");
}

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

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += buckets_[i];
    out += name + "_bucket{le=\"" + format_double(kBounds[i]) + "\"} " +
           std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + format_double(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

std::vector<std::string> AgentHealth::reasons() const {
  std::vector<std::string> out;
  if (storage_failed) out.emplace_back("storage_failed");
  if (broker_down) out.emplace_back("broker_down");
  if (inbound_saturated) out.emplace_back("inbound_saturated");
  return out;
}

namespace {
void render_health(const AgentHealth& h, std::string& out) {
  prometheus_scalar(out, "vend_healthy", "gauge", "1 when /healthz answers 200.",
                    h.reasons().empty() ? 1 : 0);
  prometheus_scalar(out, "vend_storage_failed", "gauge",
                    "1 when the repository fail-stopped (restart to rebuild from the log).",
                    h.storage_failed ? 1 : 0);
  prometheus_scalar(out, "vend_mqtt_connected", "gauge", "1 when the agent's MQTT session is up.",
                    h.mqtt_connected ? 1 : 0);
  prometheus_scalar(out, "vend_mqtt_down_seconds", "gauge",
                    "How long the broker connection has been down (0 while up).",
                    h.mqtt_down_ms / 1000);
  prometheus_scalar(out, "vend_broker_down", "gauge",
                    "1 when the broker has been down past the grace.", h.broker_down ? 1 : 0);
  prometheus_scalar(out, "vend_inbound_queue_messages", "gauge",
                    "MQTT messages waiting for the core.",
                    static_cast<int64_t>(h.inbound_messages));
  prometheus_scalar(out, "vend_inbound_saturated", "gauge",
                    "1 when the inbound queue is at 90% of its bound or more.",
                    h.inbound_saturated ? 1 : 0);
  out +=
      "# HELP vend_inbound_dropped_total MQTT messages dropped before the core: the queue was "
      "full, "
      "or their machine had its share waiting.\n# TYPE vend_inbound_dropped_total counter\n";
  out += "vend_inbound_dropped_total{reason=\"queue_full\"} " +
         std::to_string(h.inbound_dropped - h.inbound_dropped_machine_share) + "\n";
  out += "vend_inbound_dropped_total{reason=\"machine_share\"} " +
         std::to_string(h.inbound_dropped_machine_share) + "\n";
}
}  // namespace

std::string MetricsExporter::render(AgentMetrics m, const AgentHealth& health) {
  std::string out;
  out.reserve(4096);
  render_orders(m, out);
  prometheus_scalar(out, "vend_reservations_total", "counter", "Reservations made.",
                    m.reservations_total);
  prometheus_scalar(out, "vend_reservations_rejected_total", "counter",
                    "Reservations refused (sold out, device offline, no broker connection).",
                    m.reservations_rejected_total);
  prometheus_scalar(out, "vend_reservations_broker_unreachable_total", "counter",
                    "Reservations refused because the agent had no broker connection.",
                    m.reservations_broker_unreachable_total);
  render_reconcile(m, out);
  prometheus_scalar(out, "vend_device_events_total", "counter", "Device events processed.",
                    m.events_processed_total);
  prometheus_scalar(out, "vend_device_events_rejected_total", "counter",
                    "Device events rejected (bad MAC, unknown device, malformed).",
                    m.events_rejected_total);
  prometheus_scalar(out, "vend_device_events_duplicate_total", "counter",
                    "Device events received again and ignored.", m.duplicate_events_total);
  prometheus_scalar(out, "vend_stock_items", "gauge", "Sale tokens in all pools.", m.stock_total);
  prometheus_scalar(out, "vend_devices_online", "gauge", "Devices online.", m.devices_online);
  render_health(health, out);
  header(out, "vend_device_clock_skew_ms", "gauge",
         "Device clock minus agent clock, ms (largest recent sample of event ts_ms - now).");
  for (const auto& [device, skew] : m.device_clock_skew_ms) {
    out += "vend_device_clock_skew_ms{device=\"" + device + "\"} " + std::to_string(skew) + "\n";
  }

  const char* latency = "vend_dispatch_latency_seconds";
  header(out, latency, "histogram", "Time from payment to the device's dispense result.");
  std::lock_guard lock(histogram_mu_);
  for (double ms : m.dispatch_latency_ms) dispatch_latency_.observe(ms / 1000.0);
  dispatch_latency_.render(latency, out);
  return out;
}

std::string MetricsExporter::scrape(AgentCore& core, const AgentHealth& health) {
  std::lock_guard lock(scrape_mu_);
  return render(core.take_metrics(), health);
}

void prometheus_scalar(std::string& out, const char* name, const char* type, const char* help,
                       int64_t value) {
  header(out, name, type, help);
  sample(out, name, value);
}

}  // namespace vend::agent
