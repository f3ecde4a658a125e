#include "deadlines/timing_wheel.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <limits>

namespace vend::agent {

// Placement rule. A timer due at tick e (> now) sits at the level of the
// highest 8-bit group in which e and now differ, in the slot given by e's bits
// of that group. So every timer of level k lies in now's current 256^(k+1)
// block but in a later 256^k sub-block, strictly ahead of now's index at that
// level, and the lowest occupied slot of the lowest non-empty level is the
// next thing to do: fire it (level 0) or cascade it (level k > 0) when time
// reaches the start of that slot. Cascaded timers land strictly ahead again,
// or are due exactly then.

TimingWheel::TimingWheel(int64_t start_ms, int64_t tick_ms)
    : start_ms_(start_ms), tick_ms_(tick_ms) {
  assert(tick_ms >= 1);
  heads_.fill(kNil);
}

uint64_t TimingWheel::expiry_tick_of(int64_t deadline_ms) const {
  if (deadline_ms <= start_ms_) return 0;
  // Unsigned difference: exact even when the signed one would overflow.
  uint64_t delta = static_cast<uint64_t>(deadline_ms) - static_cast<uint64_t>(start_ms_);
  uint64_t tick = static_cast<uint64_t>(tick_ms_);
  return delta / tick + (delta % tick != 0 ? 1 : 0);  // round up: never early
}

uint32_t TimingWheel::list_for(uint64_t expiry_tick) const {
  assert(expiry_tick > now_tick_);
  int level = (std::bit_width(expiry_tick ^ now_tick_) - 1) / kSlotBits;
  if (level >= kLevels) return kOverflowList;
  uint32_t slot = static_cast<uint32_t>(expiry_tick >> (level * kSlotBits)) & (kSlots - 1);
  return static_cast<uint32_t>(level) * kSlots + slot;
}

uint32_t TimingWheel::alloc_node() {
  if (free_head_ != kNil) {
    uint32_t index = free_head_;
    free_head_ = nodes_[index].next;
    return index;
  }
  assert(nodes_.size() < kNil - 1);
  nodes_.push_back(Node{0, 0, 0, kNil, kNil, 1, kNoList});
  return static_cast<uint32_t>(nodes_.size() - 1);
}

void TimingWheel::free_node(uint32_t index) {
  Node& n = nodes_[index];
  n.generation = n.generation == std::numeric_limits<uint32_t>::max() ? 1 : n.generation + 1;
  n.list = kNoList;
  n.next = free_head_;
  free_head_ = index;
}

void TimingWheel::link(uint32_t index, uint32_t list) {
  Node& n = nodes_[index];
  n.list = list;
  n.prev = kNil;
  n.next = heads_[list];
  if (n.next != kNil) nodes_[n.next].prev = index;
  heads_[list] = index;
  if (list < kWheelLists) {
    occupied_[list / kSlots][(list % kSlots) / 64] |= uint64_t{1} << (list % 64);
  }
}

void TimingWheel::unlink(uint32_t index) {
  Node& n = nodes_[index];
  if (n.prev != kNil) {
    nodes_[n.prev].next = n.next;
  } else {
    heads_[n.list] = n.next;
  }
  if (n.next != kNil) nodes_[n.next].prev = n.prev;
  if (heads_[n.list] == kNil && n.list < kWheelLists) {
    occupied_[n.list / kSlots][(n.list % kSlots) / 64] &= ~(uint64_t{1} << (n.list % 64));
  }
}

// Empties `list`; returns its first node (the chain goes on through `next`).
uint32_t TimingWheel::detach(uint32_t list) {
  uint32_t head = heads_[list];
  heads_[list] = kNil;
  if (list < kWheelLists) {
    occupied_[list / kSlots][(list % kSlots) / 64] &= ~(uint64_t{1} << (list % 64));
  }
  return head;
}

void TimingWheel::place(uint32_t index) {
  uint64_t e = nodes_[index].expiry_tick;
  link(index, e <= now_tick_ ? kOverdueList : list_for(e));
}

TimerId TimingWheel::schedule(int64_t deadline_ms, uint64_t payload) {
  uint32_t index = alloc_node();
  Node& n = nodes_[index];
  n.expiry_tick = expiry_tick_of(deadline_ms);
  n.deadline_ms = deadline_ms;
  n.payload = payload;
  place(index);
  ++count_;
  return TimerId{(uint64_t{n.generation} << 32) | index};
}

bool TimingWheel::cancel(TimerId id) {
  uint32_t index = static_cast<uint32_t>(id.value);
  uint32_t generation = static_cast<uint32_t>(id.value >> 32);
  if (index >= nodes_.size()) return false;
  Node& n = nodes_[index];
  if (n.generation != generation || n.list == kNoList) return false;
  unlink(index);
  free_node(index);
  --count_;
  return true;
}

std::optional<TimingWheel::Event> TimingWheel::next_event() const {
  for (int level = 0; level < kLevels; ++level) {
    for (int word = 0; word < kSlots / 64; ++word) {
      uint64_t bits = occupied_[level][word];
      if (bits == 0) continue;
      uint32_t slot = static_cast<uint32_t>(word * 64 + std::countr_zero(bits));
      int shift = level * kSlotBits;
      assert(slot > ((now_tick_ >> shift) & (kSlots - 1)));
      uint64_t block = (now_tick_ >> (shift + kSlotBits)) << (shift + kSlotBits);
      return Event{block | (uint64_t{slot} << shift), static_cast<uint32_t>(level) * kSlots + slot};
    }
  }
  if (heads_[kOverflowList] != kNil) {
    constexpr int kTopBits = kLevels * kSlotBits;
    return Event{((now_tick_ >> kTopBits) + 1) << kTopBits, kOverflowList};
  }
  return std::nullopt;
}

std::optional<int64_t> TimingWheel::next_wakeup_ms() const {
  uint64_t tick = now_tick_;
  if (heads_[kOverdueList] == kNil) {
    auto event = next_event();
    if (!event) return std::nullopt;
    tick = event->tick;
  }
  // Saturate instead of overflowing for absurd deadlines.
  uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max() - start_ms_);
  uint64_t tick_ms = static_cast<uint64_t>(tick_ms_);
  if (tick > limit / tick_ms) return std::numeric_limits<int64_t>::max();
  return start_ms_ + static_cast<int64_t>(tick * tick_ms);
}

// Takes a detached chain: timers due by now_tick_ go to due_ (and their nodes
// are freed), the others are placed again relative to now_tick_ (cascade).
void TimingWheel::collect_or_replace(uint32_t chain) {
  while (chain != kNil) {
    uint32_t index = chain;
    Node& n = nodes_[index];
    chain = n.next;
    if (n.expiry_tick <= now_tick_) {
      due_.push_back(Due{n.deadline_ms, n.payload});
      free_node(index);
      --count_;
    } else {
      link(index, list_for(n.expiry_tick));
    }
  }
}

// Fires due_ in deadline order. Callbacks may schedule and cancel, which
// never touches due_.
size_t TimingWheel::fire_due(const FireFn& fire) {
  auto by_deadline = [](const Due& a, const Due& b) {
    return a.deadline_ms != b.deadline_ms ? a.deadline_ms < b.deadline_ms : a.payload < b.payload;
  };
  if (!std::is_sorted(due_.begin(), due_.end(), by_deadline)) {
    std::sort(due_.begin(), due_.end(), by_deadline);
  }
  size_t fired = due_.size();
  for (const Due& d : due_) fire(d.payload, d.deadline_ms);
  due_.clear();
  return fired;
}

size_t TimingWheel::advance(int64_t now_ms, const FireFn& fire) {
  assert(!advancing_ && "advance() called from a fire callback");
  struct Reentry {
    bool& flag;
    ~Reentry() { flag = false; }
  } reentry{advancing_};
  advancing_ = true;
  due_.clear();

  collect_or_replace(detach(kOverdueList));
  size_t fired = fire_due(fire);
  uint64_t target = now_ms <= start_ms_
                        ? 0
                        : (static_cast<uint64_t>(now_ms) - static_cast<uint64_t>(start_ms_)) /
                              static_cast<uint64_t>(tick_ms_);  // round down
  for (auto event = next_event(); event && event->tick <= target; event = next_event()) {
    now_tick_ = event->tick;
    collect_or_replace(detach(event->list));
    fired += fire_due(fire);
  }
  now_tick_ = std::max(now_tick_, target);
  return fired;
}

}  // namespace vend::agent
