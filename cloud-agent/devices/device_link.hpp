// Per-device pieces of the agent's link with a machine: its keys (with a
// rotation in progress), the seqs of its event stream and the cumulative
// acks they earn, and its clock skew. Each device record holds one of each;
// the core routes messages to them and carries out what they decide
// (writes, commands, alerts). Memory only, no clock reads: times are passed
// in. Single-threaded (the core's thread).
#pragma once

#include <cstdint>
#include <deque>
#include <future>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "vend/crypto.hpp"
#include "vend/result.hpp"

namespace vend::agent {

// A device's keys: the one it signs with, and the one issued by a rotation,
// accepted beside it until the device first signs with it.
class DeviceKeys {
 public:
  DeviceKeys() = default;  // no key yet: give it one before verifying
  explicit DeviceKeys(crypto::Key current) : current_(std::move(current)) {}

  enum class Signed { kNo, kCurrent, kNext };
  // Which key `mac` is the signature of `canonical` under.
  Signed verify(std::string_view canonical, std::string_view mac) const;
  const crypto::Key& current() const { return current_; }
  const std::optional<crypto::Key>& next() const { return next_; }
  // A rotation: `key` is accepted beside the current one.
  void issue_next(crypto::Key key) { next_ = std::move(key); }
  // The device signs with the next key: it replaces the current one.
  // REQUIRES: next() is set.
  void promote();
  // The rotation is called off (decommissioning).
  void drop_next() { next_.reset(); }

 private:
  crypto::Key current_;
  std::optional<crypto::Key> next_;
};

// The seqs of a device's current ledger and the acks they earn. An event is
// processed in memory first (last_processed), its write committed later
// (committed: all an ack may cover, so the device never deletes an event
// the log does not hold). Acks are batched: one per ack interval at most.
// Each ack carries the mac of the event at its seq as processed here (""
// when unknown: a seq skipped over a gap), so a device whose ledger went
// back in time deletes nothing it holds under that seq.
class AckWindow {
 public:
  using Ticket = std::shared_future<Status>;  // a write's commit (Repository's Ticket)

  enum class Place { kDuplicate, kNext, kAhead };
  // Where an event of `seq` falls: already processed, next, or beyond a gap.
  Place place(uint64_t seq) const;
  uint64_t last_processed() const { return last_processed_; }
  // The mac of the event at last_processed() ("" = unknown).
  const std::string& last_mac() const { return last_mac_; }
  uint64_t committed() const { return committed_; }
  // Processed events whose commit is not observed yet.
  uint64_t unacked() const { return last_processed_ - committed_; }

  // Start-up: everything up to `seq` (its event's mac `mac`) is durable.
  void restore(uint64_t seq, std::string mac = "");
  // Events up to `seq` are processed (one event, or a skip over a gap the
  // device confirmed), their write committing under `ticket`; `mac`: the
  // event at `seq`'s ("" for a skip).
  void processed(uint64_t seq, Ticket ticket, std::string mac = "");
  // A new ledger: seqs start again from 1; the switch commits under `ticket`
  // (an ack waits for it). A pending re-ack is moot; so is a divergence.
  void restart(Ticket ticket);

  // The device sent another event under a processed seq: its ledger went
  // back in time. Nothing more of this ledger is processed (restart() ends it).
  void diverge() { diverged_ = true; }
  bool diverged() const { return diverged_; }

  // A duplicate arrived: its ack may have been lost, so re-ack even without
  // progress.
  void want_ack() { ack_wanted_ = true; }
  // The ack goes out `interval_ms` after now unless one is already due;
  // true when this scheduled it (the caller lists the device as due).
  bool schedule(int64_t now_ms, int64_t interval_ms);
  // The ack covering `seq` goes out as soon as its write commits, not
  // batched (a dispense_started: the device's motor waits for it); true
  // when this scheduled an ack (the caller lists the device as due).
  bool expedite(uint64_t seq, int64_t now_ms);
  // An ack is scheduled at or before now.
  bool due(int64_t now_ms) const { return due_ms_ != 0 && now_ms >= due_ms_; }
  // The newest write an ack would wait for (none when all are observed).
  std::optional<Ticket> newest_ticket() const;

  struct Flushed {
    Status status;                     // a failed event write (nothing is acked)
    std::optional<uint64_t> ack_upto;  // the ack to send, if any
    std::string ack_mac;               // the mac of the event at ack_upto ("" = unknown)
    bool still_due = false;            // writes still committing: flush again later
  };
  // Takes the committed writes in order; an ack covers them when there is
  // progress or a re-ack is wanted. Writes still committing keep the ack
  // due `interval_ms` from now (now, while an expedited seq is among them). REQUIRES: due(now_ms)
  // or the caller's tick says the device is due.
  Flushed flush(int64_t now_ms, int64_t interval_ms);

 private:
  struct Pending {
    uint64_t seq = 0;
    Ticket ticket;
    std::string mac;
  };
  uint64_t last_processed_ = 0;
  std::string last_mac_;
  uint64_t committed_ = 0;
  std::string committed_mac_;
  bool diverged_ = false;
  std::deque<Pending> pending_;
  bool ack_wanted_ = false;
  int64_t due_ms_ = 0;      // monotonic; 0 = no ack scheduled
  uint64_t expedited_ = 0;  // acks up to this seq are not batched
};

// A device's clock skew (its wall clock minus the agent's) from its verified
// messages. A message stamped `ts` by the device and received at agent wall
// time `wall` gives the sample ts - wall = skew - delay, with a delay that is
// never negative and unknown: an event re-sent from the outbox, a message
// queued in the agent's broker session while it was away, a slow broker or
// a busy agent only make samples smaller. So every sample is a lower bound
// of the skew:
//  - the estimate (skew_ms) is the largest sample of the window;
//  - "ahead by more than T" is proven by that lower bound alone;
//  - "behind by more than T" needs an upper bound, which only a round trip
//    gives: a device answers the agent's status_request, sent at agent wall
//    time t0, with a status it stamps when it answers, so its ts >= t0 +
//    skew and skew <= ts - t0. Statuses carry no request id, so every status
//    received within kReplyWindowMs of the request counts and the largest ts
//    is taken: an older status delivered meanwhile (queued while the agent
//    was away) has a smaller ts and cannot lower the bound while the answer
//    arrives in the window. A backlog therefore never raises the alert;
//    the caller asks for a round trip (wants_round_trip) when the lower
//    bound alone says "behind", and opens one (asked) only for a device that
//    is online, so an answer is due. What is assumed: that answer arrives
//    within the window (a device answers at once); a device that stays
//    silent while an old status of it arrives in the window would give a
//    bound too low.
// A round trip is closed, and its bound kept, at the first observe() after
// its window; the bound is dropped when a later sample exceeds it (the
// device's clock was corrected) or when it leaves the window.
class ClockSkew {
 public:
  static constexpr size_t kMaxSamples = 32;
  static constexpr int64_t kReplyWindowMs = 2000;

  // A sample taken at monotonic `now_ms`; samples older than `window_ms`
  // (but the newest) and beyond kMaxSamples are dropped. `status`: a live
  // status of the device's session, stamped when published (a round trip's
  // answer when one is open). True when the estimate changed.
  bool observe(int64_t now_ms, int64_t device_ts_ms, int64_t wall_ms, int64_t window_ms,
               bool status = false);
  // A status_request went out to the online device at monotonic `now_ms`,
  // agent wall time `wall_ms`: a round trip opens (unless one is open).
  void asked(int64_t now_ms, int64_t wall_ms);
  // Device clock minus agent clock (ms), the largest recent sample; nullopt
  // before the first sample.
  std::optional<int64_t> skew_ms() const { return skew_; }
  // The upper bound of the last round trip with an answer; nullopt if none
  // holds.
  std::optional<int64_t> upper_bound_ms() const { return upper_; }
  // True when the lower bound says "behind by more than alert_ms" and no
  // round trip is open or holds a bound: ask the device for its status.
  bool wants_round_trip(int64_t now_ms, int64_t alert_ms) const;

  enum class Alert { kRaise, kClear, kKeep };
  // Raise when the estimate is above `alert_ms` or the round trip's bound
  // below -alert_ms; clear when the estimate is within 80 % of it either way
  // (hysteresis, so a skew near the threshold does not flap); kKeep
  // otherwise, before any sample, or with the alert off (alert_ms <= 0).
  Alert judge(int64_t alert_ms) const;

 private:
  // The open round trip, once its window has passed: its bound kept if a
  // status came.
  void close_round_trip(int64_t now_ms);

  std::deque<std::pair<int64_t, int64_t>> samples_;  // (monotonic ms, sample), newest last
  std::optional<int64_t> skew_;
  // The open round trip: when asked (monotonic, wall), the largest ts of the
  // statuses received since.
  std::optional<int64_t> asked_mono_ms_;
  int64_t asked_wall_ms_ = 0;
  std::optional<int64_t> reply_ts_ms_;
  std::optional<int64_t> upper_;  // skew <= upper_, found by the round trip asked at upper_at_
  int64_t upper_at_ms_ = 0;       // monotonic
};

}  // namespace vend::agent
