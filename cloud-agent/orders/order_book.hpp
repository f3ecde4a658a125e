// OrderBook: the orders the agent core keeps in memory (every open one and
// the most recent finished ones), their look-ups by id and idempotency key,
// the open orders in id order, the eviction queue of finished ones, the
// count by state and the open-reservation count per client. Memory only:
// the core writes each change to the log and reads what the book evicted
// back from it; this class neither reads nor writes the log, nor reads a
// clock, nor knows timers (a record only holds its TimerSlots).
//
// Flat, for the request path (docs/design-decisions.md): records live in
// fixed chunks (a record never moves while in the book, so references and
// the string_view keys into it stay valid), a free list reuses the places
// of evicted ones, the id and key indexes are open-addressing tables of
// places (no node, no copy of the id), the open orders a vector of places
// sorted lazily, the eviction queue a deque of places.
//
// Single-threaded (the core's thread). Not copyable.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "contracts/order.hpp"
#include "contracts/repository_types.hpp"
#include "deadlines/deadlines.hpp"

namespace vend::agent {

inline constexpr size_t kOrderStateCount = 9;

// RESERVED, PAID and DISPATCHED.
bool is_open(OrderState state);

// An order's place in the book: stable while the order is in it.
using OrderRef = uint32_t;

struct OrderRec {
  Order order;
  Ticket last_write;  // the latest write touching the order (eviction waits for it)
  Ticket durable;     // what a pay() answer about this order waits for
  bool command_published = false;
  uint32_t command_sends = 0;  // dispense commands published (the re-send backoff)
  // The order still holds its token (taken or restored, not put back): the
  // stock forgets the token when the order leaves memory. False for orders
  // read back finished from the log.
  bool holds_token = false;
  int64_t paid_mono_ms = 0;
  // Wall minus monotonic clock when its deadlines were set (reservation,
  // dispatch, load): its stored wall-clock deadlines are measured from there
  // on the monotonic clock, so a step of the wall clock moves none.
  int64_t wall_offset_ms = 0;
  TimerSlot deadline_timer;  // reservation expiry or dispatch deadline
  TimerSlot resend_timer;
  std::vector<std::string> payment_ids;  // every payment id seen for the order
  // Who reserved it, while it counts against that client's open-reservation
  // cap (cleared when it leaves RESERVED). In memory only: after a restart
  // the reservations of before no longer count.
  std::string client;
  OrderRef ref = 0;  // its place (set by the book)
};

class OrderBook {
 public:
  OrderBook();
  ~OrderBook();
  OrderBook(const OrderBook&) = delete;
  OrderBook& operator=(const OrderBook&) = delete;

  // ---- look-ups (nullptr: not in memory) ----
  OrderRec* find(std::string_view order_id);
  OrderRec* find_by_key(std::string_view idempotency_key);
  OrderRec* at(OrderRef ref);  // nullptr for a free place
  size_t size() const { return live_; }

  // ---- adding. REQUIRES: order.id not in the book ----
  // An open order (new, or restored at start-up): joins the open orders;
  // its key (if any) is indexed. A new one counts as created and in its
  // state (restored ones are in the loaded counts: load_counts).
  OrderRec& add_open(Order order, bool is_new);
  // A finished order read from the log: joins the eviction queue (at its
  // end: load oldest first).
  OrderRec& add_finished(Order order);

  // ---- state ----
  // The memory part of a transition: the counts, the client's cap (left
  // RESERVED), and open -> finished (leaves the open orders, joins the
  // eviction queue). True when the order left the open states.
  // REQUIRES: is_legal_transition(rec.order.state, to).
  bool set_state(OrderRec& rec, OrderState to);
  const std::array<int64_t, kOrderStateCount>& state_counts() const { return state_counts_; }
  // The log's counts by state, added (start-up; several agents: each set
  // of shards loaded adds its own).
  void load_counts(const std::map<OrderState, int64_t>& counts);
  int64_t created() const { return created_; }  // orders created this run

  // Every order of the log is in memory (nothing evicted yet, nothing left
  // out): a miss is a miss, without asking the log.
  bool all_in_memory() const { return all_in_memory_; }
  void set_all_in_memory(bool all) { all_in_memory_ = all; }

  // ---- the open-reservation cap per client ----
  // RESERVED orders `client` holds.
  size_t reservations_of(const std::string& client) const;
  // The RESERVED order counts against `client` until it leaves RESERVED.
  void hold_for(OrderRec& rec, const std::string& client);

  // ---- open orders ----
  // Their places, in id order (a copy: the caller may change states).
  std::vector<OrderRef> open_orders();
  size_t open_count() const { return open_live_; }
  // Every order in memory, in no particular order.
  void for_each(const std::function<void(const OrderRec&)>& fn) const;

  // ---- eviction ----
  // While more than `keep` finished orders are in memory: the oldest
  // leaves, unless its last write is not durable yet (then it stops).
  // `leaving` sees each before it goes. Any eviction clears all_in_memory.
  void evict_finished(size_t keep, const std::function<void(const OrderRec&)>& leaving);

 private:
  class Index;  // open addressing: hash -> place (order_book.cpp)
  struct Entry {
    OrderRef ref;
    uint32_t generation;
  };
  static constexpr size_t kChunk = 1024;

  OrderRec& slot(OrderRef ref) { return chunks_[ref / kChunk][ref % kChunk]; }
  const OrderRec& slot(OrderRef ref) const { return chunks_[ref / kChunk][ref % kChunk]; }
  OrderRec& place(Order order);
  void index_key(OrderRec& rec);
  bool entry_live(const Entry& e) const;
  void compact_open();

  std::vector<std::unique_ptr<OrderRec[]>> chunks_;
  std::vector<uint32_t> generation_;  // per place; bumped when an order leaves
  std::vector<bool> used_;
  std::vector<OrderRef> free_;
  size_t places_ = 0;
  size_t live_ = 0;
  std::unique_ptr<Index> by_id_;
  std::unique_ptr<Index> by_key_;
  std::vector<Entry> open_;  // appended; [0, open_sorted_) in id order; dead ones skipped
  size_t open_sorted_ = 0;
  size_t open_live_ = 0;
  std::deque<Entry> finished_;  // eviction order, oldest first
  std::unordered_map<std::string, size_t> reservations_by_client_;
  std::array<int64_t, kOrderStateCount> state_counts_{};
  int64_t created_ = 0;
  bool all_in_memory_ = true;
};

}  // namespace vend::agent
