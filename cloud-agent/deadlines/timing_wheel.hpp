// TimingWheel: a hierarchical timing wheel for the agent's deadlines
// (reservation expiry, dispatch deadlines). O(1) schedule and cancel; time is
// passed in (no clock reads, no threads: CONVENTIONS.md #2).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace vend::agent {

// A scheduled timer. The zero value is never a valid timer. An id stays
// unique while its timer is pending; once the timer fired or was cancelled,
// the id is refused even after its storage is reused (generation counter).
struct TimerId {
  uint64_t value = 0;
  bool valid() const { return value != 0; }
  friend bool operator==(TimerId, TimerId) = default;
};

// Timing and order:
//   - Time is cut into ticks of tick_ms, counted from start_ms. A timer fires
//     in the first advance(now_ms) with now_ms >= its deadline rounded UP to
//     a tick boundary: never early, at most tick_ms - 1 ms late (plus however
//     late advance() is called). tick_ms = 1 makes firing exact.
//   - A deadline at or before the wheel's current tick fires on the next
//     advance() call.
//   - Within one advance() call timers fire in non-decreasing deadline order
//     (ties by payload), across levels and cascades.
//
// Structure: 4 levels of 256 slots (level k slot = 256^k ticks; with 10 ms
// ticks level 3 spans ~497 days), plus an overflow list for later deadlines,
// re-examined every 2^32 ticks. Timers are nodes of a pooled array (free
// list, no allocation once warm) linked into per-slot doubly-linked lists;
// per-level occupancy bitmaps let advance() jump over empty time, so a jump
// of days costs per occupied slot, not per tick.
//
// Memory: 40 bytes per timer slot in the pool; the pool never shrinks. The
// caller bounds the number of pending timers (at most 2^32 - 2).
//
// Not thread-safe: one owner thread (the agent core). `fire` may call
// schedule() and cancel() on this wheel, but not advance().
// Non-copyable; movable.
class TimingWheel {
 public:
  using FireFn = std::function<void(uint64_t payload, int64_t deadline_ms)>;

  static constexpr int kLevels = 4;
  static constexpr int kSlotBits = 8;
  static constexpr int kSlots = 1 << kSlotBits;

  // REQUIRES: tick_ms >= 1. start_ms is "now" (monotonic ms).
  explicit TimingWheel(int64_t start_ms, int64_t tick_ms = 10);
  TimingWheel(const TimingWheel&) = delete;
  TimingWheel& operator=(const TimingWheel&) = delete;
  TimingWheel(TimingWheel&&) = default;
  TimingWheel& operator=(TimingWheel&&) = default;

  // Schedules `payload` for deadline_ms. O(1).
  TimerId schedule(int64_t deadline_ms, uint64_t payload);

  // Removes a pending timer. False if `id` already fired, was cancelled, or
  // was never issued. O(1).
  bool cancel(TimerId id);

  // Moves time to now_ms and calls fire(payload, deadline_ms) for every timer
  // due, in order (see above); returns how many fired. A timer is removed
  // before its callback runs (cancelling it from there returns false).
  // now_ms earlier than a previous advance() only fires the overdue list.
  // REQUIRES: not called from within `fire`.
  size_t advance(int64_t now_ms, const FireFn& fire);

  // Pending timers.
  size_t size() const { return count_; }

  // A time at which advance() may have work, never later than the earliest
  // pending deadline's firing time (it can be earlier: a cascade of far
  // timers). std::nullopt when nothing is pending.
  std::optional<int64_t> next_wakeup_ms() const;

  int64_t tick_ms() const { return tick_ms_; }

 private:
  static constexpr uint32_t kNil = 0xFFFFFFFFu;
  static constexpr uint32_t kWheelLists = kLevels * kSlots;
  static constexpr uint32_t kOverdueList = kWheelLists;       // due before the current tick
  static constexpr uint32_t kOverflowList = kWheelLists + 1;  // beyond level 3
  static constexpr uint32_t kListCount = kWheelLists + 2;
  static constexpr uint32_t kNoList = kNil;  // a free node

  struct Node {
    uint64_t expiry_tick;
    int64_t deadline_ms;
    uint64_t payload;
    uint32_t prev;
    uint32_t next;
    uint32_t generation;  // never 0
    uint32_t list;        // kNoList when free
  };
  struct Event {
    uint64_t tick;
    uint32_t list;
  };
  struct Due {
    int64_t deadline_ms;
    uint64_t payload;
  };

  uint64_t expiry_tick_of(int64_t deadline_ms) const;
  uint32_t list_for(uint64_t expiry_tick) const;
  uint32_t alloc_node();
  void free_node(uint32_t index);
  void link(uint32_t index, uint32_t list);
  void unlink(uint32_t index);
  uint32_t detach(uint32_t list);
  void place(uint32_t index);
  std::optional<Event> next_event() const;
  void collect_or_replace(uint32_t chain);
  size_t fire_due(const FireFn& fire);

  int64_t start_ms_;
  int64_t tick_ms_;
  uint64_t now_tick_ = 0;  // every timer with expiry_tick <= now_tick_ has been taken
  size_t count_ = 0;
  bool advancing_ = false;
  std::vector<Node> nodes_;
  uint32_t free_head_ = kNil;
  std::array<uint32_t, kListCount> heads_;
  std::array<std::array<uint64_t, kSlots / 64>, kLevels> occupied_{};
  std::vector<Due> due_;  // scratch of advance()
};

}  // namespace vend::agent
