// DeviceCore: the outbox drain, acknowledgements, snapshots and the tick.
#include <algorithm>

#include "vend/fw/device_core.hpp"
#include "vend/topics.hpp"

namespace vend::fw {

namespace {
constexpr const char* kLog = "core";
constexpr int64_t kOutboxScanMs = 250;  // notice rows written by other processes
constexpr int64_t kPressureCheckMs = 1000;
constexpr int64_t kRefusalReportMs = 60000;  // at most one refused_commands fault a minute
}  // namespace

void DeviceCore::tick() {
  check_storage();
  poll_motor();
  start_next_dispense();
  maybe_periodic_snapshot();
  check_outbox_pressure();
  report_refusals();
  maybe_republish_presence();
  drain_outbox();
}

void DeviceCore::maybe_republish_presence() {
  if (!connected_ || options_.presence_interval_ms <= 0) return;
  int64_t now = clock_.monotonic_ms();
  if (now - last_presence_ms_ < options_.presence_interval_ms) return;
  if (transport_.publish(presence(identity(), true, clock_.wall_ms())).ok()) {
    last_presence_ms_ = now;
  }
}

CommandOutcome DeviceCore::handle_status_request() {
  int64_t now = clock_.monotonic_ms();
  if (status_answered_ms_ >= 0 && now - status_answered_ms_ < 1000) {
    return CommandOutcome{"status_request", "duplicate", ""};
  }
  if (auto s = transport_.publish(presence(identity(), true, clock_.wall_ms())); !s.ok()) {
    return CommandOutcome{"status_request", "ignored", s.error().to_string()};
  }
  status_answered_ms_ = now;
  last_presence_ms_ = now;
  return CommandOutcome{"status_request", "done", ""};
}

namespace {
// An ack or resend naming another ledger (the one an old SD card or board
// held) says nothing about this ledger's seqs. "" is an agent that names none.
bool for_other_ledger(const std::string& named, const Identity& self) {
  return !named.empty() && named != self.ledger_id;
}
}  // namespace

CommandOutcome DeviceCore::handle_ack(const proto::Ack& ack) {
  if (for_other_ledger(ack.ledger_id, identity())) {
    return refuse("ack", "other_ledger",
                  "ack for ledger " + ack.ledger_id + ", this is " + identity().ledger_id);
  }
  auto dropped = ledger_.acknowledge(ack.upto_seq);
  if (!dropped.ok()) return refuse("ack", "bad_ack", dropped.error().message);
  acked_ = std::max(acked_, ack.upto_seq);
  sent_upto_ = std::max(sent_upto_, ack.upto_seq);
  return CommandOutcome{"ack", "done", std::to_string(*dropped)};
}

Result<uint64_t> DeviceCore::oldest_held_seq() {
  auto rows = ledger_.outbox_after(acked_, 1);
  if (!rows.ok()) return rows.error();
  if (!rows->empty()) return rows->front().seq;
  auto last = ledger_.last_seq();
  if (!last.ok()) return last.error();
  return *last + 1;
}

CommandOutcome DeviceCore::handle_resend(const proto::ResendRequest& request) {
  if (for_other_ledger(request.ledger_id, identity())) {
    return refuse("resend", "other_ledger",
                  "resend for ledger " + request.ledger_id + ", this is " + identity().ledger_id);
  }
  const std::string from = std::to_string(request.from_seq);
  if (request.from_seq > acked_) {  // still held: publish again from there (the cloud dedups)
    sent_upto_ = std::min(sent_upto_, request.from_seq - 1);
    outbox_dirty_ = true;
    return CommandOutcome{"resend", "done", from};
  }
  sent_upto_ = acked_;  // everything held goes out again, oldest first
  outbox_dirty_ = true;
  if (unavailable_reported_at_ == acked_) return CommandOutcome{"resend", "duplicate", from};
  if (outbox_full()) return refuse("resend", "outbox_full", from);
  auto oldest = oldest_held_seq();
  if (!oldest.ok()) return refuse("resend", "storage", oldest.error().to_string());
  proto::EventsUnavailable gone{request.from_seq, *oldest};
  if (auto seq = ledger_.append_event(gone, clock_.wall_ms()); !seq.ok()) {
    return refuse("resend", "storage", seq.error().to_string());
  }
  unavailable_reported_at_ = acked_;
  log_.warn(kLog, "cloud asked for events from " + from + ", acknowledged earlier; oldest held " +
                      std::to_string(*oldest));
  return CommandOutcome{"resend", "done", "unavailable"};
}

CommandOutcome DeviceCore::handle_snapshot(const proto::SnapshotRequest& request) {
  if (outbox_full()) return refuse("snapshot_request", "outbox_full", request.request_id);
  auto seq =
      ledger_.append_snapshot(request.request_id, request.full, hal_.inventory, clock_.wall_ms());
  if (!seq.ok()) {
    note_storage_error(seq.error());
    return refuse("snapshot_request", "storage", seq.error().to_string());
  }
  outbox_dirty_ = true;
  return CommandOutcome{"snapshot_request", "done", request.request_id};
}

void DeviceCore::maybe_periodic_snapshot() {
  if (options_.snapshot_interval_ms <= 0) return;
  int64_t now = clock_.monotonic_ms();
  if (now - last_snapshot_ms_ < options_.snapshot_interval_ms) return;
  last_snapshot_ms_ = now;
  if (outbox_alarm_) return;  // snapshots are the first thing to give way
  if (ledger_.append_snapshot("", false, hal_.inventory, clock_.wall_ms()).ok()) {
    outbox_dirty_ = true;
  }
}

void DeviceCore::check_outbox_pressure() {
  int64_t now = clock_.monotonic_ms();
  if (now - last_pressure_check_ms_ < kPressureCheckMs) return;
  last_pressure_check_ms_ = now;
  auto depth = ledger_.outbox_depth();
  if (!depth.ok()) return;
  int64_t high = options_.outbox_max * 8 / 10;
  int64_t low = options_.outbox_max * 6 / 10;
  if (!outbox_alarm_ && *depth >= high) {
    outbox_alarm_ = true;
    (void)ledger_.append_event(
        proto::Fault{"outbox_near_full",
                     std::to_string(*depth) + " of " + std::to_string(options_.outbox_max) +
                         " events unacknowledged; new work is refused at the limit",
                     0},
        clock_.wall_ms());
    outbox_dirty_ = true;
    log_.warn(kLog, "outbox near full: " + std::to_string(*depth));
  } else if (outbox_alarm_ && *depth <= low) {
    outbox_alarm_ = false;
  }
}

void DeviceCore::report_refusals() {
  refusal_log_.flush();
  if (refused_unreported_ == 0) return;
  int64_t now = clock_.monotonic_ms();
  if (last_refusal_report_ms_ != 0 && now - last_refusal_report_ms_ < kRefusalReportMs) return;
  if (outbox_alarm_) return;
  last_refusal_report_ms_ = now;
  std::string message = std::to_string(refused_unreported_) +
                        " command(s) refused; last: " + last_refusal_.substr(0, 200);
  if (ledger_.append_event(proto::Fault{"refused_commands", message, 0}, clock_.wall_ms()).ok()) {
    refused_unreported_ = 0;
    outbox_dirty_ = true;
  }
}

void DeviceCore::drain_outbox() {
  int64_t now = clock_.monotonic_ms();
  if (!connected_ || now < drain_after_ms_) return;
  if (sent_upto_ > acked_ && now - last_send_ms_ >= options_.retransmit_ms) {
    sent_upto_ = acked_;  // the cloud has not acknowledged: send again (it dedups by seq)
    outbox_dirty_ = true;
  }
  if (!outbox_dirty_ && now - last_scan_ms_ < kOutboxScanMs) return;
  last_scan_ms_ = now;

  double rate = std::max(1, options_.outbox_drain_per_s);
  send_budget_ = std::min(rate, send_budget_ + static_cast<double>(now - budget_ms_) * rate / 1000);
  budget_ms_ = now;
  int64_t window =
      static_cast<int64_t>(acked_) + options_.outbox_window - static_cast<int64_t>(sent_upto_);
  int limit = static_cast<int>(std::min<int64_t>(window, static_cast<int64_t>(send_budget_)));
  if (limit <= 0) return;
  auto rows = ledger_.outbox_after(sent_upto_, limit);
  if (!rows.ok()) return;
  outbox_dirty_ = static_cast<int>(rows->size()) == limit;  // more may be waiting
  const std::string topic = topics::device_evt(identity().device_id);
  for (const auto& row : *rows) {
    if (auto s = transport_.publish(Message{topic, row.payload, 1, false}); !s.ok()) {
      outbox_dirty_ = true;
      return;  // stays in the outbox; retried on the next tick
    }
    sent_upto_ = row.seq;
    last_send_ms_ = now;
    send_budget_ -= 1;
    ++stats_.events_published;
  }
}

}  // namespace vend::fw
