// Dispenser: dispense commands, the dispense queue and the motor run. Owns
// the configured slots, the queue of ACCEPTED orders, the one rotation under
// way (order, slot, start time) and an outcome the ledger could not record
// yet, and crash recovery of a rotation cut by power loss.
//
// Promise kept here: the motor moves only for an ACCEPTED order whose token
// of that slot was consumed (in the transaction that recorded ACCEPTED) and
// whose command has not expired (one accepted before a boot only once the
// cloud has sent it again and its view of the ledger passed the fence); MOTOR_RUNNING is stored
// before it moves, so an order never rotates twice; its outcome is stored (with its dispense_result
// event) before the next rotation starts. For a command that named the ledger, MOTOR_RUNNING is
// stored with a dispense_started event and the motor waits until the cloud acknowledges it: the
// cloud has processed that seq before anything drops, so a restored older copy of the ledger
// (which lacks it) is caught by the command fence and never runs the order again. Unacknowledged
// when the command expires, the order ends REJECTED `expired`, its token back (the motor never
// moved). These are asserted (vend/assert.hpp; docs/firmware.md, "Assertions").
//
// REQUIRES: the command passed to on_dispense was authenticated (signed with
// this device's key, naming this device); boot() before anything else.
// Thread-safety: none (single-threaded core). Non-copyable.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vend/clock.hpp"
#include "vend/fw/config.hpp"
#include "vend/fw/core_types.hpp"
#include "vend/fw/event_sender.hpp"
#include "vend/fw/hal.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/fw/refusals.hpp"
#include "vend/fw/storage_guard.hpp"
#include "vend/log.hpp"

namespace vend::fw {

class Dispenser {
 public:
  // All references must outlive this object; hal.motor and hal.drop_sensor
  // must be set.
  Dispenser(Ledger& ledger, Hal hal, const Clock& clock, Logger& log, const CoreOptions& options,
            StorageGuard& storage, EventSender& sender, Refusals& refusals, CoreStats& stats);
  Dispenser(const Dispenser&) = delete;
  Dispenser& operator=(const Dispenser&) = delete;

  // Reads the slots, then crash recovery: a dispense left in MOTOR_RUNNING
  // becomes UNCERTAIN (reported, motor not re-run). A full ledger does not
  // fail it: recovery is retried by on_storage_room(). Queues the ACCEPTED
  // dispenses.
  Status boot();

  // The ledger's storage has room again: finishes a crash recovery that
  // could not be written at boot.
  void on_storage_room();

  // An authenticated dispense command (v2, or v1 if the core accepts it;
  // its expiry is a v2 command's hard bound, or a v1 one's plus
  // expiry_skew_ms, and that bound is what is stored): a repeat of a known order is
  // answered from the ledger; otherwise it is accepted (token consumed,
  // queued), rejected (recorded and reported) or refused (not recorded:
  // storage full, outbox full, storage error; the cloud re-sends; or the
  // command's view of the ledger shows the file lost part of it:
  // EventSender::fence_dispense, a new ledger started before anything runs).
  CommandOutcome on_dispense(const proto::DispenseCommand& command);

  // Polls the motor, records a finished rotation, starts the next one.
  void tick();

  bool has_slot(int slot) const;
  // True when no dispense is queued, held, waiting for its start's ack or
  // running.
  bool idle() const { return !running_ && !armed_ && queue_.empty() && held_.empty(); }
  size_t queued() const { return queue_.size(); }

 private:
  struct Running {
    std::string order_id;
    int slot = 0;
    int64_t started_ms = 0;  // monotonic
  };
  // MOTOR_RUNNING stored with its dispense_started event at `seq` of
  // `ledger_id`; the motor waits for the cloud's ack of it.
  struct Armed {
    std::string order_id;
    int slot = 0;
    std::string ledger_id;
    uint64_t seq = 0;
    int64_t expires_at_ms = 0;  // wall; the command's bound (bounded())
  };

  // The command with its expiry as the hard bound (v1: plus the skew).
  proto::DispenseCommand bounded(const proto::DispenseCommand& command) const;
  std::optional<std::string> check(const proto::DispenseCommand& command);
  CommandOutcome reject(const proto::DispenseCommand& command, const std::string& reason);
  CommandOutcome reject_busy(const proto::DispenseCommand& command);
  CommandOutcome repeat_result(const DispenseRow& dispense);
  // The command of an order held since the boot: queued when it passes the
  // ledger fence (EventSender::fence_dispense), else refused and still
  // held. nullopt when the order is not held.
  std::optional<CommandOutcome> release_held(const proto::DispenseCommand& command);
  void expire_held();
  CommandOutcome refuse_storage(const Error& error);
  void start_next();
  // MOTOR_RUNNING stored for `d` (ACCEPTED): its motor starts now, or is
  // armed until the cloud acknowledges its start. False: not stored.
  bool begin(const DispenseRow& d);
  // The armed order: its motor starts once its start is acknowledged; past
  // its expiry first, it ends REJECTED `expired` (never moved).
  void poll_armed();
  // Starts the motor. REQUIRES: nothing running, the order is MOTOR_RUNNING.
  void run_motor(const std::string& order_id, int slot);
  void poll_motor();
  void finish(DispenseState state, const std::string& reason);
  void count_finished(DispenseState state, const std::string& reason);
  Status recover_interrupted();
  // Debug-only checks (a ledger read each).
  bool token_consumed_in_slot(const std::string& token, int slot);
  bool stored_as(const std::string& order_id, DispenseState state);

  Ledger& ledger_;
  Hal hal_;
  const Clock& clock_;
  Logger& log_;
  const CoreOptions& options_;
  StorageGuard& storage_;
  EventSender& sender_;
  Refusals& refusals_;
  CoreStats& stats_;

  std::vector<int> slots_;
  std::deque<std::string> queue_;  // accepted order ids waiting for the motor
  // ACCEPTED at boot: waiting for the cloud's command again (release_held)
  // or their expiry (then rejected as expired, the token back).
  std::vector<std::string> held_;
  std::optional<Running> running_;
  std::optional<Armed> armed_;
  // Orders whose command named the ledger: their start is announced
  // (dispense_started) and acknowledged before the motor moves.
  std::vector<std::string> announced_;
  // An outcome the ledger could not record yet (storage error): retried.
  std::optional<std::pair<DispenseState, std::string>> pending_finish_;
  bool recovery_pending_ = false;  // crash recovery could not be written at boot
};

}  // namespace vend::fw
