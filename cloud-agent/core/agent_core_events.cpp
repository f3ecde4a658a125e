// AgentCore::State: messages from devices (events, presence), their
// authentication and (device, seq) dedup, and the cumulative acks.
#include "agent_state.hpp"
#include "vend/topics.hpp"

namespace vend::agent {

void AgentCore::State::on_message(const Message& message) {
  auto topic = topics::parse_device_topic(message.topic);
  if (!topic.ok()) {
    ++counters.events_rejected_total;
    reject_log.log(LogLevel::kDebug, detail::kLog, "?", "bad_topic",
                   "ignored message on '" + message.topic.substr(0, 200) + "'");
    return;
  }
  if (!started) {
    // Not acknowledged, so the device sends it again.
    reject_log.log(LogLevel::kWarn, detail::kLog, topic->device, "not_started",
                   "message from " + topic->device + " before start(): dropped");
    return;
  }
  if (!serves(topic->device)) {
    // Another instance's machine (a subscription not yet gone after its
    // shard moved): left unacknowledged, so its owner gets it again.
    ++counters.events_rejected_total;
    reject_log.log(LogLevel::kDebug, detail::kLog, topic->device, "not_owner",
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

void AgentCore::State::reject_message(const std::string& device, std::string_view reason,
                                      const std::string& detail) {
  ++counters.events_rejected_total;
  reject_log.log(LogLevel::kWarn, detail::kLog, device, reason,
                 "rejected message from '" + device + "': " + detail);
}

void AgentCore::State::on_event(const std::string& topic_device, const std::string& payload) {
  auto decoded = proto::decode_event(payload);
  if (!decoded.ok()) {
    return reject_message(topic_device, decoded.error().code, decoded.error().to_string());
  }
  proto::DeviceEvent& event = decoded->message;
  if (event.device != topic_device) {
    return reject_message(topic_device, "wrong_device",
                          "event names device '" + event.device + "'");
  }
  auto* it = devices.find(event.device);
  if (it == nullptr) return reject_message(topic_device, "unknown_device", "unknown device");
  DeviceRecord& dev = *it;
  if (dev.decommissioned_ms != 0) return reject_decommissioned(dev, "event");
  std::string what =
      std::string(proto::type_name(event.body)) + " seq " + std::to_string(event.seq);
  if (!verify_signed(dev, decoded->canonical, decoded->mac)) {
    // A forged result could claim FAILED for a delivered item (refund fraud).
    return reject_message(topic_device, "bad_mac",
                          "bad_mac on " + what + ": not signed by the device");
  }
  dev.last_seen_ms = clock.wall_ms();
  observe_clock(dev, event.ts_ms);
  if (!admit_event(dev, event, what)) return;
  if (!writable().ok()) return;  // left unacknowledged: it comes again
  Changeset changes;
  if (auto s = apply_event(dev, event, decoded->canonical, changes); !s.ok()) {
    log.warn(detail::kLog, dev.id + " " + what + " not processed yet: " + s.error().to_string());
    return;
  }
  changes.advance_device_seq(dev.id, dev.acks.last_processed(), event.seq);
  dev.acks.processed(event.seq, commit(std::move(changes)));
  schedule_ack(dev);
  ++counters.events_processed_total;
  mark_device_dirty(dev.id);
}

bool AgentCore::State::admit_event(DeviceRecord& dev, const proto::DeviceEvent& event,
                                   const std::string& what) {
  const device_rules::Intake intake = device_rules::decide_intake(dev, event);
  using Action = device_rules::Intake::Action;
  if (intake.ledger == device_rules::Intake::Ledger::kRetired) {
    // A late event of a card or board that was replaced: its ledger is gone
    // from the machine, so it may no longer change what the cloud believes.
    ++counters.retired_ledger_events_total;
    reject_message(
        dev.id, "retired_ledger",
        what + " of retired ledger '" + event.ledger_id + "' (current '" + dev.ledger_id + "')");
    return false;
  }
  if (intake.ledger != device_rules::Intake::Ledger::kCurrent) {
    if (!writable().ok()) return false;  // unacknowledged: it comes again
    switch_ledger(dev, event.ledger_id, intake.ledger == device_rules::Intake::Ledger::kReplaced);
  }
  switch (intake.action) {
    case Action::kRefuse: return false;  // kRetired, above
    case Action::kReack:
      ++counters.duplicate_events_total;
      want_ack(dev);  // its ack may have been lost
      return false;
    case Action::kResend:
      if (!writable().ok()) return false;
      request_resend(dev);
      log.debug(detail::kLog, dev.id + " " + what + " skipped: waiting for seq " +
                                  std::to_string(dev.acks.last_processed() + 1));
      return false;  // unacknowledged: the device resends in order
    case Action::kSkip:
      if (!writable().ok()) return false;
      skip_seq_gap(dev, intake);
      return intake.process_after_skip;  // else older held ones first
    case Action::kProcess: return true;
  }
  return false;
}

Status AgentCore::State::apply_event(DeviceRecord& device, proto::DeviceEvent& event,
                                     const std::string& canonical, Changeset& changes) {
  if (const auto* r = std::get_if<proto::DispenseResult>(&event.body)) {
    return on_dispense_result(device, *r, changes);
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
  // events_unavailable in order: the gap it answered is closed already.
  return {};
}

void AgentCore::State::on_status(const std::string& topic_device, const std::string& payload,
                                 bool live) {
  auto decoded = proto::decode_status(payload);
  if (!decoded.ok()) {
    return reject_status(topic_device, decoded.error().code, decoded.error().to_string());
  }
  const proto::PresenceStatus& status = decoded->message;
  if (status.device != topic_device) {
    return reject_status(topic_device, "wrong_device",
                         "status names device '" + status.device + "'");
  }
  auto* it = devices.find(status.device);
  if (it == nullptr) {
    return reject_message(topic_device, "unknown_device", "status of an unknown device");
  }
  DeviceRecord& dev = *it;
  if (dev.decommissioned_ms != 0) return reject_decommissioned(dev, "status");
  if (!verify_signed(dev, decoded->canonical, decoded->mac)) {
    return reject_status(topic_device, "bad_mac", "bad_mac on status");
  }
  dev.last_seen_ms = clock.wall_ms();
  const device_rules::Presence presence = device_rules::decide_presence(dev, status, live);
  if (presence.clock_sample) observe_clock(dev, status.ts_ms);
  mark_device_dirty(dev.id);
  switch (presence.kind) {
    case device_rules::Presence::Kind::kOnline:
      if (presence.changed) {
        log.info(detail::kLog, dev.id + " online (boot " + status.boot_id + ")");
      }
      dev.online = true;
      dev.boot_id = status.boot_id;
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
      request_status(dev);  // a genuine will, or a replay of one: a live device answers at once
      return;
  }
}

void AgentCore::State::reject_decommissioned(const DeviceRecord& device, const char* what) {
  // Its key is revoked: nothing it signs changes the cloud any more.
  ++counters.decommissioned_messages_total;
  reject_message(device.id, "decommissioned",
                 std::string(what) + " of a decommissioned device: refused");
}

void AgentCore::State::reject_status(const std::string& device, std::string_view reason,
                                     const std::string& detail) {
  reject_message(device, reason, detail);
  // The retained status may now be this one: ask the device for its own.
  if (auto* it = devices.find(device); it != nullptr) request_status(*it);
}

void AgentCore::State::request_status(DeviceRecord& device) {
  if (!detail::take_turn(device.status_requested_mono_ms, clock.monotonic_ms(),
                         options.status_request_interval_ms)) {
    return;
  }
  ++counters.status_requests_total;
  (void)publish_command(device, proto::StatusRequest{device.id});
}

void AgentCore::State::probe_presence() {
  if (presence_probe_due_mono_ms == 0 || clock.monotonic_ms() < presence_probe_due_mono_ms) return;
  presence_probe_due_mono_ms = 0;
  for (auto& [id, dev] : devices) {
    if (!dev.online) request_status(dev);
  }
  resend_restocks("");
}

// ---- acks ------------------------------------------------------------------

void AgentCore::State::want_ack(DeviceRecord& device) {
  device.acks.want_ack();
  schedule_ack(device);
}

void AgentCore::State::schedule_ack(DeviceRecord& device) {
  if (device.acks.schedule(clock.monotonic_ms(), options.ack_interval_ms)) {
    acks_due.insert(device.id);
  }
}

std::vector<Ticket> AgentCore::State::due_ack_tickets() {
  std::vector<Ticket> out;
  int64_t now = clock.monotonic_ms();
  for (const auto& id : acks_due) {
    const DeviceRecord* dev = devices.find(id);
    if (dev == nullptr || !dev->acks.due(now)) continue;
    if (auto ticket = dev->acks.newest_ticket()) out.push_back(*ticket);
  }
  return out;
}

void AgentCore::State::flush_acks() {
  if (!storage_failed && repo.has_failed_writes()) fail_storage("a repository write failed");
  if (storage_failed) return;  // nothing is acknowledged: after a restart, events come again
  int64_t now = clock.monotonic_ms();
  // Only the devices with an ack pending: a tick costs nothing per idle device.
  for (auto it = acks_due.begin(); it != acks_due.end();) {
    const std::string& id = *it;
    auto* found = devices.find(id);
    if (found == nullptr) {
      it = acks_due.erase(it);
      continue;
    }
    DeviceRecord& dev = *found;
    if (!dev.acks.due(now)) {
      ++it;
      continue;
    }
    AckWindow::Flushed flushed = dev.acks.flush(now, options.ack_interval_ms);
    if (!flushed.status.ok()) {
      return write_failed(flushed.status.error(), "event write of " + id);
    }
    if (flushed.ack_upto) {
      (void)publish_command(dev, proto::Ack{id, *flushed.ack_upto, dev.ledger_id});
    }
    // Events still committing get their ack on a later tick.
    it = flushed.still_due ? std::next(it) : acks_due.erase(it);
  }
}

}  // namespace vend::agent
