// Deadlines: the agent core's timers (reservation expiry, dispatch
// deadlines, command resends, periodic reconcile requests) on one
// TimingWheel. Memory only, no clock: time is passed in.
//
// Its own folder, not the order book's: the timers are not all orders'
// (a device's reconcile request is one), and the book need not know that
// timers exist. Each side holds numbers of the other, nothing more: an
// order record keeps its TimerSlots, a timer names its subject by a number
// the caller chose (an OrderBook place, a device's index).
//
// Flat: a timer is its wheel payload, which packs the kind, the subject and
// a sequence number; no map from timers to targets, no string per timer.
// The caller keeps each pending timer in a TimerSlot (one per purpose: an
// order's deadline, its resend); a fired timer acts only if it is still the
// one its slot holds (take()), so one cancelled or replaced after it fell
// due in the same advance() is ignored.
//
// Single-threaded (the core's thread). Not copyable.
#pragma once

#include <cstdint>
#include <vector>

#include "deadlines/timing_wheel.hpp"

namespace vend::agent {

enum class TimerKind : uint8_t {
  kReservation,       // RESERVED order's reserve_deadline_ms
  kDispatchDeadline,  // DISPATCHED order's expires_at + skew, then every recheck
  kResend,            // re-publish a dispense command (busy device, publish failure)
  kReconcile,         // ask a device for its periodic snapshot (subject: the device)
  kRestockResend,     // re-send a device's restocks after a failed publish (subject: the device)
};

// Where a caller keeps one pending timer. Empty: no timer pending.
struct TimerSlot {
  TimerId id;
  uint32_t seq = 0;  // 0 = empty
  bool pending() const { return seq != 0; }
};

// A timer that fell due: what advance() hands back.
struct FiredTimer {
  TimerKind kind = TimerKind::kReservation;
  uint32_t subject = 0;
  uint32_t seq = 0;
};

class Deadlines {
 public:
  // Monotonic ms (never the wall clock: a step of it would fire or hold
  // back every timer); tick_ms as TimingWheel's (REQUIRES: >= 1).
  explicit Deadlines(int64_t start_ms, int64_t tick_ms = 10);
  Deadlines(const Deadlines&) = delete;
  Deadlines& operator=(const Deadlines&) = delete;

  // A timer of `kind` for `subject` at at_ms, kept in `slot`; a timer
  // pending there is cancelled first (one per slot).
  void schedule(TimerSlot& slot, TimerKind kind, uint32_t subject, int64_t at_ms);
  // Cancels the slot's pending timer, if any; the slot is empty after.
  void cancel(TimerSlot& slot);
  // Moves time to now_ms: the timers due, in firing order (TimingWheel's).
  // The caller dispatches them, each after take(): scheduling and
  // cancelling meanwhile is fine.
  std::vector<FiredTimer> advance(int64_t now_ms);
  // True when `fired` is the timer `slot` holds; the slot is emptied. False
  // (nothing changes) when it was cancelled or replaced after it fell due.
  static bool take(TimerSlot& slot, const FiredTimer& fired);

  // Pending timers.
  size_t pending() const { return wheel_.size(); }

 private:
  static uint64_t pack(TimerKind kind, uint32_t seq, uint32_t subject);
  static FiredTimer unpack(uint64_t payload);

  TimingWheel wheel_;
  uint32_t next_seq_ = 1;  // 28 bits in the payload; never 0
  std::vector<FiredTimer> due_;
};

}  // namespace vend::agent
