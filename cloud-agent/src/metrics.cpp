#include "metrics.hpp"

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

void scalar(std::string& out, const char* name, const char* type, const char* help, int64_t value) {
  header(out, name, type, help);
  sample(out, name, value);
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

std::string MetricsExporter::render(AgentMetrics m, bool mqtt_connected) {
  std::string out;
  out.reserve(4096);
  render_orders(m, out);
  scalar(out, "vend_reservations_total", "counter", "Reservations made.", m.reservations_total);
  scalar(out, "vend_reservations_rejected_total", "counter",
         "Reservations refused (sold out, device offline).", m.reservations_rejected_total);
  scalar(out, "vend_stock_store_errors_total", "counter", "Failed stock-store calls.",
         m.store_errors_total);
  scalar(out, "vend_device_events_total", "counter", "Device events processed.",
         m.events_processed_total);
  scalar(out, "vend_device_events_rejected_total", "counter",
         "Device events rejected (bad MAC, unknown device, malformed).", m.events_rejected_total);
  scalar(out, "vend_device_events_duplicate_total", "counter",
         "Device events received again and ignored.", m.duplicate_events_total);
  scalar(out, "vend_stock_items", "gauge", "Sale tokens in all pools.", m.stock_total);
  scalar(out, "vend_devices_online", "gauge", "Devices online.", m.devices_online);
  scalar(out, "vend_mqtt_connected", "gauge", "1 when the agent's MQTT session is up.",
         mqtt_connected ? 1 : 0);

  const char* latency = "vend_dispatch_latency_seconds";
  header(out, latency, "histogram", "Time from payment to the device's dispense result.");
  std::lock_guard lock(histogram_mu_);
  for (double ms : m.dispatch_latency_ms) dispatch_latency_.observe(ms / 1000.0);
  dispatch_latency_.render(latency, out);
  return out;
}

std::string MetricsExporter::scrape(AgentCore& core, bool mqtt_connected) {
  std::lock_guard lock(scrape_mu_);
  return render(core.take_metrics(), mqtt_connected);
}

}  // namespace vend::agent
