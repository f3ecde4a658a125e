// What a step sends (output.hpp). Ops messages are informational only:
// published at QoS 0 (order events) or 1 (the rest), a failed publish is
// counted and forgotten — the retained views are re-published on the next
// change, and nothing depends on them (vend/ops.hpp, docs/asyncapi.yaml).
#include "core/output.hpp"

#include <type_traits>
#include <variant>

#include "core/writes.hpp"
#include "ops/ops_views.hpp"
#include "vend/crypto.hpp"
#include "vend/topics.hpp"

namespace vend::agent {

namespace {
// At most one check snapshot request per device this often, however many
// of its orders are overdue at once.
constexpr int64_t kMinCheckIntervalMs = 1000;
}  // namespace

Output::Output(const CoreEnv& env, const DeviceBook& devices, const Stock& stock,
               const OrderBook& orders, const Writes& writes)
    : CoreEnv(env),
      devices_(devices),
      stock_(stock),
      orders_(orders),
      writes_(writes),
      views_(env.options.ops_interval_ms),
      reject_log_(env.clock, env.log,
                  RateLimitedLog::Options{env.options.reject_log_interval_ms, 256}) {}

detail::Effects Output::take_effects() {
  detail::Effects out = std::move(effects_);
  effects_ = {};
  return out;
}

// The command as it goes out: protocol options.command_version, and in v2
// every command expires. A dispense carries the order's expiry plus the
// skew tolerance as its one hard bound: the device runs it no later than
// the instant the agent decides it never ran (rules::decide_overdue), so
// the two cannot disagree whatever the device's own configuration. Other
// commands live command_ttl_ms (plus the tolerance): a captured one cannot
// be replayed after that.
proto::Command Output::stamped(const proto::Command& command) const {
  proto::Command out = command;
  const int version = options.command_version;
  const int64_t expires_at_ms =
      saturating_add(clock.wall_ms(), options.command_ttl_ms + options.expiry_skew_ms);
  std::visit(
      [&](auto& c) {
        c.v = version;
        if constexpr (std::is_same_v<std::decay_t<decltype(c)>, proto::DispenseCommand>) {
          if (version >= 2)
            c.expires_at_ms = saturating_add(c.expires_at_ms, options.expiry_skew_ms);
          // Firmware before v2 refuses the ledger fence's fields as unknown.
          if (version < 2) c.ledger_id.clear();
        } else {
          c.expires_at_ms = version >= 2 ? expires_at_ms : 0;
        }
        // A v1 device (old firmware) refuses an ack's upto_mac as an unknown
        // field: it checks the covered event's mac only from v2 on.
        if constexpr (std::is_same_v<std::decay_t<decltype(c)>, proto::Ack>) {
          if (version < 2) c.upto_mac.clear();
        }
      },
      out);
  return out;
}

Status Output::publish_command(const DeviceRecord& device, const proto::Command& unstamped,
                               const std::string& order_id) {
  const proto::Command command = stamped(unstamped);
  if (!serves(device.id)) {
    // Its shard's lease is not valid here now (this instance was paused or
    // cut off past it, or the shard is leaving): another instance may own
    // the machine; nothing goes out on its behalf.
    return make_error("not_owner", device.id);
  }
  if (!connected) {
    log.warn(detail::kLog, std::string(proto::type_name(command)) + " to " + device.id +
                               " not published: the broker connection is down");
    return make_error("not_connected", "the broker connection is down");
  }
  std::string mac = crypto::sign(device.keys.current(), proto::encode_canonical(command));
  bool restock = std::holds_alternative<proto::RestockCommand>(command);
  effects_.publishes.push_back(
      detail::Publish{Message{topics::device_cmd(device.id), proto::encode(command, mac), 1, false},
                      order_id, restock ? device.id : std::string()});
  return {};
}

void Output::request_status(DeviceRecord& device) {
  // Only a request that can go out spends the interval: one dropped while
  // the broker connection is down would hold back the probe after connect.
  if (!connected || !serves(device.id)) return;
  if (!detail::take_turn(device.status_requested_mono_ms, clock.monotonic_ms(),
                         options.status_request_interval_ms)) {
    return;
  }
  ++counters.status_requests_total;
  if (!publish_command(device, proto::StatusRequest{device.id}).ok()) return;
  // Its answer bounds the device's clock skew (ClockSkew); an offline
  // device's answer is not due.
  if (device.online) device.clock_skew.asked(clock.monotonic_ms(), clock.wall_ms());
}

void Output::request_check_snapshot(DeviceRecord& device, const char* prefix) {
  // Offline, a request would only queue up; the recheck asks again later.
  if (!device.online) return;
  if (!detail::take_turn(device.check_requested_mono_ms, clock.monotonic_ms(),
                         kMinCheckIntervalMs)) {
    return;
  }
  proto::SnapshotRequest request{device.id, prefix + random.id128().substr(0, 16), true};
  (void)publish_command(device, request);
}

void Output::request_resend(DeviceRecord& device) {
  if (!detail::take_turn(device.resend_requested_mono_ms, clock.monotonic_ms(),
                         options.resend_interval_ms)) {
    return;
  }
  ++counters.resend_requests_total;
  uint64_t from = device.acks.last_processed() + 1;
  log.info(detail::kLog, device.id + ": seq gap, asking it to resend from " + std::to_string(from));
  (void)publish_command(device, proto::ResendRequest{device.id, from, device.ledger_id});
}

void Output::subscribe_device(const std::string& device) {
  if (!subscribed_devices.insert(device).second) return;
  effects_.subscribes.push_back(topics::device_evt(device));
  effects_.subscribes.push_back(topics::device_status(device));
}

void Output::unsubscribe_device(const std::string& device) {
  if (subscribed_devices.erase(device) == 0) return;
  effects_.unsubscribes.push_back(topics::device_evt(device));
  effects_.unsubscribes.push_back(topics::device_status(device));
}

void Output::subscribe_all() {
  for (const auto& filter : {topics::all_device_evt(), topics::all_device_status()}) {
    effects_.subscribes.push_back(filter);
  }
}

void Output::reject_message(const std::string& device, std::string_view reason,
                            const std::string& detail) {
  ++counters.events_rejected_total;
  reject_log_.log(LogLevel::kWarn, detail::kLog, device, reason,
                  "rejected message from '" + device + "': " + detail);
}

void Output::publish_ops(std::string topic, std::string payload, int qos, bool retained) {
  if (!options.ops_enabled) return;
  if (!connected) {
    log.debug(detail::kLog, "ops message on " + topic + " dropped: the broker connection is down");
    return;
  }
  effects_.publishes.push_back(
      detail::Publish{Message{std::move(topic), std::move(payload), qos, retained}, "", ""});
}

void Output::ops_order_event(const OrderRec& rec, const std::string& from) {
  mark_device_dirty(rec.order.device);
  if (!options.ops_enabled) return;
  const Order& o = rec.order;
  // Bounded: a burst between two ticks goes out in several messages.
  if (pending_order_events_.add(ops::OrderEventView{o.id, o.device, o.slot, from,
                                                    to_string(o.state), o.price_cents, o.reason,
                                                    o.updated_ms})) {
    flush_order_events();
  }
}

void Output::flush_order_events() {
  if (auto payload = pending_order_events_.take()) {
    publish_ops(topics::ops_orders(), std::move(*payload), 0, false);
  }
}

void Output::mark_device_dirty(const std::string& device_id) {
  if (!options.ops_enabled) return;
  views_.device_changed(device_id, clock.monotonic_ms());
}

void Output::publish_reconcile_report(const std::string& device_id, const std::string& report) {
  publish_ops(topics::ops_reconcile(device_id), report, 1, true);
}

bool Output::alert_active(const std::string& device, int slot, std::string_view code) const {
  return alerts_.active(device, slot, code);
}

void Output::raise_alert(const std::string& device, int slot, const std::string& code,
                         const std::string& severity, const std::string& message) {
  auto raised = alerts_.raise(device, slot, code, severity, message, clock.wall_ms());
  if (!raised.publish) return;  // already said
  if (raised.new_alert) {
    ++counters.alerts_raised_total;
    log.warn(detail::kLog,
             "ALERT " + code + " " + device + " slot " + std::to_string(slot) + ": " + message);
  }
  views_.fleet_changed();
  publish_ops(topics::ops_alerts(), ops::encode(*raised.publish), 1, false);
}

void Output::clear_alert(const std::string& device, int slot, std::string_view code) {
  auto cleared = alerts_.clear(device, slot, code, clock.wall_ms());
  if (!cleared) return;
  log.info(detail::kLog, "alert " + std::string(code) + " " + device + " slot " +
                             std::to_string(slot) + " cleared");
  views_.fleet_changed();
  publish_ops(topics::ops_alerts(), ops::encode(*cleared), 1, false);
}

ops::DeviceStatus Output::device_status(const DeviceRecord& d) const {
  return ops_views::device_status(d, stock_.slots(d.id), clock.wall_ms(), options.instance_id);
}

ops::FleetSummary Output::fleet_summary() const {
  return ops_views::fleet_summary(
      devices_, stock_, orders_, alerts_,
      ops_views::FleetFacts{!writes_.storage_failed, clock.wall_ms(), options.instance_id});
}

void Output::publish_ops_views() {
  if (!options.ops_enabled) return;
  flush_order_events();
  int64_t now = clock.monotonic_ms();
  for (const auto& id : views_.take_due_devices(now)) {
    const DeviceRecord* dev = devices_.find(id);
    if (dev == nullptr || !serves(id)) continue;  // another instance's view now
    publish_ops(topics::ops_device(id), ops::encode(device_status(*dev)), 1, true);
  }
  if (views_.take_fleet_due(now)) {
    // Several agents: each its own summary (of its machines).
    publish_ops(options.instance_id.empty() ? topics::ops_fleet()
                                            : topics::ops_fleet_of(options.instance_id),
                ops::encode(fleet_summary()), 1, true);
  }
}

}  // namespace vend::agent
