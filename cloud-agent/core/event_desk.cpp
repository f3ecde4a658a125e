// EventDesk: messages from devices (events, presence), their
// authentication and place in the device's stream, seq gaps and ledgers,
// and the cumulative acks.
#include "core/event_desk.hpp"

#include <algorithm>

#include "core/device_desk.hpp"
#include "core/order_desk.hpp"
#include "core/output.hpp"
#include "core/writes.hpp"
#include "vend/topics.hpp"

namespace vend::agent {

namespace {
// Presence probes after a connect, status_request_interval_ms apart: a
// device still offline after them is really away (it publishes `online`
// itself when it returns).
constexpr int kPresenceProbeRounds = 3;
}  // namespace

void EventDesk::on_message(const Message& message) {
  auto topic = topics::parse_device_topic(message.topic);
  if (!topic.ok()) {
    ++counters.events_rejected_total;
    out_.reject_log().log(LogLevel::kDebug, detail::kLog, "?", "bad_topic",
                          "ignored message on '" + message.topic.substr(0, 200) + "'");
    return;
  }
  if (!writes_.started) {
    // Not acknowledged, so the device sends it again.
    out_.reject_log().log(LogLevel::kWarn, detail::kLog, topic->device, "not_started",
                          "message from " + topic->device + " before start(): dropped");
    return;
  }
  if (!serves(topic->device)) {
    // Another instance's machine (a subscription not yet gone after its
    // shard moved): left unacknowledged, so its owner gets it again.
    ++counters.events_rejected_total;
    out_.reject_log().log(
        LogLevel::kDebug, detail::kLog, topic->device, "not_owner",
        "message from " + topic->device + ", served by another instance: dropped");
    return;
  }
  switch (topic->kind) {
    case topics::DeviceTopic::Kind::kEvt: on_event(topic->device, message.payload); break;
    case topics::DeviceTopic::Kind::kStatus:
      on_status(topic->device, message.payload, !message.retained);
      break;
    case topics::DeviceTopic::Kind::kCmd: break;  // commands are ours
  }
}

void EventDesk::on_event(const std::string& topic_device, const std::string& payload) {
  auto decoded = proto::decode_event(payload);
  if (!decoded.ok()) {
    return out_.reject_message(topic_device, decoded.error().code, decoded.error().to_string());
  }
  proto::DeviceEvent& event = decoded->message;
  if (event.device != topic_device) {
    return out_.reject_message(topic_device, "wrong_device",
                               "event names device '" + event.device + "'");
  }
  auto* it = devices_.find(event.device);
  if (it == nullptr) return out_.reject_message(topic_device, "unknown_device", "unknown device");
  DeviceRecord& dev = *it;
  if (dev.decommissioned_ms != 0) return reject_decommissioned(dev, "event");
  std::string what =
      std::string(proto::type_name(event.body)) + " seq " + std::to_string(event.seq);
  if (!verify_signed(dev, decoded->canonical, decoded->mac)) {
    // A forged result could claim FAILED for a delivered item (refund fraud).
    return out_.reject_message(topic_device, "bad_mac",
                               "bad_mac on " + what + ": not signed by the device");
  }
  dev.last_seen_ms = clock.wall_ms();
  observe_clock(dev, event.ts_ms);
  if (!admit_event(dev, event, decoded->mac, what)) return;
  if (!writes_.writable().ok()) return;  // left unacknowledged: it comes again
  Changeset changes;
  if (auto s = apply_event(dev, event, decoded->canonical, changes); !s.ok()) {
    log.warn(detail::kLog, dev.id + " " + what + " not processed yet: " + s.error().to_string());
    return;
  }
  changes.advance_device_seq(dev.id, dev.acks.last_processed(), event.seq, decoded->mac);
  dev.acks.processed(event.seq, writes_.commit(std::move(changes)), decoded->mac);
  if (std::holds_alternative<proto::DispenseStarted>(event.body)) {
    // The device's motor waits for this ack: not batched.
    if (dev.acks.expedite(event.seq, clock.monotonic_ms())) acks_due_.insert(dev.id);
  } else {
    schedule_ack(dev);
  }
  ++counters.events_processed_total;
  out_.mark_device_dirty(dev.id);
}

Status EventDesk::apply_event(DeviceRecord& device, proto::DeviceEvent& event,
                              const std::string& canonical, Changeset& changes) {
  if (const auto* r = std::get_if<proto::DispenseResult>(&event.body)) {
    return order_desk_.on_result(device, *r, changes);
  }
  if (const auto* t = std::get_if<proto::TokensMinted>(&event.body)) {
    return on_tokens(device, *t, changes);
  }
  if (auto* s = std::get_if<proto::Snapshot>(&event.body)) {
    on_snapshot(device, event, canonical, std::move(*s), changes);
    return {};
  }
  if (const auto* f = std::get_if<proto::Fault>(&event.body)) {
    on_fault(device, *f, changes);
    return {};
  }
  if (const auto* u = std::get_if<proto::UpdateStatus>(&event.body)) {
    // Kept and shown with the device's faults (GET /v1/devices/{id}/faults).
    std::string message = "version " + u->version + " (" + u->update_id + ")" +
                          (u->reason.empty() ? "" : ": " + u->reason);
    on_fault(device,
             proto::Fault{std::string("update_") + proto::to_string(u->state),
                          message.substr(0, proto::kMaxTextLength), 0},
             changes);
    return {};
  }
  // dispense_started: its seq processed is the point (the order stays
  // DISPATCHED until its result); events_unavailable in order: the gap it
  // answered is closed already.
  return {};
}

void EventDesk::on_status(const std::string& topic_device, const std::string& payload, bool live) {
  auto decoded = proto::decode_status(payload);
  if (!decoded.ok()) {
    return reject_status(topic_device, decoded.error().code, decoded.error().to_string());
  }
  const proto::PresenceStatus& status = decoded->message;
  if (status.device != topic_device) {
    return reject_status(topic_device, "wrong_device",
                         "status names device '" + status.device + "'");
  }
  auto* it = devices_.find(status.device);
  if (it == nullptr) {
    return out_.reject_message(topic_device, "unknown_device", "status of an unknown device");
  }
  DeviceRecord& dev = *it;
  if (dev.decommissioned_ms != 0) return reject_decommissioned(dev, "status");
  if (!verify_signed(dev, decoded->canonical, decoded->mac)) {
    return reject_status(topic_device, "bad_mac", "bad_mac on status");
  }
  dev.last_seen_ms = clock.wall_ms();
  const device_rules::Presence presence = device_rules::decide_presence(dev, status, live);
  if (presence.clock_sample) observe_clock(dev, status.ts_ms, true);
  out_.mark_device_dirty(dev.id);
  switch (presence.kind) {
    case device_rules::Presence::Kind::kOnline:
      if (presence.changed) {
        log.info(detail::kLog, dev.id + " online (boot " + status.boot_id + ")");
      }
      dev.online = true;
      dev.boot_id = status.boot_id;
      // Back, or restarted: commands sent meanwhile may be lost with its inbox.
      if (presence.changed) order_desk_.republish_dispatched(dev.id);
      return;
    case device_rules::Presence::Kind::kStaleWill:
      log.info(detail::kLog, dev.id + ": stale offline will of boot " + status.boot_id +
                                 " ignored (current boot " + dev.boot_id + ")");
      return;
    case device_rules::Presence::Kind::kOffline:
      if (presence.changed) {
        log.info(detail::kLog, dev.id + " offline (boot " + status.boot_id + ")");
      }
      dev.online = false;
      out_.request_status(
          dev);  // a genuine will, or a replay of one: a live device answers at once
      return;
  }
}

void EventDesk::reject_decommissioned(const DeviceRecord& device, const char* what) {
  // Its key is revoked: nothing it signs changes the cloud any more.
  ++counters.decommissioned_messages_total;
  out_.reject_message(device.id, "decommissioned",
                      std::string(what) + " of a decommissioned device: refused");
}

void EventDesk::reject_status(const std::string& device, std::string_view reason,
                              const std::string& detail) {
  out_.reject_message(device, reason, detail);
  // The retained status may now be this one: ask the device for its own.
  if (auto* it = devices_.find(device); it != nullptr) out_.request_status(*it);
}

void EventDesk::probe_presence_after(int64_t delay_ms) {
  presence_probe_due_mono_ms_ = clock.monotonic_ms() + std::max<int64_t>(1, delay_ms);
  presence_probe_round_ = 0;
}

void EventDesk::probe_presence() {
  if (presence_probe_due_mono_ms_ == 0 || clock.monotonic_ms() < presence_probe_due_mono_ms_)
    return;
  presence_probe_due_mono_ms_ = 0;
  bool all_online = true;
  for (auto& [id, dev] : devices_) {
    if (dev.online || !serves(id)) continue;
    all_online = false;
    out_.request_status(dev);
  }
  if (presence_probe_round_++ == 0) device_desk_.resend_restocks("");
  if (all_online || presence_probe_round_ >= kPresenceProbeRounds) return;
  presence_probe_due_mono_ms_ =
      clock.monotonic_ms() + std::max<int64_t>(1, options.status_request_interval_ms);
}

bool EventDesk::verify_signed(DeviceRecord& dev, const std::string& canonical,
                              const std::string& mac) {
  DeviceKeys::Signed by = dev.keys.verify(canonical, mac);
  if (by == DeviceKeys::Signed::kCurrent) return true;
  if (by == DeviceKeys::Signed::kNo) return false;
  if (!writes_.writable().ok()) return false;  // unacknowledged: it comes again
  // The operator installed the new key on the device: the old one is revoked
  // from this message on, and commands are signed with the new one.
  Changeset changes;
  changes.promote_next_key(dev.id, dev.keys.next()->to_hex());
  (void)writes_.commit(std::move(changes));
  dev.keys.promote();
  ++counters.key_rotations_total;
  log.info(detail::kLog, dev.id + " signs with its new key: the old key is revoked");
  out_.mark_device_dirty(dev.id);
  return true;
}

// The estimate and its alert are ClockSkew's (device_link.hpp): a backlog of
// old messages only lowers the estimate, and "behind" is judged only on a
// status request's answer, asked for here.
void EventDesk::observe_clock(DeviceRecord& device, int64_t device_ts_ms, bool status) {
  if (device.clock_skew.observe(clock.monotonic_ms(), device_ts_ms, clock.wall_ms(),
                                options.clock_skew_window_ms, status)) {
    out_.mark_device_dirty(device.id);
  }
  if (device.clock_skew.wants_round_trip(clock.monotonic_ms(), options.clock_skew_alert_ms)) {
    out_.request_status(device);
  }
  ClockSkew::Alert verdict = device.clock_skew.judge(options.clock_skew_alert_ms);
  if (verdict == ClockSkew::Alert::kRaise) {
    if (out_.alert_active(device.id, 0, "clock_skew")) return;  // said once, not per event
    int64_t skew = device.clock_skew.skew_ms().value_or(0);
    bool ahead = skew > options.clock_skew_alert_ms;
    int64_t size = ahead ? skew : -device.clock_skew.upper_bound_ms().value_or(0);
    out_.raise_alert(device.id, 0, "clock_skew", "warning",
                     "device clock " + std::string(ahead ? "ahead" : "behind") + " by at least " +
                         std::to_string(size) + " ms (alert above " +
                         std::to_string(options.clock_skew_alert_ms) +
                         " ms; commands are checked with a " +
                         std::to_string(options.expiry_skew_ms) + " ms tolerance)");
  } else if (verdict == ClockSkew::Alert::kClear) {
    out_.clear_alert(device.id, 0, "clock_skew");
  }
}

void EventDesk::want_ack(DeviceRecord& device) {
  device.acks.want_ack();
  schedule_ack(device);
}

void EventDesk::schedule_ack(DeviceRecord& device) {
  if (device.acks.schedule(clock.monotonic_ms(), options.ack_interval_ms)) {
    acks_due_.insert(device.id);
  }
}

std::vector<Ticket> EventDesk::due_ack_tickets() const {
  std::vector<Ticket> out;
  int64_t now = clock.monotonic_ms();
  for (const auto& id : acks_due_) {
    const DeviceRecord* dev = devices_.find(id);
    if (dev == nullptr || !dev->acks.due(now)) continue;
    if (auto ticket = dev->acks.newest_ticket()) out.push_back(*ticket);
  }
  return out;
}

void EventDesk::flush_acks() {
  if (writes_.failed()) return;  // nothing is acknowledged: after a restart, events come again
  int64_t now = clock.monotonic_ms();
  // Only the devices with an ack pending: a tick costs nothing per idle device.
  for (auto it = acks_due_.begin(); it != acks_due_.end();) {
    const std::string& id = *it;
    auto* found = devices_.find(id);
    if (found == nullptr) {
      it = acks_due_.erase(it);
      continue;
    }
    DeviceRecord& dev = *found;
    if (!dev.acks.due(now)) {
      ++it;
      continue;
    }
    AckWindow::Flushed flushed = dev.acks.flush(now, options.ack_interval_ms);
    if (!flushed.status.ok()) {
      return writes_.write_failed(flushed.status.error(), "event write of " + id);
    }
    if (flushed.ack_upto) {
      (void)out_.publish_command(
          dev, proto::Ack{id, *flushed.ack_upto, dev.ledger_id, std::move(flushed.ack_mac)});
    }
    // Events still committing get their ack on a later tick.
    it = flushed.still_due ? std::next(it) : acks_due_.erase(it);
  }
}

}  // namespace vend::agent
