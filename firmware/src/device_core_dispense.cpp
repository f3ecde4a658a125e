// DeviceCore: dispense commands, the motor, and restocks.
#include "ledger_internal.hpp"
#include "vend/fw/device_core.hpp"

namespace vend::fw {

namespace {
constexpr const char* kLog = "core";
}

std::optional<std::string> DeviceCore::check_dispense(const proto::DispenseCommand& c) {
  if (!has_slot(c.slot)) return std::string(proto::reason::kUnknownSlot);
  auto token = ledger_.find_token(c.token);
  if (!token.ok()) return std::nullopt;  // storage trouble: handled by the caller's write
  if (!token->has_value() || (*token)->second != c.slot) {
    return std::string(proto::reason::kUnknownToken);
  }
  if ((*token)->first != TokenState::kAvailable) return std::string(proto::reason::kTokenConsumed);
  if (past_deadline(clock_.wall_ms(), c.expires_at_ms, options_.expiry_skew_ms)) {
    return std::string(proto::reason::kExpired);
  }
  return std::nullopt;
}

CommandOutcome DeviceCore::handle_dispense(const proto::DispenseCommand& c) {
  auto prior = ledger_.find_dispense(c.order_id);
  if (!prior.ok()) return refuse("dispense", "storage", prior.error().to_string());
  if (prior->has_value()) return repeat_result(**prior);
  if (storage_full_) {
    ++refused_while_full_;
    return refuse("dispense", "storage_full",
                  "order " + c.order_id + ": the ledger's storage is full (the cloud re-sends)");
  }
  if (outbox_full()) return refuse("dispense", "outbox_full", "order " + c.order_id);

  if (auto reason = check_dispense(c)) return reject(c, *reason);
  if (queue_.size() + (running_ ? 1 : 0) >= static_cast<size_t>(options_.dispense_queue_max)) {
    // Transient: not recorded against the order, so a later retry can succeed.
    ++stats_.rejected;
    proto::DispenseResult busy{
        c.order_id, c.slot, c.token, proto::DispenseStatus::kRejected, proto::reason::kBusy, false};
    (void)ledger_.append_event(busy, clock_.wall_ms());
    outbox_dirty_ = true;
    return CommandOutcome{"dispense", "rejected", proto::reason::kBusy};
  }
  if (auto s = ledger_.accept_dispense(c, clock_.wall_ms()); !s.ok()) {
    if (note_storage_error(s.error())) ++refused_while_full_;
    return refuse("dispense", storage_full_ ? "storage_full" : "storage", s.error().to_string());
  }
  queue_.push_back(c.order_id);
  log_.info(kLog, "accepted order " + c.order_id + " slot " + std::to_string(c.slot));
  start_next_dispense();
  return CommandOutcome{"dispense", "accepted", ""};
}

CommandOutcome DeviceCore::reject(const proto::DispenseCommand& c, const std::string& reason) {
  ++stats_.rejected;
  auto r = ledger_.record_rejection(c, reason, clock_.wall_ms());
  if (!r.ok()) {
    note_storage_error(r.error());
    return refuse("dispense", storage_full_ ? "storage_full" : "storage", r.error().to_string());
  }
  outbox_dirty_ = true;
  log_.warn(kLog, "rejected order " + c.order_id + ": " + reason);
  return CommandOutcome{"dispense", "rejected", reason};
}

CommandOutcome DeviceCore::repeat_result(const DispenseRow& d) {
  ++stats_.duplicates;
  bool terminal = d.state != DispenseState::kAccepted && d.state != DispenseState::kMotorRunning;
  // Re-report a finished order so a cloud that lost the result hears it
  // again; never while the outbox is under pressure (replays must not fill it).
  if (terminal && !outbox_alarm_) {
    proto::DispenseResult again{d.order_id, d.slot,          d.token, detail::to_status(d.state),
                                d.reason,   d.token_consumed};
    (void)ledger_.append_event(again, clock_.wall_ms());
    outbox_dirty_ = true;
  }
  return CommandOutcome{"dispense", "duplicate", to_string(d.state)};
}

void DeviceCore::start_next_dispense() {
  // With a full ledger nothing new starts: MOTOR_RUNNING could not be written.
  while (!running_ && !queue_.empty() && !storage_full_) {
    std::string order_id = queue_.front();
    queue_.pop_front();
    auto row = ledger_.find_dispense(order_id);
    if (!row.ok() || !row->has_value() || (*row)->state != DispenseState::kAccepted) continue;
    const DispenseRow& d = **row;
    if (past_deadline(clock_.wall_ms(), d.expires_at_ms, options_.expiry_skew_ms)) {
      // Expired while waiting: the motor never moved, the token goes back.
      (void)ledger_.finish_dispense(order_id, DispenseState::kRejected, proto::reason::kExpired,
                                    clock_.wall_ms());
      outbox_dirty_ = true;
      continue;
    }
    // Persist MOTOR_RUNNING before the motor moves: a crash from here on is
    // reported UNCERTAIN at boot, never re-run.
    if (auto s = ledger_.mark_motor_running(order_id, clock_.wall_ms()); !s.ok()) {
      if (!note_storage_error(s.error())) {
        log_.error(kLog, "cannot mark " + order_id + " running: " + s.error().to_string());
      }
      queue_.push_front(order_id);
      return;
    }
    running_ = order_id;
    running_slot_ = d.slot;
    motor_started_ms_ = clock_.monotonic_ms();
    hal_.drop_sensor->arm();
    if (auto s = hal_.motor->start(d.slot); !s.ok()) {
      log_.error(kLog, "motor start failed: " + s.error().to_string());
      finish(DispenseState::kFailed, "motor_error");
    }
  }
}

void DeviceCore::poll_motor() {
  if (!running_) return;
  if (pending_finish_) {
    // Retried every tick, or once the full ledger has room again.
    if (!storage_full_) finish(pending_finish_->first, pending_finish_->second);
    return;
  }
  MotorState state = hal_.motor->poll();
  if (state == MotorState::kRunning || state == MotorState::kIdle) {
    if (clock_.monotonic_ms() - motor_started_ms_ > options_.motor_timeout_ms) {
      finish(DispenseState::kFailed, proto::reason::kJam);
    }
    return;
  }
  if (state == MotorState::kJammed) {
    finish(DispenseState::kFailed, proto::reason::kJam);
  } else if (hal_.drop_sensor->dropped()) {
    finish(DispenseState::kDispensed, "");
  } else {
    finish(DispenseState::kFailed, proto::reason::kEmpty);
  }
}

void DeviceCore::finish(DispenseState state, const std::string& reason) {
  auto r = ledger_.finish_dispense(*running_, state, reason, clock_.wall_ms());
  if (!r.ok()) {
    // Keep the outcome and retry on the next tick; the motor is not re-run.
    if (!note_storage_error(r.error())) {
      log_.error(kLog, "cannot record outcome of " + *running_ + ": " + r.error().to_string());
    }
    pending_finish_ = std::make_pair(state, reason);
    return;
  }
  pending_finish_.reset();
  if (state == DispenseState::kDispensed) {
    ++stats_.dispensed;
  } else {
    ++stats_.failed;
    (void)ledger_.append_event(
        proto::Fault{reason, "order " + *running_ + " failed: " + reason, running_slot_},
        clock_.wall_ms());
  }
  log_.info(kLog, "order " + *running_ + " " + to_string(state) +
                      (reason.empty() ? "" : " (" + reason + ")"));
  running_.reset();
  outbox_dirty_ = true;
  start_next_dispense();
}

CommandOutcome DeviceCore::handle_restock(const proto::RestockCommand& c) {
  if (!has_slot(c.slot)) return refuse("restock", proto::reason::kUnknownSlot, c.restock_id);
  int64_t now = clock_.wall_ms();
  if (auto s = ledger_.record_pending_restock(c.restock_id, c.slot, c.count, now); !s.ok()) {
    return refuse("restock", "storage", s.error().to_string());
  }
  if (!options_.auto_confirm_restock || hal_.loader == nullptr) {
    log_.info(kLog, "restock " + c.restock_id + " waits for the operator");
    return CommandOutcome{"restock", "pending", ""};
  }
  auto slot = ledger_.slot(c.slot);
  if (!slot.ok() || !slot->has_value()) return refuse("restock", "storage", c.restock_id);
  int room = (*slot)->capacity - (*slot)->physical_count;
  int count = std::min(c.count, room);
  if (count <= 0) return CommandOutcome{"restock", "ignored", "slot full"};
  auto minted = ledger_.confirm_restock(c.restock_id, c.slot, count, now, random_);
  if (!minted.ok()) {
    if (minted.error().code == "already_confirmed") {
      return CommandOutcome{"restock", "duplicate", ""};
    }
    return refuse("restock", "storage", minted.error().to_string());
  }
  hal_.loader->load_items(c.slot, count);
  outbox_dirty_ = true;
  return CommandOutcome{"restock", "done", std::to_string(count)};
}

}  // namespace vend::fw
