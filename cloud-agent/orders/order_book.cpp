// OrderBook (order_book.hpp). A place is an index into fixed chunks of
// records; its generation is bumped when its order leaves, so entries of
// the open list and the eviction queue that name a departed order are
// recognised as dead (the place may hold another order by then).
#include "orders/order_book.hpp"

#include <algorithm>
#include <cassert>

namespace vend::agent {

bool is_open(OrderState state) {
  return state == OrderState::kReserved || state == OrderState::kPaid ||
         state == OrderState::kDispatched;
}

namespace {
constexpr uint32_t kEmpty = 0xFFFFFFFFu;
constexpr uint32_t kTomb = 0xFFFFFFFEu;

std::string_view id_of(const OrderRec& rec) { return rec.order.id; }
std::string_view key_of(const OrderRec& rec) { return rec.order.idempotency_key; }
}  // namespace

// Open addressing with linear probing over (place, hash tag) pairs; the key
// itself is read from the record (a string_view into it, never copied).
// Erased entries are tombstones until the next rehash.
class OrderBook::Index {
 public:
  using KeyOf = std::string_view (*)(const OrderRec&);
  Index(const OrderBook& book, KeyOf key) : book_(book), key_(key), slots_(16) {}

  uint32_t find(std::string_view k) const {
    size_t h = std::hash<std::string_view>{}(k);
    auto tag = static_cast<uint32_t>(h >> 32);
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.ref == kEmpty) return kEmpty;
      if (s.ref != kTomb && s.tag == tag && key_(book_.slot(s.ref)) == k) return s.ref;
    }
  }

  // `ref` under its record's key, replacing whatever that key named.
  void put(OrderRef ref) {
    if ((used_ + 1) * 10 > slots_.size() * 7) rehash();
    std::string_view k = key_(book_.slot(ref));
    size_t h = std::hash<std::string_view>{}(k);
    auto tag = static_cast<uint32_t>(h >> 32);
    size_t mask = slots_.size() - 1;
    size_t tomb = kEmpty;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.ref == kEmpty) {
        Slot& into = tomb != kEmpty ? slots_[tomb] : s;
        if (tomb == kEmpty) ++used_;
        into = Slot{ref, tag};
        ++live_;
        return;
      }
      if (s.ref == kTomb) {
        if (tomb == kEmpty) tomb = i;
      } else if (s.tag == tag && key_(book_.slot(s.ref)) == k) {
        s.ref = ref;
        return;
      }
    }
  }

  // Drops the key of `ref`'s record if it names `ref` (not another order).
  void drop(OrderRef ref) {
    std::string_view k = key_(book_.slot(ref));
    size_t h = std::hash<std::string_view>{}(k);
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.ref == kEmpty) return;
      if (s.ref == ref) {
        s.ref = kTomb;
        --live_;
        return;
      }
    }
  }

 private:
  struct Slot {
    uint32_t ref = kEmpty;
    uint32_t tag = 0;
  };

  void rehash() {
    size_t size = 16;
    while (size * 7 < (live_ + 1) * 20) size *= 2;  // at most 35 % full after
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(size, Slot{});
    used_ = live_ = 0;
    size_t mask = size - 1;
    for (const Slot& s : old) {
      if (s.ref == kEmpty || s.ref == kTomb) continue;
      size_t h = std::hash<std::string_view>{}(key_(book_.slot(s.ref)));
      size_t i = h & mask;
      while (slots_[i].ref != kEmpty) i = (i + 1) & mask;
      slots_[i] = s;
      ++used_;
      ++live_;
    }
  }

  const OrderBook& book_;
  KeyOf key_;
  std::vector<Slot> slots_;  // size: a power of two
  size_t used_ = 0;          // live + tombstones
  size_t live_ = 0;
};

OrderBook::OrderBook()
    : by_id_(std::make_unique<Index>(*this, id_of)),
      by_key_(std::make_unique<Index>(*this, key_of)) {}

OrderBook::~OrderBook() = default;

OrderRec* OrderBook::find(std::string_view order_id) {
  uint32_t ref = by_id_->find(order_id);
  return ref == kEmpty ? nullptr : &slot(ref);
}

OrderRec* OrderBook::find_by_key(std::string_view idempotency_key) {
  if (idempotency_key.empty()) return nullptr;
  uint32_t ref = by_key_->find(idempotency_key);
  return ref == kEmpty ? nullptr : &slot(ref);
}

OrderRec* OrderBook::at(OrderRef ref) {
  if (ref >= places_ || !used_[ref]) return nullptr;
  return &slot(ref);
}

OrderRec& OrderBook::place(Order order) {
  OrderRef ref;
  if (!free_.empty()) {
    ref = free_.back();
    free_.pop_back();
  } else {
    if (places_ == chunks_.size() * kChunk) chunks_.push_back(std::make_unique<OrderRec[]>(kChunk));
    ref = static_cast<OrderRef>(places_++);
    generation_.push_back(1);
    used_.push_back(false);
  }
  OrderRec& rec = slot(ref);
  rec.order = std::move(order);
  rec.ref = ref;
  used_[ref] = true;
  ++live_;
  by_id_->put(ref);
  index_key(rec);
  return rec;
}

void OrderBook::index_key(OrderRec& rec) {
  if (!rec.order.idempotency_key.empty()) by_key_->put(rec.ref);
}

OrderRec& OrderBook::add_open(Order order, bool is_new) {
  assert(is_open(order.state));
  OrderRec& rec = place(std::move(order));
  rec.holds_token = true;
  if (is_new) {
    ++created_;
    ++state_counts_[static_cast<size_t>(rec.order.state)];
  }
  // In id order as long as ids grow (new ones do: time first); otherwise
  // open_orders() sorts the tail.
  if (open_sorted_ == open_.size() &&
      (open_.empty() ||
       (entry_live(open_.back()) && slot(open_.back().ref).order.id < rec.order.id))) {
    ++open_sorted_;
  }
  open_.push_back(Entry{rec.ref, generation_[rec.ref]});
  ++open_live_;
  return rec;
}

OrderRec& OrderBook::add_finished(Order order) {
  assert(!is_open(order.state));
  OrderRec& rec = place(std::move(order));
  finished_.push_back(Entry{rec.ref, generation_[rec.ref]});
  return rec;
}

bool OrderBook::set_state(OrderRec& rec, OrderState to) {
  OrderState from = rec.order.state;
  if (from == OrderState::kReserved && !rec.client.empty()) {
    auto held = reservations_by_client_.find(rec.client);
    if (held != reservations_by_client_.end() && --held->second == 0) {
      reservations_by_client_.erase(held);
    }
    rec.client.clear();
  }
  rec.order.state = to;
  --state_counts_[static_cast<size_t>(from)];
  ++state_counts_[static_cast<size_t>(to)];
  if (!is_open(from) || is_open(to)) return false;
  --open_live_;  // its entry in open_ is dead now (is_open fails)
  if (open_.size() > 2 * open_live_ + 64) compact_open();
  finished_.push_back(Entry{rec.ref, generation_[rec.ref]});
  return true;
}

void OrderBook::load_counts(const std::map<OrderState, int64_t>& counts) {
  for (const auto& [state, n] : counts) state_counts_[static_cast<size_t>(state)] += n;
}

size_t OrderBook::reservations_of(const std::string& client) const {
  auto it = reservations_by_client_.find(client);
  return it == reservations_by_client_.end() ? 0 : it->second;
}

void OrderBook::hold_for(OrderRec& rec, const std::string& client) {
  rec.client = client;
  ++reservations_by_client_[client];
}

bool OrderBook::entry_live(const Entry& e) const {
  return used_[e.ref] && generation_[e.ref] == e.generation && is_open(slot(e.ref).order.state);
}

void OrderBook::compact_open() {
  size_t kept = 0, kept_sorted = 0;
  for (size_t i = 0; i < open_.size(); ++i) {
    if (!entry_live(open_[i])) continue;
    if (i < open_sorted_) ++kept_sorted;
    open_[kept++] = open_[i];
  }
  open_.resize(kept);
  open_sorted_ = kept_sorted;
}

std::vector<OrderRef> OrderBook::open_orders() {
  compact_open();
  auto by_id = [this](const Entry& a, const Entry& b) {
    return slot(a.ref).order.id < slot(b.ref).order.id;
  };
  auto middle = open_.begin() + static_cast<std::ptrdiff_t>(open_sorted_);
  if (middle != open_.end()) {
    std::sort(middle, open_.end(), by_id);
    std::inplace_merge(open_.begin(), middle, open_.end(), by_id);
    open_sorted_ = open_.size();
  }
  std::vector<OrderRef> out;
  out.reserve(open_.size());
  for (const Entry& e : open_) out.push_back(e.ref);
  return out;
}

void OrderBook::for_each(const std::function<void(const OrderRec&)>& fn) const {
  for (size_t ref = 0; ref < places_; ++ref) {
    if (used_[ref]) fn(slot(static_cast<OrderRef>(ref)));
  }
}

void OrderBook::evict_finished(size_t keep, const std::function<void(const OrderRec&)>& leaving) {
  while (finished_.size() > keep) {
    Entry e = finished_.front();
    if (used_[e.ref] && generation_[e.ref] == e.generation) {
      OrderRec& rec = slot(e.ref);
      if (!is_ready(rec.last_write)) return;  // not durable yet: keep it
      leaving(rec);
      by_id_->drop(e.ref);
      if (!rec.order.idempotency_key.empty()) by_key_->drop(e.ref);
      rec = OrderRec{};
      used_[e.ref] = false;
      ++generation_[e.ref];
      free_.push_back(e.ref);
      --live_;
      all_in_memory_ = false;
    }
    finished_.pop_front();
  }
}

}  // namespace vend::agent
