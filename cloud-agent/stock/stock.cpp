// Stock: the slots' pools and counters (stock.hpp). Moves on a missing slot
// are bugs of the caller (asserted); start-up loads tolerate them (the log
// may name slots of a device no longer defined).
#include "stock/stock.hpp"

#include <cassert>

namespace vend::agent {

StockSlot& Stock::define(const std::string& device, const SlotSpec& spec) {
  auto [d, added] = slots_.try_emplace(device);
  if (added) by_device_.emplace(device, &d->second);
  StockSlot& slot = d->second[spec.slot];
  slot.spec = spec;
  return slot;
}

StockSlot* Stock::find(const std::string& device, int slot) {
  auto d = by_device_.find(device);
  if (d == by_device_.end()) return nullptr;
  auto s = d->second->find(slot);
  return s == d->second->end() ? nullptr : &s->second;
}

const StockSlot* Stock::find(const std::string& device, int slot) const {
  return const_cast<Stock*>(this)->find(device, slot);
}

const Stock::Slots& Stock::slots(const std::string& device) const {
  static const Slots kNone;
  auto d = by_device_.find(device);
  return d == by_device_.end() ? kNone : *d->second;
}

Stock::Slots* Stock::slots_of(const std::string& device) {
  auto d = by_device_.find(device);
  return d == by_device_.end() ? nullptr : d->second;
}

int64_t Stock::pool_total() const {
  int64_t n = 0;
  for (const auto& [device, slots] : slots_) {
    for (const auto& [number, slot] : slots) n += static_cast<int64_t>(slot.pool.size());
  }
  return n;
}

int64_t Stock::pool_total(const std::string& device) const {
  int64_t n = 0;
  for (const auto& [number, slot] : slots(device)) n += static_cast<int64_t>(slot.pool.size());
  return n;
}

void Stock::load_slot(const std::string& device, const SlotSpec& spec, int64_t sold,
                      int64_t burned) {
  StockSlot& slot = define(device, spec);
  slot.sold = sold;
  slot.burned = burned;
}

bool Stock::load_pool_token(const std::string& device, int slot, const std::string& token) {
  StockSlot* s = find(device, slot);
  if (s == nullptr) return false;
  s->pool.push_back(token);
  known_.insert(token);
  return true;
}

void Stock::restore_held(const std::string& device, int slot, const std::string& token,
                         bool dispatched) {
  known_.insert(token);
  StockSlot* s = find(device, slot);
  if (s == nullptr) return;
  ++(dispatched ? s->dispatched : s->reserved);
}

StockSlot& Stock::at(const std::string& device, int slot) {
  StockSlot* s = find(device, slot);
  assert(s != nullptr && "a move on a slot the stock does not have");
  return *s;
}

std::optional<std::string> Stock::take(StockSlot& s) {
  if (s.pool.empty()) return std::nullopt;
  std::string token = std::move(s.pool.front());
  s.pool.pop_front();
  ++s.reserved;
  return token;
}

void Stock::dispatch(const std::string& device, int slot) {
  StockSlot& s = at(device, slot);
  --s.reserved;
  ++s.dispatched;
}

void Stock::put_back_reserved(const std::string& device, int slot, const std::string& token) {
  StockSlot& s = at(device, slot);
  --s.reserved;
  s.pool.push_front(token);
}

void Stock::put_back_dispatched(const std::string& device, int slot, const std::string& token) {
  StockSlot& s = at(device, slot);
  --s.dispatched;
  s.pool.push_front(token);
}

void Stock::spend_sold(const std::string& device, int slot) {
  StockSlot& s = at(device, slot);
  --s.dispatched;
  ++s.sold;
}

void Stock::spend_burned(const std::string& device, int slot) {
  StockSlot& s = at(device, slot);
  --s.dispatched;
  ++s.burned;
}

void Stock::burned_to_sold(const std::string& device, int slot) {
  StockSlot& s = at(device, slot);
  --s.burned;
  ++s.sold;
}

void Stock::burn_reserved(const std::string& device, int slot) {
  StockSlot& s = at(device, slot);
  --s.reserved;
  ++s.burned;
}

void Stock::add_to_pool(const std::string& device, int slot,
                        const std::vector<std::string>& tokens) {
  StockSlot& s = at(device, slot);
  for (const auto& t : tokens) {
    s.pool.push_back(t);
    known_.insert(t);
  }
}

std::vector<std::string> Stock::burn_from_pool(const std::string& device, int slot,
                                               const std::vector<std::string>& tokens) {
  StockSlot& s = at(device, slot);
  std::unordered_set<std::string_view> gone(tokens.begin(), tokens.end());
  std::vector<std::string> burned;
  std::deque<std::string> kept;
  for (auto& t : s.pool) {
    if (gone.count(t) == 0) {
      kept.push_back(std::move(t));
      continue;
    }
    known_.erase(t);
    burned.push_back(std::move(t));
  }
  s.pool = std::move(kept);
  s.burned += static_cast<int64_t>(burned.size());
  return burned;
}

std::vector<std::pair<int, std::string>> Stock::withdraw(const std::string& device) {
  std::vector<std::pair<int, std::string>> out;
  auto d = slots_.find(device);
  if (d == slots_.end()) return out;
  for (auto& [number, slot] : d->second) {
    for (auto& t : slot.pool) out.emplace_back(number, std::move(t));
    slot.burned += static_cast<int64_t>(slot.pool.size());
    slot.pool.clear();
  }
  return out;
}

bool Stock::known(const std::string& token) const { return known_.count(token) != 0; }

void Stock::forget(const std::string& token) { known_.erase(token); }

}  // namespace vend::agent
