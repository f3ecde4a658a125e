// AgentCore::State: reservations (create, cancel, expire), order look-ups and
// the token moves they make.
#include <algorithm>
#include <cassert>

#include "agent_state.hpp"

namespace vend::agent {

namespace {
// A scoped key: "<client>\n<key>", each at most 128 (AgentCore::create_order).
constexpr size_t kMaxScopedKey = 128 + 1 + 128;
constexpr size_t kDefaultListLimit = 100;
constexpr size_t kMaxListLimit = 10'000;
constexpr size_t kMaxReviewText = 256;

// `digits` lowercase hex digits of `v`, most significant first, at `out`.
void put_hex(char* out, uint64_t v, int digits) {
  constexpr char kHex[] = "0123456789abcdef";
  for (int i = digits - 1; i >= 0; --i, v >>= 4) out[i] = kHex[v & 0xf];
}

// "ord-", the creation time (wall ms, 12 hex digits: sorts as text until the
// year 10889), then 128 random bits. The time first puts each new order at
// the right edge of every B-tree keyed by order id (orders, order_events,
// payments: one page for a whole group commit instead of one each); the
// random tail keeps the id as unguessable as before (it is enough to cancel).
std::string new_order_id(int64_t wall_ms, Random& random) {
  constexpr uint64_t kMask48 = (uint64_t{1} << 48) - 1;
  // The same text as "ord-" + "%012llx" + random.id128() (whose hex is each
  // 64-bit draw's, most significant byte first), written in place: this runs
  // once per reservation, and snprintf was a sixth of its instructions.
  std::string id(4 + 12 + 32, '\0');
  id.replace(0, 4, "ord-");
  put_hex(id.data() + 4, static_cast<uint64_t>(std::max<int64_t>(wall_ms, 0)) & kMask48, 12);
  put_hex(id.data() + 16, random.next_u64(), 16);
  put_hex(id.data() + 32, random.next_u64(), 16);
  return id;
}
}  // namespace

Result<std::optional<Order>> AgentCore::State::find_by_idempotency_key(const std::string& key) {
  if (OrderRec* rec = orders.find_by_key(key)) return std::optional<Order>(rec->order);
  if (orders.all_in_memory()) return std::optional<Order>();
  auto stored = repo.find_order_by_idempotency_key(key);
  if (!stored.ok()) return make_error("unavailable", stored.error().to_string());
  if (!stored->has_value()) return std::optional<Order>();
  auto rec = find_or_load_order((*stored)->id);
  if (!rec.ok()) return rec.error();
  return std::optional<Order>((*rec)->order);
}

Result<Order> AgentCore::State::create_order(const std::string& device, int slot,
                                             const std::string& client, const std::string& key,
                                             Ticket& durable) {
  if (auto owner = owner_check(device); !owner.ok()) return owner.error();
  if (key.size() > kMaxScopedKey) return make_error("bad_request", "idempotency key too long");
  if (!started) return make_error("unavailable", "the agent core is not started");
  if (!key.empty()) {
    auto existing = find_by_idempotency_key(key);
    if (!existing.ok()) return existing.error();
    if (existing->has_value()) {
      const Order& o = **existing;
      if (o.device != device || o.slot != slot) {
        return make_error("conflict", "idempotency key was used for " + o.device + " slot " +
                                          std::to_string(o.slot));
      }
      durable = durable_ticket(o.id);
      return o;  // the same request again: the same order
    }
  }
  auto slot_rec = sellable_slot(device, slot);
  if (!slot_rec.ok()) return slot_rec.error();
  // Storage first: with the repository failing the order is refused here,
  // before any token moves, so nothing is half-written.
  if (auto s = writable(); !s.ok()) return s.error();
  // The check-and-take: the pool is the one stock truth (a token in it is
  // sellable); open_reservation takes its front in the same step.
  if ((*slot_rec)->pool.empty()) {
    ++counters.reservations_rejected_total;
    return make_error("sold_out", device + " slot " + std::to_string(slot) + " is sold out");
  }
  const size_t cap = options.max_open_reservations_per_client;
  if (cap > 0 && !client.empty()) {
    size_t held = orders.reservations_of(client);
    if (held >= cap) {
      ++counters.reservations_rejected_total;
      return make_error("too_many_reservations",
                        "this client already holds " + std::to_string(held) +
                            " unpaid reservations (at most " + std::to_string(cap) +
                            "): pay or cancel one first");
    }
  }
  OrderRec& rec = open_reservation(device, slot, **slot_rec, client, key);
  if (cap > 0 && !client.empty()) orders.hold_for(rec, client);
  durable = rec.last_write;
  return rec.order;
}

Result<StockSlot*> AgentCore::State::sellable_slot(const std::string& device, int slot) {
  DeviceRecord* dev = devices.find(device);
  if (dev == nullptr) return make_error("not_found", "no device '" + device + "'");
  // One look-up of the name per reservation: the device's stock is kept.
  if (device_slots.size() <= dev->index) device_slots.resize(devices.size(), nullptr);
  Stock::Slots*& slots = device_slots[dev->index];
  if (slots == nullptr) slots = stock.slots_of(device);
  StockSlot* found = nullptr;
  if (slots != nullptr) {
    auto s = slots->find(slot);
    if (s != slots->end()) found = &s->second;
  }
  if (found == nullptr) {
    return make_error("unknown_slot", device + " has no slot " + std::to_string(slot));
  }
  if (dev->decommissioned_ms != 0) {
    return make_error("decommissioned", device + " is decommissioned");
  }
  if (!dev->online) {
    ++counters.reservations_rejected_total;
    return make_error("device_offline", device + " is offline");
  }
  return found;
}

// The pool is not empty: its front token goes to the new order.
OrderRec& AgentCore::State::open_reservation(const std::string& device, int slot,
                                             StockSlot& slot_rec, const std::string& client,
                                             const std::string& key) {
  Order o;
  o.id = new_order_id(clock.wall_ms(), random);
  o.device = device;
  o.slot = slot;
  auto token = stock.take(slot_rec);
  assert(token.has_value());
  o.token = std::move(*token);
  o.price_cents = slot_rec.spec.price_cents;
  o.state = OrderState::kReserved;
  o.created_ms = o.updated_ms = clock.wall_ms();
  o.reserve_deadline_ms = o.created_ms + options.reservation_ttl_ms;
  o.idempotency_key = key;
  o.client = client;

  OrderRec& rec = orders.add_open(std::move(o), true);
  Changeset changes;
  changes.reserve(2);
  changes.insert_order(rec.order);
  changes.move_token(rec.order.token, TokenState::kPool, TokenState::kReserved, rec.order.id);
  ++counters.reservations_total;
  ops_order_event(rec, "");
  schedule_deadline(rec, TimerKind::kReservation, rec.order.reserve_deadline_ms);
  rec.last_write = rec.durable = commit(std::move(changes));
  return rec;
}

void AgentCore::State::move_token(OrderRec& rec, TokenState from, TokenState to,
                                  Changeset& changes) {
  const Order& o = rec.order;
  if (from == to) return;
  if (to == TokenState::kPool) {
    rec.holds_token = false;  // the pool's again
    if (from == TokenState::kReserved) {
      stock.put_back_reserved(o.device, o.slot, o.token);
    } else {
      assert(from == TokenState::kDispatched);
      stock.put_back_dispatched(o.device, o.slot, o.token);
    }
    changes.move_token(o.token, from, TokenState::kPool, "");
    return;
  }
  if (from == TokenState::kBurned) {  // a review resolved as dispensed
    assert(to == TokenState::kSold);
    if (stock.find(o.device, o.slot) == nullptr) return;
    stock.burned_to_sold(o.device, o.slot);
  } else if (from == TokenState::kReserved && to == TokenState::kDispatched) {
    if (stock.find(o.device, o.slot) != nullptr) stock.dispatch(o.device, o.slot);
  } else if (from == TokenState::kReserved) {
    assert(to == TokenState::kBurned);
    stock.burn_reserved(o.device, o.slot);
  } else {
    assert(from == TokenState::kDispatched);
    if (to == TokenState::kSold) {
      stock.spend_sold(o.device, o.slot);
    } else {
      assert(to == TokenState::kBurned);
      stock.spend_burned(o.device, o.slot);
    }
  }
  changes.move_token(o.token, from, to, o.id);
}

void AgentCore::State::settle(OrderRec& rec, const rules::Settlement& s, Changeset& changes) {
  move_token(rec, s.token_from, s.token, changes);
  if (!s.reason.empty()) rec.order.reason = s.reason;
  if (s.to != OrderState::kRefunded) set_state(rec, s.to, changes, s.detail);
  if (!s.refund_reason.empty()) refund_order(rec, s.refund_reason, changes);
}

Result<Order> AgentCore::State::cancel(const std::string& order_id) {
  auto found = find_or_load_order(order_id);
  if (!found.ok()) return found.error();
  if (*found == nullptr) return make_error("not_found", "no order '" + order_id + "'");
  OrderRec& rec = **found;
  auto decision = rules::decide_cancel(rec.order);
  if (decision.kind == rules::RequestDecision::Kind::kRepeat) return rec.order;
  if (decision.kind == rules::RequestDecision::Kind::kRefuse) {
    return make_error("invalid_state", "order " + order_id + " is " + to_string(rec.order.state) +
                                           "; only RESERVED cancels");
  }
  if (auto s = writable(); !s.ok()) return s.error();
  Changeset changes;
  settle(rec, decision.settlement, changes);
  rec.last_write = commit(std::move(changes));
  return rec.order;
}

Result<Order> AgentCore::State::resolve_review(const std::string& order_id, bool dispensed,
                                               const std::string& by, const std::string& note) {
  if (auto s = detail::check_text("by", by, kMaxReviewText, false); !s.ok()) return s.error();
  bool clean = note.size() <= kMaxReviewText;
  for (unsigned char c : note) clean = clean && c >= 0x20 && c != 0x7f;
  if (!clean) return make_error("bad_request", "note: at most 256 bytes, no control characters");
  auto found = find_or_load_order(order_id);
  if (!found.ok()) return found.error();
  if (*found == nullptr) return make_error("not_found", "no order '" + order_id + "'");
  OrderRec& rec = **found;
  std::string why = std::string(dispensed ? "dispensed" : "not dispensed") + " (by " + by +
                    (note.empty() ? "" : ": " + note) + ")";
  auto decision = rules::decide_review(rec.order, dispensed, why);
  if (decision.kind == rules::RequestDecision::Kind::kRepeat) return rec.order;
  if (decision.kind == rules::RequestDecision::Kind::kRefuse) {
    return make_error("invalid_state", "order " + order_id + " is " + to_string(rec.order.state) +
                                           "; only NEEDS_REVIEW is resolved");
  }
  if (auto s = writable(); !s.ok()) return s.error();
  Changeset changes;
  settle(rec, decision.settlement, changes);
  rec.last_write = commit(std::move(changes));
  log.info(detail::kLog, "order " + order_id + " review resolved: " + why);
  return rec.order;
}

void AgentCore::State::expire_reservation(OrderRec& rec, const std::string& why) {
  auto settlement = rules::decide_expiry(rec.order, why);
  if (!settlement) return;
  if (!writable().ok()) return;  // the sweep tries again
  Changeset changes;
  settle(rec, *settlement, changes);
  rec.last_write = commit(std::move(changes));
  log.info(detail::kLog, "order " + rec.order.id + " expired; token back in the pool");
}

std::vector<Order> AgentCore::State::list_orders(std::optional<OrderState> state, size_t limit,
                                                 const std::string& device) {
  if (limit == 0) limit = kDefaultListLimit;
  limit = std::min(limit, kMaxListLimit);
  std::vector<const Order*> matching;
  orders.for_each([&](const OrderRec& rec) {
    if (state && rec.order.state != *state) return;
    if (!device.empty() && rec.order.device != device) return;
    matching.push_back(&rec.order);
  });
  // Newest first; ties by id, so the answer does not depend on hashing.
  auto newer = [](const Order* a, const Order* b) {
    return a->created_ms != b->created_ms ? a->created_ms > b->created_ms : a->id < b->id;
  };
  size_t n = std::min(limit, matching.size());
  std::partial_sort(matching.begin(), matching.begin() + static_cast<std::ptrdiff_t>(n),
                    matching.end(), newer);
  std::vector<Order> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(*matching[i]);
  return out;
}

}  // namespace vend::agent
