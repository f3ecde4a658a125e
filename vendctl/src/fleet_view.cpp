#include "vend/ctl/fleet_view.hpp"

#include <algorithm>
#include <utility>

#include "vend/topics.hpp"

namespace vend::ctl {

namespace {

constexpr std::string_view kOpsPrefix = "vend/v1/ops/";

// The {device} of "vend/v1/ops/<kind>/{device}"; "" when `rest` is not that.
std::string_view device_of(std::string_view rest, std::string_view kind) {
  if (rest.size() <= kind.size() + 1 || rest.substr(0, kind.size()) != kind ||
      rest[kind.size()] != '/') {
    return {};
  }
  std::string_view device = rest.substr(kind.size() + 1);
  return topics::is_valid_device_id(device) ? device : std::string_view{};
}

}  // namespace

std::optional<ops::FleetSummary> FleetView::fleet() const {
  if (instances_.empty()) return fleet_;
  ops::FleetSummary sum;
  for (const auto& [id, f] : instances_) {
    sum.ts_ms = std::max(sum.ts_ms, f.ts_ms);
    sum.devices += f.devices;
    sum.online += f.online;
    sum.stock_total += f.stock_total;
    for (const auto& [state, n] : f.orders_by_state) sum.orders_by_state[state] += n;
    sum.orders_total += f.orders_total;
    sum.alerts_active += f.alerts_active;
    sum.storage_ok = sum.storage_ok && f.storage_ok;
  }
  return sum;
}

Status FleetView::reject(std::string_view topic, const Error& error) {
  ++rejected_;
  last_error_ = std::string(topic) + ": " + error.to_string();
  return error;
}

void FleetView::apply_alert(ops::Alert alert) {
  AlertKey key{alert.code, alert.device, alert.slot};
  if (alert.state == "cleared") {
    alerts_.erase(key);
  } else {
    alerts_[std::move(key)] = std::move(alert);
  }
}

Status FleetView::apply(std::string_view topic, std::string_view payload) {
  if (topic.substr(0, kOpsPrefix.size()) != kOpsPrefix) return {};
  const std::string_view rest = topic.substr(kOpsPrefix.size());
  ++messages_;
  if (rest == "fleet") {
    if (payload.empty()) {
      fleet_.reset();
      return {};
    }
    auto m = ops::decode_fleet(payload);
    if (!m.ok()) return reject(topic, m.error());
    fleet_ = std::move(m).value();
  } else if (std::string_view instance = device_of(rest, "fleet"); !instance.empty()) {
    if (payload.empty()) {
      instances_.erase(std::string(instance));
      return {};
    }
    auto m = ops::decode_fleet(payload);
    if (!m.ok()) return reject(topic, m.error());
    instances_[std::string(instance)] = std::move(m).value();
  } else if (rest == "orders") {
    auto m = ops::decode_order_events(payload);
    if (!m.ok()) return reject(topic, m.error());
    for (ops::OrderEvent& e : m->events) {
      orders_.push_front(std::move(e));
      if (orders_.size() > kRecentOrders) orders_.pop_back();
    }
  } else if (rest == "alerts") {
    auto m = ops::decode_alert(payload);
    if (!m.ok()) return reject(topic, m.error());
    apply_alert(std::move(m).value());
  } else if (std::string_view id = device_of(rest, "devices"); !id.empty()) {
    if (payload.empty()) {
      devices_.erase(std::string(id));
      return {};
    }
    auto m = ops::decode_device(payload);
    if (!m.ok()) return reject(topic, m.error());
    devices_[std::string(id)] = std::move(m).value();
  } else if (std::string_view rid = device_of(rest, "reconcile"); !rid.empty()) {
    if (payload.empty()) {
      reports_.erase(std::string(rid));
      return {};
    }
    auto m = ops::decode_reconcile(payload);
    if (!m.ok()) return reject(topic, m.error());
    reports_[std::string(rid)] = std::move(m).value();
  } else {
    --messages_;  // not ours: a newer agent's topic
  }
  return {};
}

}  // namespace vend::ctl
