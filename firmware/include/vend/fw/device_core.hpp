// DeviceCore: the firmware's functional core, a small facade. Single-threaded,
// no Paho, no threads, no sleeping: it takes inputs (a command payload, a
// connection change, a tick) on an injected clock and acts through injected
// interfaces — the ledger, the HAL, a Transport to publish on, a Clock and a
// Random. The daemon (vend-firmware) and the simulator both drive it.
//
// It authenticates commands and routes them to its parts, each with one
// responsibility and its own contract:
//   Dispenser     dispense commands, the dispense queue, the motor run,
//                 crash recovery (dispenser.hpp)
//   EventSender   outbox pacing, acks, resends, outbox pressure
//                 (event_sender.hpp)
//   StorageGuard  the degraded mode of a full ledger disk (storage_guard.hpp)
//   Refusals      counting, logging and reporting refused commands
//                 (refusals.hpp)
// and keeps presence, restocks and snapshots itself.
//
// Promise kept here: the motor moves only for a command signed with this
// device's key that names this device, a configured slot, and a token of that
// slot that is available, before its expiry (a v2 command's expires_at_ms, a
// v1 one's plus the skew); no command is acted on after its expiry (v2: every
// type has one; v1 commands only with core.accept_v1_commands); the token is
// consumed in the transaction that records ACCEPTED, before the motor moves;
// an order is never dispensed twice; every result is in the outbox before it
// is published, and stays there until the cloud's ack covers it.
//
// Thread-safety: none (single-threaded core). Non-copyable.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "vend/clock.hpp"
#include "vend/fw/config.hpp"
#include "vend/fw/core_types.hpp"
#include "vend/fw/dispenser.hpp"
#include "vend/fw/event_sender.hpp"
#include "vend/fw/hal.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/fw/refusals.hpp"
#include "vend/fw/storage_guard.hpp"
#include "vend/log.hpp"
#include "vend/random.hpp"
#include "vend/transport.hpp"

namespace vend::fw {

class DeviceCore {
 public:
  // All references must outlive the core.
  DeviceCore(Ledger& ledger, Hal hal, Transport& transport, const Clock& clock, Random& random,
             Logger& log, CoreOptions options);
  DeviceCore(const DeviceCore&) = delete;
  DeviceCore& operator=(const DeviceCore&) = delete;

  // Crash recovery, once, before anything else: a dispense left in
  // MOTOR_RUNNING becomes UNCERTAIN (reported, motor not re-run); one
  // ACCEPTED whose command has expired is rejected and its token restored.
  // A full ledger does not fail the boot: the core starts degraded (below)
  // and recovers once there is room.
  Status boot();

  // The retained presence message (online or offline) for this boot; the
  // offline one is the transport's last will.
  static Message presence(const Identity& identity, bool online, int64_t now_ms);

  // The transport's connection changed. On connect: publish `online`
  // (retained), subscribe to this device's cmd topic, and start draining the
  // outbox after a jittered delay derived from the device id.
  void on_connection(bool connected);

  // A payload from this device's cmd topic: decoded, checked for this
  // device, its signature and its freshness (check_fresh), then routed.
  CommandOutcome on_command(std::string_view payload);

  // Advances the motor, the dispense queue, the outbox and periodic
  // snapshots. Call every few tens of milliseconds (or every simulation step).
  void tick();

  // True while the ledger's storage is full: new dispenses are refused
  // (reason "storage_full", not recorded: the cloud re-sends), outcomes of
  // work under way wait in memory, and every few seconds a `storage_full`
  // fault is tried; once it is written the core is back to normal.
  bool storage_full() const { return storage_.full(); }
  // Takes the `update` commands that pass authentication and freshness
  // (the daemon's update shell, firmware/update_shell/). Without one they
  // are refused, reason "unsupported".
  using UpdateHandler = std::function<CommandOutcome(const proto::UpdateCommand&)>;
  void set_update_handler(UpdateHandler handler) { update_handler_ = std::move(handler); }

  // Appends an event of a part outside the core (an update_status) to the
  // outbox, durable when this returns ok, and schedules its publish.
  Status report_event(const proto::EventBody& body);

  // True when no dispense is queued or running.
  bool idle() const { return dispenser_.idle(); }
  size_t queued() const { return dispenser_.queued(); }
  const CoreStats& stats() const { return stats_; }
  const Identity& identity() const { return ledger_.identity(); }

 private:
  // Refused when v1 (unless accepted) or, v2 and not a dispense, expired.
  std::optional<CommandOutcome> check_fresh(const proto::Command& command, const std::string& type);
  CommandOutcome route(const proto::Command& command);
  CommandOutcome handle_restock(const proto::RestockCommand& command);
  CommandOutcome handle_snapshot(const proto::SnapshotRequest& request);
  // Publishes the retained `online` status again, at most once a second.
  CommandOutcome handle_status_request();
  void check_storage();
  void maybe_republish_presence();
  void maybe_periodic_snapshot();

  Ledger& ledger_;
  Hal hal_;
  Transport& transport_;
  const Clock& clock_;
  Random& random_;
  Logger& log_;
  CoreOptions options_;
  CoreStats stats_;
  // The parts, in dependency order (each refers to those above it).
  Refusals refusals_;
  StorageGuard storage_;
  EventSender sender_;
  Dispenser dispenser_;

  int64_t last_snapshot_ms_ = 0;
  int64_t last_presence_ms_ = 0;
  int64_t status_answered_ms_ = -1;  // the last status_request answered (monotonic)
  // Snapshot requests answered whose command has not expired yet (request
  // id, expires_at_ms; at most kRecentRequests): a replay within its
  // lifetime is answered `duplicate`, so it cannot fill the outbox either.
  static constexpr size_t kRecentRequests = 64;
  std::deque<std::pair<std::string, int64_t>> recent_requests_;
  UpdateHandler update_handler_;
};

}  // namespace vend::fw
