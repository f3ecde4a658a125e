// OrderDesk: start-up of the orders, reservations (create, cancel, expire,
// review), order look-ups, and the token moves and transitions every
// settlement makes.
#include "core/order_desk.hpp"

#include <algorithm>
#include <cassert>

#include "core/output.hpp"
#include "core/writes.hpp"
#include "orders/order_ids.hpp"

namespace vend::agent {

namespace {
// A scoped key: "<client>\n<key>", each at most 128 (AgentCore::create_order).
constexpr size_t kMaxScopedKey = 128 + 1 + 128;
constexpr size_t kDefaultListLimit = 100;
constexpr size_t kMaxListLimit = 10'000;
constexpr size_t kMaxReviewText = 256;

}  // namespace

size_t OrderDesk::load(const LoadedState& loaded) {
  add_loaded(loaded);
  int64_t total = 0;
  for (const auto& [state, n] : loaded.order_counts) total += n;
  // Cluster mode: the log holds other instances' orders, which a request
  // may name (answered not_owner, and redirected).
  orders_.set_all_in_memory(!owns && total == static_cast<int64_t>(loaded.open_orders.size() +
                                                                   loaded.recent_orders.size()));
  // A crash between the DISPATCHED commit and the publish loses the
  // command: publish every live one again (the device dedups by order id).
  return republish_dispatched("");
}

size_t OrderDesk::absorb(const LoadedState& gained) {
  add_loaded(gained);
  // The previous owner may have died between a commit and its publish.
  size_t sent = 0;
  for (const auto& o : gained.open_orders) {
    if (o.state != OrderState::kDispatched) continue;
    OrderRec* rec = orders_.find(o.id);
    if (rec == nullptr || order_now(*rec) >= rec->order.dispatch_expires_at_ms) continue;
    publish_dispense(*rec);
    ++sent;
  }
  return sent;
}

void OrderDesk::add_loaded(const LoadedState& loaded) {
  for (const auto& o : loaded.open_orders) restore_order(o);
  // recent_orders is newest first; the book's eviction queue oldest first.
  for (auto it = loaded.recent_orders.rbegin(); it != loaded.recent_orders.rend(); ++it) {
    OrderRec& rec = orders_.add_finished(*it);
    rec.last_write = rec.durable = detail::ready_ticket();
  }
  for (const auto& p : loaded.payments) {
    payments_.record(p.payment_id,
                     PaymentRecord{p.order_id, p.amount_cents, p.outcome, detail::ready_ticket()});
    if (OrderRec* rec = orders_.find(p.order_id)) rec->payment_ids.push_back(p.payment_id);
  }
  orders_.load_counts(loaded.order_counts);
}

void OrderDesk::restore_order(const Order& order) {
  OrderRec& rec = orders_.add_open(order, false);
  rec.last_write = rec.durable = detail::ready_ticket();
  anchor_time(rec);  // the wall clock at start is the only reference
  stock_.restore_held(order.device, order.slot, order.token,
                      order.state == OrderState::kDispatched);
  if (order.state == OrderState::kDispatched) {
    rec.paid_mono_ms = clock.monotonic_ms();
    schedule_deadline(rec, TimerKind::kDispatchDeadline,
                      order.dispatch_expires_at_ms + options.expiry_skew_ms);
    return;
  }
  if (order.state == OrderState::kReserved) {
    schedule_deadline(rec, TimerKind::kReservation, order.reserve_deadline_ms);
    // It counts against its client's cap again (an order stored before the
    // client was, has none).
    if (options.max_open_reservations_per_client > 0 && !order.client.empty()) {
      orders_.hold_for(rec, order.client);
    }
  } else {
    // PAID is only ever written together with DISPATCHED, in one commit.
    log.error(detail::kLog, "order " + order.id + " is PAID but not DISPATCHED: needs an operator");
  }
}

Result<std::optional<Order>> OrderDesk::find_by_idempotency_key(const std::string& key,
                                                                const LogRead* read) {
  if (OrderRec* rec = orders_.find_by_key(key)) return std::optional<Order>(rec->order);
  if (orders_.all_in_memory()) return std::optional<Order>();
  if (read == nullptr) return make_error(kMustRead, key);
  if (!read->ok()) return make_error("unavailable", read->error().to_string());
  const std::optional<Order>& stored = **read;
  if (!stored.has_value()) return std::optional<Order>();
  // Read off the core thread: it may have entered memory meanwhile.
  if (OrderRec* rec = orders_.find(stored->id)) return std::optional<Order>(rec->order);
  auto rec = adopt_stored(stored->id, stored);
  if (!rec.ok()) return rec.error();
  return std::optional<Order>((*rec)->order);
}

Result<Order> OrderDesk::create_order(const std::string& device, int slot,
                                      const std::string& client, const std::string& key,
                                      Ticket& durable, const LogRead* key_read) {
  if (auto owner = owner_check(device); !owner.ok()) return owner.error();
  if (key.size() > kMaxScopedKey) return make_error("bad_request", "idempotency key too long");
  if (!writes_.started) return make_error("unavailable", "the agent core is not started");
  // Every machine this core serves is in memory: an unknown one costs no
  // read of the log, whatever the key.
  if (devices_.find(device) == nullptr)
    return make_error("not_found", "no device '" + device + "'");
  if (!key.empty()) {
    auto existing = find_by_idempotency_key(key, key_read);
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
  // No broker connection: no new reservation. Its payment could not be
  // dispatched, and the customer would pay for a refund; an idempotent
  // repeat of one made before (above) is still answered.
  if (!out_.connected) {
    ++counters.reservations_rejected_total;
    ++counters.reservations_broker_unreachable_total;
    return make_error("broker_unreachable",
                      "the agent has no connection to the machines' broker; retry shortly");
  }
  auto slot_rec = sellable_slot(device, slot);
  if (!slot_rec.ok()) return slot_rec.error();
  // Storage first: with the repository failing the order is refused here,
  // before any token moves, so nothing is half-written.
  if (auto s = writes_.writable(); !s.ok()) return s.error();
  // The check-and-take: the pool is the one stock truth (a token in it is
  // sellable); open_reservation takes its front in the same step.
  if ((*slot_rec)->pool.empty()) {
    ++counters.reservations_rejected_total;
    return make_error("sold_out", device + " slot " + std::to_string(slot) + " is sold out");
  }
  const size_t cap = options.max_open_reservations_per_client;
  if (cap > 0 && !client.empty()) {
    size_t held = orders_.reservations_of(client);
    if (held >= cap) {
      ++counters.reservations_rejected_total;
      return make_error("too_many_reservations",
                        "this client already holds " + std::to_string(held) +
                            " unpaid reservations (at most " + std::to_string(cap) +
                            "): pay or cancel one first");
    }
  }
  OrderRec& rec = open_reservation(device, slot, **slot_rec, client, key);
  if (cap > 0 && !client.empty()) orders_.hold_for(rec, client);
  durable = rec.last_write;
  return rec.order;
}

Result<StockSlot*> OrderDesk::sellable_slot(const std::string& device, int slot) {
  DeviceRecord* dev = devices_.find(device);
  if (dev == nullptr) return make_error("not_found", "no device '" + device + "'");
  // One look-up of the name per reservation: the device's stock is kept.
  if (device_slots_.size() <= dev->index) device_slots_.resize(devices_.size(), nullptr);
  Stock::Slots*& slots = device_slots_[dev->index];
  if (slots == nullptr) slots = stock_.slots_of(device);
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
OrderRec& OrderDesk::open_reservation(const std::string& device, int slot, StockSlot& slot_rec,
                                      const std::string& client, const std::string& key) {
  Order o;
  o.id = new_order_id(clock.wall_ms(), random);
  o.device = device;
  o.slot = slot;
  auto token = stock_.take(slot_rec);
  assert(token.has_value());
  o.token = std::move(*token);
  o.price_cents = slot_rec.spec.price_cents;
  o.state = OrderState::kReserved;
  o.created_ms = o.updated_ms = clock.wall_ms();
  o.reserve_deadline_ms = o.created_ms + options.reservation_ttl_ms;
  o.idempotency_key = key;
  o.client = client;

  OrderRec& rec = orders_.add_open(std::move(o), true);
  anchor_time(rec);
  Changeset changes;
  changes.reserve(2);
  changes.insert_order(rec.order);
  changes.move_token(rec.order.token, TokenState::kPool, TokenState::kReserved, rec.order.id);
  ++counters.reservations_total;
  out_.ops_order_event(rec, "");
  schedule_deadline(rec, TimerKind::kReservation, rec.order.reserve_deadline_ms);
  rec.last_write = rec.durable = writes_.commit(std::move(changes));
  return rec;
}

void OrderDesk::move_token(OrderRec& rec, TokenState from, TokenState to, Changeset& changes) {
  const Order& o = rec.order;
  if (from == to) return;
  if (to == TokenState::kPool) {
    rec.holds_token = false;  // the pool's again
    if (from == TokenState::kReserved) {
      stock_.put_back_reserved(o.device, o.slot, o.token);
    } else {
      assert(from == TokenState::kDispatched);
      stock_.put_back_dispatched(o.device, o.slot, o.token);
    }
    changes.move_token(o.token, from, TokenState::kPool, "");
    return;
  }
  if (from == TokenState::kBurned) {  // a review resolved as dispensed
    assert(to == TokenState::kSold);
    if (stock_.find(o.device, o.slot) == nullptr) return;
    stock_.burned_to_sold(o.device, o.slot);
  } else if (from == TokenState::kReserved && to == TokenState::kDispatched) {
    if (stock_.find(o.device, o.slot) != nullptr) stock_.dispatch(o.device, o.slot);
  } else if (from == TokenState::kReserved) {
    assert(to == TokenState::kBurned);
    stock_.burn_reserved(o.device, o.slot);
  } else {
    assert(from == TokenState::kDispatched);
    if (to == TokenState::kSold) {
      stock_.spend_sold(o.device, o.slot);
    } else {
      assert(to == TokenState::kBurned);
      stock_.spend_burned(o.device, o.slot);
    }
  }
  changes.move_token(o.token, from, to, o.id);
}

void OrderDesk::settle(OrderRec& rec, const rules::Settlement& s, Changeset& changes) {
  move_token(rec, s.token_from, s.token, changes);
  if (!s.reason.empty()) rec.order.reason = s.reason;
  if (s.to != OrderState::kRefunded) set_state(rec, s.to, changes, s.detail);
  if (!s.refund_reason.empty()) refund_order(rec, s.refund_reason, changes);
}

Status OrderDesk::settle_and_commit(OrderRec& rec, const rules::Settlement& settlement) {
  if (auto s = writes_.writable(); !s.ok()) return s;
  Changeset changes;
  settle(rec, settlement, changes);
  rec.last_write = writes_.commit(std::move(changes));
  return {};
}

Result<Order> OrderDesk::cancel(const std::string& order_id, const LogRead* read) {
  auto found = order_for_request(order_id, read);
  if (!found.ok()) return found.error();
  if (*found == nullptr) return make_error("not_found", "no order '" + order_id + "'");
  OrderRec& rec = **found;
  auto decision = rules::decide_cancel(rec.order);
  if (decision.kind == rules::RequestDecision::Kind::kRepeat) return rec.order;
  if (decision.kind == rules::RequestDecision::Kind::kRefuse) {
    return make_error("invalid_state", "order " + order_id + " is " + to_string(rec.order.state) +
                                           "; only RESERVED cancels");
  }
  if (auto s = settle_and_commit(rec, decision.settlement); !s.ok()) return s.error();
  return rec.order;
}

Result<Order> OrderDesk::resolve_review(const std::string& order_id, bool dispensed,
                                        const std::string& by, const std::string& note,
                                        const LogRead* read) {
  if (auto s = detail::check_text("by", by, kMaxReviewText, false); !s.ok()) return s.error();
  bool clean = note.size() <= kMaxReviewText;
  for (unsigned char c : note) clean = clean && c >= 0x20 && c != 0x7f;
  if (!clean) return make_error("bad_request", "note: at most 256 bytes, no control characters");
  auto found = order_for_request(order_id, read);
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
  if (auto s = settle_and_commit(rec, decision.settlement); !s.ok()) return s.error();
  log.info(detail::kLog, "order " + order_id + " review resolved: " + why);
  return rec.order;
}

void OrderDesk::expire_reservation(OrderRec& rec, const std::string& why) {
  auto settlement = rules::decide_expiry(rec.order, why);
  if (!settlement) return;
  if (!settle_and_commit(rec, *settlement).ok()) return;  // the sweep tries again
  log.info(detail::kLog, "order " + rec.order.id + " expired; token back in the pool");
}

std::vector<Order> OrderDesk::list_orders(std::optional<OrderState> state, size_t limit,
                                          const std::string& device) {
  if (limit == 0) limit = kDefaultListLimit;
  limit = std::min(limit, kMaxListLimit);
  std::vector<const Order*> matching;
  orders_.for_each([&](const OrderRec& rec) {
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

void OrderDesk::set_state(OrderRec& rec, OrderState to, Changeset& changes,
                          const std::string& detail) {
  OrderState from = rec.order.state;
  assert(is_legal_transition(from, to));
  bool finished = orders_.set_state(rec, to);
  rec.order.updated_ms = clock.wall_ms();
  changes.transition_order(rec.order, from, detail);
  out_.ops_order_event(rec, to_string(from));
  writes_.touch(rec.ref);
  if (finished) cancel_timers(rec);
}

Ticket OrderDesk::durable_ticket(const std::string& order_id) {
  OrderRec* rec = orders_.find(order_id);
  if (rec == nullptr || !rec->last_write.valid()) return detail::ready_ticket();
  return rec->last_write;
}

Result<OrderRec*> OrderDesk::find_or_load_order(const std::string& order_id) {
  if (OrderRec* rec = orders_.find(order_id)) return served(rec);
  if (orders_.all_in_memory()) return static_cast<OrderRec*>(nullptr);
  // Not in memory: finished long ago (evicted), or unknown.
  auto stored = repo.find_order(order_id);
  if (!stored.ok()) return make_error("unavailable", stored.error().to_string());
  return adopt_stored(order_id, *stored);
}

Result<OrderRec*> OrderDesk::order_for_request(const std::string& order_id, const LogRead* read) {
  if (OrderRec* rec = orders_.find(order_id)) return served(rec);
  if (orders_.all_in_memory() || !could_be_order_id(order_id, clock.wall_ms())) {
    return static_cast<OrderRec*>(nullptr);
  }
  if (read == nullptr) return make_error(kMustRead, order_id);
  if (!read->ok()) return make_error("unavailable", read->error().to_string());
  return adopt_stored(order_id, **read);
}

// An order in memory whose machine this core does not serve now (its lease
// is not valid here: a pause or partition past it, a shard leaving) is
// answered not_owner, never from what memory held: the redirect finds its
// owner.
Result<OrderRec*> OrderDesk::served(OrderRec* rec) const {
  if (auto s = owner_check(rec->order.device); !s.ok()) return s.error();
  return rec;
}

Result<OrderRec*> OrderDesk::adopt_stored(const std::string& order_id,
                                          const std::optional<Order>& stored) {
  if (!stored.has_value()) return static_cast<OrderRec*>(nullptr);
  if (auto s = owner_check(stored->device); !s.ok()) return s.error();
  if (is_open(stored->state)) {
    log.error(detail::kLog, "open order " + order_id + " was not in memory");
    return make_error("unavailable", "order " + order_id + " is inconsistent; restart");
  }
  OrderRec& rec = orders_.add_finished(*stored);
  rec.last_write = rec.durable = detail::ready_ticket();
  return &rec;
}

}  // namespace vend::agent
