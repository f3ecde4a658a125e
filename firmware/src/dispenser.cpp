// Dispense commands, the queue and the motor. The .hpp states the promise;
// the assertions below state it again at each step, on both sides of a motor
// run and of every token transition.
#include "vend/fw/dispenser.hpp"

#include <algorithm>

#include "ledger_internal.hpp"
#include "vend/assert.hpp"

namespace vend::fw {

namespace {
constexpr const char* kLog = "core";
}

Dispenser::Dispenser(Ledger& ledger, Hal hal, const Clock& clock, Logger& log,
                     const CoreOptions& options, StorageGuard& storage, EventSender& sender,
                     Refusals& refusals, CoreStats& stats)
    : ledger_(ledger),
      hal_(hal),
      clock_(clock),
      log_(log),
      options_(options),
      storage_(storage),
      sender_(sender),
      refusals_(refusals),
      stats_(stats) {}

Status Dispenser::boot() {
  auto rows = ledger_.slots();
  if (!rows.ok()) return rows.error();
  slots_.clear();
  for (const auto& r : *rows) slots_.push_back(r.slot);

  if (auto s = recover_interrupted(); !s.ok()) {
    // A full disk must not stop the boot (systemd would restart it forever):
    // the recovery is retried once there is room.
    if (!storage_.note_error(s.error())) return s;
    recovery_pending_ = true;
  }
  // Accepted before the boot: held until the cloud sends the command again
  // and it passes the ledger fence. This file may be an older copy (a
  // restored card) whose ACCEPTED order ran to its end in the file it
  // replaced; only the cloud's view of the ledger tells.
  auto accepted = ledger_.dispenses_in(DispenseState::kAccepted);
  if (!accepted.ok()) return accepted.error();
  for (const auto& d : *accepted) held_.push_back(d.order_id);
  return {};
}

std::optional<CommandOutcome> Dispenser::release_held(const proto::DispenseCommand& c) {
  auto it = std::find(held_.begin(), held_.end(), c.order_id);
  if (it == held_.end()) return std::nullopt;
  if (auto refused = sender_.fence_dispense(c)) return refused;  // held until it expires
  held_.erase(it);
  if (!c.ledger_id.empty()) announced_.push_back(c.order_id);
  queue_.push_back(c.order_id);
  log_.info(kLog, "order " + c.order_id + " accepted before the boot: released by the cloud");
  start_next();
  return CommandOutcome{"dispense", "accepted", "released"};
}

// Held orders whose command expired go to the queue, which rejects them as
// expired (the token back): the cloud did not confirm them in time.
void Dispenser::expire_held() {
  for (auto it = held_.begin(); it != held_.end();) {
    auto row = ledger_.find_dispense(*it);
    bool gone = row.ok() && (!row->has_value() || (*row)->state != DispenseState::kAccepted);
    bool expired = row.ok() && !gone && past_deadline(clock_.wall_ms(), (*row)->expires_at_ms, 0);
    if (!gone && !expired) {
      ++it;
      continue;
    }
    if (expired) queue_.push_back(*it);
    it = held_.erase(it);
  }
}

void Dispenser::on_storage_room() {
  if (!recovery_pending_) return;
  if (auto s = recover_interrupted(); s.ok()) {
    recovery_pending_ = false;
  } else if (!storage_.note_error(s.error())) {
    log_.error(kLog, "crash recovery failed: " + s.error().to_string());
  }
}

Status Dispenser::recover_interrupted() {
  auto running = ledger_.dispenses_in(DispenseState::kMotorRunning);
  if (!running.ok()) return running.error();
  for (const auto& d : *running) {
    // The motor may or may not have dropped the item: never re-run it; let
    // an operator look.
    auto r = ledger_.finish_dispense(d.order_id, DispenseState::kUncertain,
                                     proto::reason::kPowerLoss, clock_.wall_ms());
    if (!r.ok()) return r.error();
    VEND_ASSERT(r->token_consumed);  // an interrupted rotation's token is burned, never restored
    (void)ledger_.append_event(
        proto::Fault{"uncertain_dispense",
                     "order " + d.order_id + " was mid-rotation at power loss", d.slot},
        clock_.wall_ms());
    log_.warn(kLog, "order " + d.order_id + " interrupted mid-rotation: UNCERTAIN");
  }
  return {};
}

bool Dispenser::has_slot(int slot) const {
  return std::find(slots_.begin(), slots_.end(), slot) != slots_.end();
}

std::optional<std::string> Dispenser::check(const proto::DispenseCommand& c) {
  if (!has_slot(c.slot)) return std::string(proto::reason::kUnknownSlot);
  auto token = ledger_.find_token(c.token);
  if (!token.ok()) return std::nullopt;  // storage trouble: handled by the caller's write
  if (!token->has_value() || (*token)->second != c.slot) {
    return std::string(proto::reason::kUnknownToken);
  }
  if ((*token)->first != TokenState::kAvailable) return std::string(proto::reason::kTokenConsumed);
  if (past_deadline(clock_.wall_ms(), c.expires_at_ms, 0)) {  // c: bounded()
    return std::string(proto::reason::kExpired);
  }
  return std::nullopt;
}

CommandOutcome Dispenser::refuse_storage(const Error& error) {
  return refusals_.refuse("dispense", storage_.full() ? "storage_full" : "storage",
                          error.to_string());
}

proto::DispenseCommand Dispenser::bounded(const proto::DispenseCommand& c) const {
  proto::DispenseCommand out = c;
  if (c.v < 2) out.expires_at_ms = saturating_add(c.expires_at_ms, options_.expiry_skew_ms);
  return out;
}

CommandOutcome Dispenser::on_dispense(const proto::DispenseCommand& command) {
  // One bound from here on, checked and stored: a v2 command's own, a v1
  // one's plus this device's tolerance.
  const proto::DispenseCommand c = bounded(command);
  auto prior = ledger_.find_dispense(c.order_id);
  if (!prior.ok()) return refusals_.refuse("dispense", "storage", prior.error().to_string());
  if (prior->has_value()) {
    if (auto released = release_held(c)) return *released;
    return repeat_result(**prior);
  }
  if (auto refused = sender_.fence_dispense(c)) return *refused;
  if (storage_.full()) {
    storage_.count_refused();
    return refusals_.refuse(
        "dispense", "storage_full",
        "order " + c.order_id + ": the ledger's storage is full (the cloud re-sends)");
  }
  if (sender_.outbox_full())
    return refusals_.refuse("dispense", "outbox_full", "order " + c.order_id);

  if (auto reason = check(c)) return reject(c, *reason);
  if (queue_.size() + (running_ || armed_ ? 1 : 0) >=
      static_cast<size_t>(options_.dispense_queue_max)) {
    return reject_busy(c);
  }
  if (auto s = ledger_.accept_dispense(c, clock_.wall_ms()); !s.ok()) {
    if (storage_.note_error(s.error())) storage_.count_refused();
    return refuse_storage(s.error());
  }
  // AVAILABLE -> CONSUMED, once: a new order (no prior row) is never queued twice.
  VEND_DEBUG_ASSERT(std::find(queue_.begin(), queue_.end(), c.order_id) == queue_.end());
  VEND_DEBUG_ASSERT(token_consumed_in_slot(c.token, c.slot));
  if (!c.ledger_id.empty()) announced_.push_back(c.order_id);
  queue_.push_back(c.order_id);
  log_.info(kLog, "accepted order " + c.order_id + " slot " + std::to_string(c.slot));
  start_next();
  return CommandOutcome{"dispense", "accepted", ""};
}

CommandOutcome Dispenser::reject_busy(const proto::DispenseCommand& c) {
  // Transient: not recorded against the order, so a later retry can succeed.
  ++stats_.rejected;
  proto::DispenseResult busy{
      c.order_id, c.slot, c.token, proto::DispenseStatus::kRejected, proto::reason::kBusy, false};
  (void)ledger_.append_event(busy, clock_.wall_ms());
  sender_.mark_dirty();
  return CommandOutcome{"dispense", "rejected", proto::reason::kBusy};
}

CommandOutcome Dispenser::reject(const proto::DispenseCommand& c, const std::string& reason) {
  ++stats_.rejected;
  auto r = ledger_.record_rejection(c, reason, clock_.wall_ms());
  if (!r.ok()) {
    storage_.note_error(r.error());
    return refuse_storage(r.error());
  }
  VEND_ASSERT(!r->token_consumed);  // a rejection never touches the token
  sender_.mark_dirty();
  log_.warn(kLog, "rejected order " + c.order_id + ": " + reason);
  return CommandOutcome{"dispense", "rejected", reason};
}

CommandOutcome Dispenser::repeat_result(const DispenseRow& d) {
  ++stats_.duplicates;
  bool terminal = d.state != DispenseState::kAccepted && d.state != DispenseState::kMotorRunning;
  // Re-report a finished order so a cloud that lost the result hears it
  // again; never while the outbox is under pressure (replays must not fill it).
  if (terminal && !sender_.under_pressure()) {
    proto::DispenseResult again{d.order_id, d.slot,          d.token, detail::to_status(d.state),
                                d.reason,   d.token_consumed};
    (void)ledger_.append_event(again, clock_.wall_ms());
    sender_.mark_dirty();
  }
  return CommandOutcome{"dispense", "duplicate", to_string(d.state)};
}

void Dispenser::tick() {
  if (!held_.empty()) expire_held();
  poll_armed();
  poll_motor();
  start_next();
}

void Dispenser::start_next() {
  // With a full ledger nothing new starts: MOTOR_RUNNING could not be written.
  while (!running_ && !armed_ && !queue_.empty() && !storage_.full()) {
    std::string order_id = queue_.front();
    queue_.pop_front();
    auto row = ledger_.find_dispense(order_id);
    if (!row.ok() || !row->has_value() || (*row)->state != DispenseState::kAccepted) continue;
    const DispenseRow& d = **row;
    // The stored expiry is the hard bound (bounded()). A row accepted by
    // firmware before it, without the skew added, expires up to the skew
    // early: the token goes back, never a late run.
    if (past_deadline(clock_.wall_ms(), d.expires_at_ms, 0)) {
      // Expired while waiting: the motor never moved, the token goes back
      // (CONSUMED -> AVAILABLE).
      auto r = ledger_.finish_dispense(order_id, DispenseState::kRejected, proto::reason::kExpired,
                                       clock_.wall_ms());
      VEND_ASSERT(!r.ok() || !r->token_consumed);
      sender_.mark_dirty();
      continue;
    }
    if (!begin(d)) {
      queue_.push_front(order_id);
      return;
    }
  }
}

bool Dispenser::begin(const DispenseRow& d) {
  VEND_ASSERT(d.state == DispenseState::kAccepted && d.token_consumed && has_slot(d.slot));
  auto announced = std::find(announced_.begin(), announced_.end(), d.order_id);
  const bool announce = announced != announced_.end();
  // Persist MOTOR_RUNNING before the motor moves: a crash from here on is
  // reported UNCERTAIN at boot, never re-run.
  Status stored;
  uint64_t seq = 0;
  if (announce) {
    auto r = ledger_.mark_motor_running_announced(d, clock_.wall_ms());
    if (r.ok()) seq = *r;
    stored = r.ok() ? Status{} : Status{r.error()};
  } else {
    stored = ledger_.mark_motor_running(d.order_id, clock_.wall_ms());
  }
  if (!stored.ok()) {
    if (!storage_.note_error(stored.error())) {
      log_.error(kLog, "cannot mark " + d.order_id + " running: " + stored.error().to_string());
    }
    return false;
  }
  if (!announce) {
    run_motor(d.order_id, d.slot);
    return true;
  }
  announced_.erase(announced);
  armed_ = Armed{d.order_id, d.slot, ledger_.identity().ledger_id, seq, d.expires_at_ms};
  sender_.mark_dirty();
  return true;
}

void Dispenser::poll_armed() {
  if (!armed_ || running_) return;
  if (past_deadline(clock_.wall_ms(), armed_->expires_at_ms, 0)) {
    // The cloud never acknowledged the start in time: the motor never
    // moved, the token goes back (MOTOR_RUNNING -> REJECTED).
    auto r = ledger_.finish_dispense(armed_->order_id, DispenseState::kRejected,
                                     proto::reason::kExpired, clock_.wall_ms());
    if (!r.ok()) {
      storage_.note_error(r.error());  // retried on the next tick
      return;
    }
    VEND_ASSERT(!r->token_consumed);
    ++stats_.rejected;
    log_.warn(kLog, "order " + armed_->order_id + ": its start was not acknowledged before " +
                        "the command expired: REJECTED");
    armed_.reset();
    sender_.mark_dirty();
    return;
  }
  if (!sender_.acked_through(armed_->ledger_id, armed_->seq)) return;
  Armed a = *armed_;
  armed_.reset();
  run_motor(a.order_id, a.slot);
}

void Dispenser::run_motor(const std::string& order_id, int slot) {
  // Before the motor moves: one rotation at a time, for a consumed token of
  // this (configured) slot, its MOTOR_RUNNING stored.
  VEND_ASSERT(!running_ && !armed_ && !pending_finish_);
  VEND_ASSERT(has_slot(slot));
  VEND_DEBUG_ASSERT(stored_as(order_id, DispenseState::kMotorRunning));
  running_ = Running{order_id, slot, clock_.monotonic_ms()};
  hal_.drop_sensor->arm();
  if (auto s = hal_.motor->start(slot); !s.ok()) {
    log_.error(kLog, "motor start failed: " + s.error().to_string());
    finish(DispenseState::kFailed, "motor_error");
  }
}

void Dispenser::poll_motor() {
  if (!running_) return;
  if (pending_finish_) {
    // Retried every tick, or once the full ledger has room again.
    if (!storage_.full()) finish(pending_finish_->first, pending_finish_->second);
    return;
  }
  MotorState state = hal_.motor->poll();
  if (state == MotorState::kRunning || state == MotorState::kIdle) {
    if (clock_.monotonic_ms() - running_->started_ms > options_.motor_timeout_ms) {
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

void Dispenser::finish(DispenseState state, const std::string& reason) {
  // After a motor run: it ends DISPENSED or FAILED, never REJECTED (the
  // token of a rotated order is never for sale again).
  VEND_ASSERT(running_);
  VEND_ASSERT(state == DispenseState::kDispensed || state == DispenseState::kFailed);
  auto r = ledger_.finish_dispense(running_->order_id, state, reason, clock_.wall_ms());
  if (!r.ok()) {
    // Keep the outcome and retry on the next tick; the motor is not re-run.
    if (!storage_.note_error(r.error())) {
      log_.error(kLog,
                 "cannot record outcome of " + running_->order_id + ": " + r.error().to_string());
    }
    pending_finish_ = std::make_pair(state, reason);
    return;
  }
  // The result is stored (with its event) before anything reports it.
  VEND_ASSERT(r->order_id == running_->order_id && r->slot == running_->slot && r->token_consumed);
  VEND_DEBUG_ASSERT(stored_as(running_->order_id, state));
  pending_finish_.reset();
  count_finished(state, reason);
  running_.reset();
  sender_.mark_dirty();
  start_next();
}

void Dispenser::count_finished(DispenseState state, const std::string& reason) {
  if (state == DispenseState::kDispensed) {
    ++stats_.dispensed;
  } else {
    ++stats_.failed;
    (void)ledger_.append_event(
        proto::Fault{reason, "order " + running_->order_id + " failed: " + reason, running_->slot},
        clock_.wall_ms());
  }
  log_.info(kLog, "order " + running_->order_id + " " + to_string(state) +
                      (reason.empty() ? "" : " (" + reason + ")"));
}

bool Dispenser::token_consumed_in_slot(const std::string& token, int slot) {
  auto found = ledger_.find_token(token);
  if (!found.ok()) return true;  // a read error is not a broken invariant
  return found->has_value() && (*found)->first == TokenState::kConsumed && (*found)->second == slot;
}

bool Dispenser::stored_as(const std::string& order_id, DispenseState state) {
  auto found = ledger_.find_dispense(order_id);
  if (!found.ok()) return true;  // a read error is not a broken invariant
  return found->has_value() && (*found)->state == state;
}

}  // namespace vend::fw
