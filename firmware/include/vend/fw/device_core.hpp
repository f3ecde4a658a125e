// DeviceCore: the firmware's functional core. Single-threaded, no Paho, no
// threads, no sleeping: it takes inputs (a command payload, a connection
// change, a tick) and acts through injected interfaces — the ledger, the HAL,
// a Transport to publish on, a Clock and a Random. The daemon
// (vend-firmware) and the simulator both drive it.
//
// Promise kept here: the motor moves only for a command signed with this
// device's key that names this device, a configured slot, and a token of that
// slot that is available, before expires_at_ms (+ skew); the token is
// consumed in the transaction that records ACCEPTED, before the motor moves;
// an order is never dispensed twice; every result is in the outbox before it
// is published, and stays there until the cloud's ack covers it.
//
// Not thread-safe. Non-copyable.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vend/clock.hpp"
#include "vend/fw/config.hpp"
#include "vend/fw/hal.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/log.hpp"
#include "vend/log_limiter.hpp"
#include "vend/random.hpp"
#include "vend/transport.hpp"

namespace vend::fw {

// What one command did; for logs, tests and the simulator's trace.
struct CommandOutcome {
  std::string type;    // "dispense", "restock", "snapshot_request", "ack", or "" if undecodable
  std::string result;  // "accepted", "duplicate", "rejected", "ignored", "done"
  std::string reason;  // rejection reason (proto::reason) or detail
};

struct CoreStats {
  int64_t dispensed = 0;
  int64_t failed = 0;
  int64_t rejected = 0;  // authenticated rejections, reported
  int64_t refused = 0;   // unauthenticated commands (bad_mac, wrong_device, malformed)
  int64_t duplicates = 0;
  int64_t events_published = 0;
};

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

  // A payload from this device's cmd topic.
  CommandOutcome on_command(std::string_view payload);

  // Advances the motor, the dispense queue, the outbox and periodic
  // snapshots. Call every few tens of milliseconds (or every simulation step).
  void tick();

  // True while the ledger's storage is full: new dispenses are refused
  // (reason "storage_full", not recorded: the cloud re-sends), outcomes of
  // work under way wait in memory, and every few seconds a `storage_full`
  // fault is tried; once it is written the core is back to normal.
  bool storage_full() const { return storage_full_; }
  // True when no dispense is queued or running.
  bool idle() const { return !running_ && queue_.empty(); }
  size_t queued() const { return queue_.size(); }
  const CoreStats& stats() const { return stats_; }
  const Identity& identity() const { return ledger_.identity(); }

 private:
  CommandOutcome handle_dispense(const proto::DispenseCommand& command);
  CommandOutcome handle_restock(const proto::RestockCommand& command);
  CommandOutcome handle_snapshot(const proto::SnapshotRequest& request);
  CommandOutcome handle_ack(const proto::Ack& ack);
  // The cloud saw a seq gap. Held events are published again from
  // from_seq; if from_seq was acknowledged (and deleted) already, an
  // events_unavailable event names the oldest held seq (once per acked seq,
  // so a replayed command cannot fill the outbox) and the outbox is
  // published again from there.
  CommandOutcome handle_resend(const proto::ResendRequest& request);
  // Publishes the retained `online` status again, at most once a second.
  CommandOutcome handle_status_request();
  // The oldest event seq the outbox holds, or the next seq when it is empty.
  Result<uint64_t> oldest_held_seq();
  CommandOutcome refuse(const std::string& type, const std::string& reason,
                        const std::string& detail);
  CommandOutcome reject(const proto::DispenseCommand& command, const std::string& reason);
  CommandOutcome repeat_result(const DispenseRow& dispense);
  bool outbox_full();
  void report_refusals();
  void maybe_republish_presence();
  std::optional<std::string> check_dispense(const proto::DispenseCommand& command);
  void start_next_dispense();
  void poll_motor();
  void finish(DispenseState state, const std::string& reason);
  void drain_outbox();
  void maybe_periodic_snapshot();
  void check_outbox_pressure();
  bool has_slot(int slot) const;
  // Enters the storage-full state for an SQLITE_FULL error (logged once);
  // false for any other error.
  bool note_storage_error(const Error& error);
  void check_storage();
  Status recover_interrupted();

  Ledger& ledger_;
  Hal hal_;
  Transport& transport_;
  const Clock& clock_;
  Random& random_;
  Logger& log_;
  CoreOptions options_;
  std::vector<int> slots_;

  std::deque<std::string> queue_;       // accepted order ids waiting for the motor
  std::optional<std::string> running_;  // order id whose rotation is under way
  int running_slot_ = 0;
  int64_t motor_started_ms_ = 0;
  // An outcome the ledger could not record yet (storage error): retried.
  std::optional<std::pair<DispenseState, std::string>> pending_finish_;

  bool connected_ = false;
  int64_t drain_after_ms_ = 0;  // jittered start after a reconnect
  // Only this core acknowledges (other processes sharing the ledger only add
  // events), so the acked seq is kept here instead of read every tick.
  uint64_t acked_ = 0;
  uint64_t sent_upto_ = 0;  // highest seq published this session
  // acked_ when the last events_unavailable was written (0 = none yet).
  std::optional<uint64_t> unavailable_reported_at_;
  int64_t last_send_ms_ = 0;
  double send_budget_ = 0;  // token bucket for the drain rate
  int64_t budget_ms_ = 0;
  bool outbox_dirty_ = true;  // rows may be waiting to publish
  int64_t last_scan_ms_ = 0;
  int64_t last_snapshot_ms_ = 0;
  int64_t last_presence_ms_ = 0;
  int64_t status_answered_ms_ = -1;  // the last status_request answered (monotonic)
  int64_t last_pressure_check_ms_ = 0;
  bool outbox_alarm_ = false;
  int64_t refused_unreported_ = 0;
  std::string last_refusal_;
  int64_t last_refusal_report_ms_ = 0;
  // Refused commands: one line per (type, reason) a minute, with the count.
  static constexpr int64_t kRefusalLogIntervalMs = 60'000;
  RateLimitedLog refusal_log_;
  bool storage_full_ = false;
  int64_t storage_full_since_ms_ = 0;  // wall
  int64_t next_storage_probe_ms_ = 0;
  int64_t refused_while_full_ = 0;
  bool recovery_pending_ = false;  // crash recovery could not be written at boot
  CoreStats stats_;
};

}  // namespace vend::fw
