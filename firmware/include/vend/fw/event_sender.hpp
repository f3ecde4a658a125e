// EventSender: moves the ledger's outbox to the cloud. Owns the connection
// flag, the jittered start after a reconnect, the drain's token bucket
// (options.outbox_drain_per_s) and window (options.outbox_window unacked
// events in flight), retransmission after options.retransmit_ms without an
// ack, the acked and sent seqs, acks and resend requests, and the outbox's
// pressure alarm (an `outbox_near_full` fault at 80 % of outbox_max, cleared
// at 60 %).
//
// Promise kept here: only rows read from the outbox are published (a result
// is stored before it is reported), in seq order within a pass, and a row
// stays in the outbox until an ack covers it -- an ack for the events this
// ledger holds: one that says the cloud processed events this file does not
// hold (its ledger went back in time) makes it a new ledger instead
// (Ledger::start_new_ledger), a fresh random id with seqs from 1.
//
// REQUIRES: boot() before anything else; only this object acknowledges
// events in the ledger (other processes sharing it only add events).
// Thread-safety: none (single-threaded core). Non-copyable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "vend/clock.hpp"
#include "vend/fw/config.hpp"
#include "vend/fw/core_types.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/fw/refusals.hpp"
#include "vend/log.hpp"
#include "vend/random.hpp"
#include "vend/transport.hpp"

namespace vend::fw {

class EventSender {
 public:
  // All references must outlive this object.
  EventSender(Ledger& ledger, Transport& transport, const Clock& clock, Random& random, Logger& log,
              const CoreOptions& options, Refusals& refusals, CoreStats& stats);
  EventSender(const EventSender&) = delete;
  EventSender& operator=(const EventSender&) = delete;

  // Reads the acked seq from the ledger.
  Status boot();

  // The transport's connection changed. On connect, everything not yet
  // acknowledged is sent again, starting after a delay in
  // [0, options.reconnect_jitter_max_ms] derived from the device id (a
  // fleet reconnecting at once spreads out; one device always waits the
  // same). Returns that delay (0 on disconnect).
  int64_t on_connection(bool connected);
  bool connected() const { return connected_; }

  // Rows may be waiting: scan the outbox on the next drain instead of
  // waiting for the periodic scan (which notices other processes' rows).
  void mark_dirty() { dirty_ = true; }

  // An ack for this ledger: drops the events up to ack.upto_seq. One the
  // ledger answers `ledger_regressed` (beyond its last seq, or another
  // event at upto_seq than ack.upto_mac) starts a new ledger: its held
  // events and a `ledger_regressed` fault go out under the new id from
  // seq 1 (outcome "new_ledger").
  CommandOutcome on_ack(const proto::Ack& ack);
  // Before a dispense runs: the command's view of this device's ledger
  // (DispenseCommand::ledger_id, ledger_seq, ledger_mac) against the file.
  // nullopt when the command names none, or this ledger with a seq the file
  // holds (the same event, when the file still holds it unacknowledged and
  // the command names its mac). One naming this ledger beyond its last seq
  // or another event at that seq, or a ledger this file never
  // was, means the file lost what the cloud knows (the order may have run
  // in the lost part): a new ledger is started, as for a regressed ack, and
  // the command refused (reason `ledger_regressed`). One naming a ledger
  // this file left is refused (`other_ledger`): the cloud has not yet seen
  // the new one. Every refusal is counted (Refusals).
  std::optional<CommandOutcome> fence_dispense(const proto::DispenseCommand& command);
  // True when the cloud acknowledged `ledger_id`'s events up to `seq`
  // (false once this file has moved to another ledger).
  bool acked_through(const std::string& ledger_id, uint64_t seq) const {
    return ledger_.identity().ledger_id == ledger_id && acked_ >= seq;
  }
  // The cloud saw a seq gap. Held events are published again from
  // from_seq; if from_seq was acknowledged (and deleted) already, an
  // events_unavailable event names the oldest held seq (once per acked seq,
  // so a replayed command cannot fill the outbox) and the outbox is
  // published again from there.
  CommandOutcome on_resend(const proto::ResendRequest& request);

  // True when the outbox holds options.outbox_max rows (or cannot be read):
  // new work is refused.
  bool outbox_full();
  // True between the high and low marks: snapshots, refusal reports and
  // re-reported results give way.
  bool under_pressure() const { return alarm_; }
  // Once a second: raises or clears the pressure alarm.
  void check_pressure();

  // Publishes what the window, the rate and the connection allow.
  void drain();

 private:
  // After a `ledger_regressed` ack or dispense (`trigger` names it, for the
  // log): a new ledger, and sending from its seq 1. Returns its id.
  Result<std::string> start_new_ledger(const std::string& trigger, const Error& regressed);
  // The oldest event seq the outbox holds, or the next seq when it is empty.
  Result<uint64_t> oldest_held_seq();
  void maybe_retransmit(int64_t now);
  // The number of rows this drain may publish.
  int send_limit(int64_t now);

  Ledger& ledger_;
  Transport& transport_;
  const Clock& clock_;
  Random& random_;
  Logger& log_;
  const CoreOptions& options_;
  Refusals& refusals_;
  CoreStats& stats_;

  bool connected_ = false;
  int64_t drain_after_ms_ = 0;  // jittered start after a reconnect
  // Only this object acknowledges, so the acked seq is kept here instead of
  // read every tick. Invariant: acked_ <= sent_upto_.
  uint64_t acked_ = 0;
  uint64_t sent_upto_ = 0;  // highest seq published this session
  // acked_ when the last events_unavailable was written (none yet: nullopt).
  std::optional<uint64_t> unavailable_reported_at_;
  int64_t last_send_ms_ = 0;
  double send_budget_ = 0;  // token bucket for the drain rate
  int64_t budget_ms_ = 0;
  bool dirty_ = true;  // rows may be waiting to publish
  int64_t last_scan_ms_ = 0;
  int64_t last_pressure_check_ms_ = 0;
  bool alarm_ = false;
};

}  // namespace vend::fw
