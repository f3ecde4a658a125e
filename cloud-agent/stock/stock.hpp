// The cloud's stock: every slot it sells, its pool of sale tokens (the one
// truth of what may be sold), the counters of tokens held, sold and burned,
// and which tokens memory knows. Memory only: the agent core records each
// move in its changeset; this class neither reads nor writes the log, nor
// reads a clock.
//
// Who holds a token is the order's to know (an order record holds its
// token): a take or a put-back touches only the slot, never a table of
// tokens, so a reservation costs no look-up in the million-token set. The
// set of known tokens changes only when tokens arrive (pool loads, mints,
// held tokens restored) or leave memory (burned from the pool, forgotten
// with their last holder).
//
// Every move keeps the counters in step, so for each slot
//   pool + reserved + dispatched + sold + burned
// only grows by tokens added (add_to_pool, load_pool_token, restore_held)
// and never changes otherwise; nothing is sold that was not in the pool.
//
// Single-threaded (the core's thread). Not copyable.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "contracts/order.hpp"

namespace vend::agent {

struct StockSlot {
  SlotSpec spec;
  std::deque<std::string> pool;  // tokens for sale; front = next to sell
  int64_t reserved = 0;          // held by RESERVED (or PAID) orders
  int64_t dispatched = 0;        // held by DISPATCHED orders
  int64_t sold = 0;
  int64_t burned = 0;
  // The device's view in its last snapshot (-1 until one arrives).
  int physical_count = -1;
  int device_tokens = -1;
};

class Stock {
 public:
  using Slots = std::map<int, StockSlot>;

  Stock() = default;
  Stock(const Stock&) = delete;
  Stock& operator=(const Stock&) = delete;

  // ---- slots ----
  // Defines the slot or changes its spec; a new slot starts empty.
  StockSlot& define(const std::string& device, const SlotSpec& spec);
  // nullptr when the device has no such slot.
  StockSlot* find(const std::string& device, int slot);
  const StockSlot* find(const std::string& device, int slot) const;
  // The device's slots by number (empty when it has none).
  const Slots& slots(const std::string& device) const;
  // The same, to keep: nullptr while the device has no slot; once not null,
  // the same object for the Stock's life (a device's slots are never
  // erased), so a caller may hold it instead of looking the name up again.
  Slots* slots_of(const std::string& device);
  // Tokens for sale in every pool.
  int64_t pool_total() const;
  // ... in the device's pools.
  int64_t pool_total(const std::string& device) const;

  // ---- start-up (the log's state) ----
  // The slot with its sold and burned counters.
  void load_slot(const std::string& device, const SlotSpec& spec, int64_t sold, int64_t burned);
  // A pool token, appended. Ignored (false) when the slot is unknown.
  bool load_pool_token(const std::string& device, int slot, const std::string& token);
  // The token of an open order: known, counted as reserved or dispatched
  // (when the slot is known; it is known either way).
  void restore_held(const std::string& device, int slot, const std::string& token, bool dispatched);

  // ---- moves. REQUIRES: the slot exists (define/load_slot) ----
  // The front of the slot's pool (a slot of find()), now reserved (its
  // order holds it); nullopt when the pool is empty (nothing is ever sold
  // beyond it). By the slot, not its names: the caller has just found it.
  std::optional<std::string> take(StockSlot& slot);
  // One reserved token is now dispatched.
  void dispatch(const std::string& device, int slot);
  // A held token goes back to the front of the pool (sold next).
  void put_back_reserved(const std::string& device, int slot, const std::string& token);
  void put_back_dispatched(const std::string& device, int slot, const std::string& token);
  // A dispatched token is spent: sold (dispensed) or burned (failed, lost).
  void spend_sold(const std::string& device, int slot);
  void spend_burned(const std::string& device, int slot);
  // A burned token did drop an item after all (an operator's review).
  void burned_to_sold(const std::string& device, int slot);
  // A reserved token the device no longer has: burned (its order is cancelled).
  void burn_reserved(const std::string& device, int slot);
  // New tokens (minted, or found by reconciliation), appended to the pool.
  void add_to_pool(const std::string& device, int slot, const std::vector<std::string>& tokens);
  // The listed tokens leave the pool, burned, and memory forgets them; ones
  // not in the pool are ignored. Returns the tokens burned, in pool order.
  std::vector<std::string> burn_from_pool(const std::string& device, int slot,
                                          const std::vector<std::string>& tokens);
  // Every pool of the device is burned (decommissioning); returns the tokens
  // by slot. Memory keeps knowing them (they can never be sold again).
  std::vector<std::pair<int, std::string>> withdraw(const std::string& device);

  // ---- what memory knows ----
  // True when the token is in a pool or held (or spent) by an order memory keeps.
  bool known(const std::string& token) const;
  // The token's last holder leaves memory still holding it (taken or
  // restored, never put back): the token is forgotten.
  // REQUIRES: not a pool token (one put back is the pool's again).
  void forget(const std::string& token);

 private:
  StockSlot& at(const std::string& device, int slot);

  std::map<std::string, Slots> slots_;  // device -> slots (ordered)
  // The same by hash: the look-up of every reservation (a tree of a
  // thousand device names cost a dozen cache misses each time). Map nodes
  // never move, and a device's entry is never erased.
  std::unordered_map<std::string, Slots*> by_device_;
  // Tokens in a pool or held by orders in memory.
  std::unordered_set<std::string> known_;
};

}  // namespace vend::agent
