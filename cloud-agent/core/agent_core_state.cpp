// AgentCore::State: start-up from the repository, submitting writes, order
// state bookkeeping, timers and metrics.
#include <algorithm>
#include <cassert>

#include "agent_state.hpp"
#include "vend/topics.hpp"

namespace vend::agent {

namespace detail {

Ticket ready_ticket(Status status) {
  std::promise<Status> p;
  p.set_value(std::move(status));
  return p.get_future().share();
}

Status check_text(const std::string& what, const std::string& value, size_t max_len,
                  bool allow_empty) {
  if (value.empty()) {
    if (allow_empty) return {};
    return make_error("bad_request", what + " is empty");
  }
  if (value.size() > max_len) {
    return make_error("bad_request", what + " is longer than " + std::to_string(max_len));
  }
  for (unsigned char c : value) {
    if (c < 0x21 || c > 0x7e) return make_error("bad_request", what + " has a non-printable byte");
  }
  return {};
}

}  // namespace detail

AgentCore::State::State(Repository& repo_, const Clock& clock_, Random& random_, Logger& log_,
                        AgentOptions options_)
    : repo(repo_),
      clock(clock_),
      random(random_),
      log(log_),
      options(options_),
      deadlines(clock_.wall_ms(), 10),
      payments(RefundRetryPolicy{options_.refund_retry_base_ms, options_.refund_retry_max_ms,
                                 options_.refund_max_attempts}),
      ops_views(options_.ops_interval_ms),
      reject_log(clock_, log_, RateLimitedLog::Options{options_.reject_log_interval_ms, 256}) {}

// ---- start-up ----------------------------------------------------------------

Status AgentCore::State::start() {
  if (started) return make_error("invalid_state", "start() was already called");
  auto loaded = repo.load(options.finished_orders_max);
  if (!loaded.ok()) return loaded.error();
  if (owns) keep_owned(*loaded);
  if (auto s = load_devices(*loaded); !s.ok()) return s;
  load_orders(*loaded);
  payments.load_refunds(loaded->pending_refunds, clock.wall_ms());
  started = true;
  last_sweep_mono_ms = clock.monotonic_ms();
  for (auto& [id, dev] : devices) {
    schedule_reconcile(dev, first_reconcile_at(id));
    mark_device_dirty(id);
    if (owns) subscribe_device(id);
  }
  // A crash between the DISPATCHED commit and the publish loses the
  // command: publish every live one again (the device dedups by order id).
  size_t republished = 0;
  for (OrderRef ref : orders.open_orders()) {
    OrderRec& rec = *orders.at(ref);
    if (rec.order.state != OrderState::kDispatched) continue;
    if (clock.wall_ms() >= rec.order.dispatch_expires_at_ms) continue;
    publish_dispense(rec);
    ++republished;
  }
  log.info(detail::kLog, "started: " + std::to_string(devices.size()) + " devices, " +
                             std::to_string(orders.open_count()) + " open orders, " +
                             std::to_string(loaded->pool.size()) + " tokens for sale, " +
                             std::to_string(republished) + " commands re-sent");
  return {};
}

void AgentCore::State::keep_owned(LoadedState& loaded) const {
  auto keep = [this](auto& rows, auto key_of) {
    std::erase_if(rows, [&](const auto& row) { return !owns(key_of(row)); });
  };
  // A payment's order may be evicted from the load (finished long ago) or
  // unknown: then its order id decides. A refund names its machine (schema
  // v8; one written before is given its order's, if loaded): it is held,
  // and its writes fenced, by owner_key().
  std::unordered_map<std::string, std::string> device_of;
  for (const auto* orders_of : {&loaded.open_orders, &loaded.recent_orders}) {
    for (const Order& o : *orders_of) device_of[o.id] = o.device;
  }
  keep(loaded.devices, [](const LoadedState::Device& d) { return d.id; });
  keep(loaded.slots, [](const LoadedState::Slot& s) { return s.device; });
  keep(loaded.pool, [](const LoadedState::PoolToken& t) { return t.device; });
  keep(loaded.requested, [](const StoredRestock& r) { return r.device; });
  keep(loaded.open_orders, [](const Order& o) { return o.device; });
  keep(loaded.recent_orders, [](const Order& o) { return o.device; });
  keep(loaded.payments, [&](const StoredPayment& p) {
    auto it = device_of.find(p.order_id);
    return it == device_of.end() ? p.order_id : it->second;
  });
  for (StoredRefund& r : loaded.pending_refunds) {
    if (!r.device.empty()) continue;
    if (auto it = device_of.find(r.order_id); it != device_of.end()) r.device = it->second;
  }
  keep(loaded.pending_refunds, [](const StoredRefund& r) { return owner_key(r); });
  // The log's counts are the fleet's; this instance counts what it holds.
  loaded.order_counts.clear();
  for (const auto* orders_of : {&loaded.open_orders, &loaded.recent_orders}) {
    for (const Order& o : *orders_of) ++loaded.order_counts[o.state];
  }
}

Status AgentCore::State::owner_check(const std::string& device) const {
  if (serves(device)) return {};
  return make_error("not_owner", device);
}

void AgentCore::State::subscribe_device(const std::string& device) {
  if (!subscribed_devices.insert(device).second) return;
  effects.subscribes.push_back(topics::device_evt(device));
  effects.subscribes.push_back(topics::device_status(device));
}

Status AgentCore::State::load_devices(const LoadedState& loaded) {
  for (const auto& d : loaded.devices) {
    auto key = crypto::Key::from_hex(d.key_hex);
    if (!key.ok())
      return make_error("corrupt", "key of device " + d.id + ": " + key.error().message);
    DeviceRecord& dev = devices.add(d.id);
    dev.keys = DeviceKeys(std::move(key).value());
    dev.created_ms = d.created_ms;
    dev.acks.restore(d.last_processed_seq);
    dev.ledger_id = d.ledger_id;
    dev.decommissioned_ms = d.decommissioned_ms;
    if (!d.next_key_hex.empty()) {
      auto next = crypto::Key::from_hex(d.next_key_hex);
      if (!next.ok())
        return make_error("corrupt", "next key of device " + d.id + ": " + next.error().message);
      dev.keys.issue_next(std::move(next).value());
    }
    dev.retired_ledgers.insert(d.retired_ledgers.begin(), d.retired_ledgers.end());
  }
  for (const auto& s : loaded.slots) {
    if (!devices.contains(s.device)) continue;
    stock.load_slot(s.device, s.spec, s.sold, s.burned);
  }
  for (const auto& t : loaded.pool) stock.load_pool_token(t.device, t.slot, t.token);
  for (const auto& r : loaded.requested) restocks.put(r);
  return {};
}

void AgentCore::State::load_orders(const LoadedState& loaded) {
  for (const auto& o : loaded.open_orders) restore_order(o);
  // recent_orders is newest first; the book's eviction queue oldest first.
  for (auto it = loaded.recent_orders.rbegin(); it != loaded.recent_orders.rend(); ++it) {
    OrderRec& rec = orders.add_finished(*it);
    rec.last_write = rec.durable = detail::ready_ticket();
  }
  for (const auto& p : loaded.payments) {
    payments.record(p.payment_id,
                    PaymentRecord{p.order_id, p.amount_cents, p.outcome, detail::ready_ticket()});
    if (OrderRec* rec = orders.find(p.order_id)) rec->payment_ids.push_back(p.payment_id);
  }
  orders.load_counts(loaded.order_counts);
  int64_t total = 0;
  for (const auto& [state, n] : loaded.order_counts) total += n;
  // Cluster mode: the log holds other instances' orders, which a request
  // may name (answered not_owner, and redirected).
  orders.set_all_in_memory(!owns && total == static_cast<int64_t>(loaded.open_orders.size() +
                                                                  loaded.recent_orders.size()));
}

void AgentCore::State::restore_order(const Order& order) {
  OrderRec& rec = orders.add_open(order, false);
  rec.last_write = rec.durable = detail::ready_ticket();
  stock.restore_held(order.device, order.slot, order.token, order.state == OrderState::kDispatched);
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
      orders.hold_for(rec, order.client);
    }
  } else {
    // PAID is only ever written together with DISPATCHED, in one commit.
    log.error(detail::kLog, "order " + order.id + " is PAID but not DISPATCHED: needs an operator");
  }
}

// ---- writes ------------------------------------------------------------------

Status AgentCore::State::writable() {
  if (!started) return make_error("unavailable", "the agent core is not started");
  if (!storage_failed && repo.has_failed_writes()) {
    fail_storage("a repository write failed");
  }
  if (storage_failed) {
    return make_error("unavailable", "storage failed; restart the agent to recover");
  }
  if (draining || fenced) {
    return make_error("unavailable",
                      "this instance's shards are moving between agents; retry in a second");
  }
  if (!repo.accepting()) return make_error("unavailable", "write queue full; retry later");
  return {};
}

// Cluster mode: the changeset names the devices whose data it writes, so
// the fence checks their shards; the records without a device (token moves,
// payments, new refunds) name them through their orders; a refund's update
// is fenced by refund_attempted().
void AgentCore::State::fence_devices(Changeset& changes) {
  auto order_device = [&](const std::string& order_id) {
    if (OrderRec* rec = orders.find(order_id)) changes.fence_device(rec->order.device);
  };
  for (OrderRef ref : touched) {
    if (OrderRec* rec = orders.at(ref)) changes.fence_device(rec->order.device);
  }
  for (const Change& c : changes.changes()) {
    if (const auto* m = std::get_if<change::MoveToken>(&c)) {
      order_device(m->order_id);
    } else if (const auto* p = std::get_if<change::InsertPayment>(&c)) {
      order_device(p->payment.order_id);
    } else if (const auto* r = std::get_if<change::InsertRefund>(&c)) {
      order_device(r->refund.order_id);
    }
  }
}

Ticket AgentCore::State::commit(Changeset changes) {
  if (owns) fence_devices(changes);
  auto ticket = repo.submit(std::move(changes));
  if (!ticket.ok()) {
    fail_storage("submit refused after writable(): " + ticket.error().to_string());
    touched.clear();
    payments.drop_staged();
    return detail::ready_ticket(ticket.error());
  }
  for (OrderRef ref : touched) {
    if (OrderRec* rec = orders.at(ref)) rec->last_write = *ticket;
  }
  touched.clear();
  payments.committed(*ticket);
  return *ticket;
}

void AgentCore::State::write_failed(const Error& e, const std::string& what) {
  if (e.code != "fenced") return fail_storage(what + ": " + e.to_string());
  if (!fenced) {
    log.warn(detail::kLog, "a write was refused by the fence (" + what + ": " + e.message +
                               "): no more writes until the shards are rebuilt");
  }
  fenced = true;
}

void AgentCore::State::fail_storage(const std::string& why) {
  if (!storage_failed) {
    log.error(detail::kLog,
              "storage failed, the core stops changing state until a restart: " + why);
  }
  storage_failed = true;
}

void AgentCore::State::set_state(OrderRec& rec, OrderState to, Changeset& changes,
                                 const std::string& detail) {
  OrderState from = rec.order.state;
  assert(is_legal_transition(from, to));
  bool finished = orders.set_state(rec, to);
  rec.order.updated_ms = clock.wall_ms();
  changes.transition_order(rec.order, from, detail);
  ops_order_event(rec, to_string(from));
  touched.push_back(rec.ref);
  if (finished) cancel_timers(rec);
}

Ticket AgentCore::State::durable_ticket(const std::string& order_id) {
  OrderRec* rec = orders.find(order_id);
  if (rec == nullptr || !rec->last_write.valid()) return detail::ready_ticket();
  return rec->last_write;
}

Result<OrderRec*> AgentCore::State::find_or_load_order(const std::string& order_id) {
  if (OrderRec* rec = orders.find(order_id)) return rec;
  if (orders.all_in_memory()) return static_cast<OrderRec*>(nullptr);
  // Not in memory: finished long ago (evicted), or unknown.
  auto stored = repo.find_order(order_id);
  if (!stored.ok()) return make_error("unavailable", stored.error().to_string());
  if (!stored->has_value()) return static_cast<OrderRec*>(nullptr);
  if (auto s = owner_check((*stored)->device); !s.ok()) return s.error();
  if (is_open((*stored)->state)) {
    log.error(detail::kLog, "open order " + order_id + " was not in memory");
    return make_error("unavailable", "order " + order_id + " is inconsistent; restart");
  }
  OrderRec& rec = orders.add_finished(**stored);
  rec.last_write = rec.durable = detail::ready_ticket();
  return &rec;
}

// ---- timers --------------------------------------------------------------------

void AgentCore::State::schedule_deadline(OrderRec& rec, TimerKind kind, int64_t at_ms) {
  deadlines.schedule(rec.deadline_timer, kind, rec.ref, at_ms);
}

void AgentCore::State::schedule_resend(OrderRec& rec, int64_t at_ms) {
  if (rec.resend_timer.pending()) return;
  deadlines.schedule(rec.resend_timer, TimerKind::kResend, rec.ref, at_ms);
}

void AgentCore::State::cancel_timers(OrderRec& rec) {
  deadlines.cancel(rec.deadline_timer);
  deadlines.cancel(rec.resend_timer);
}

// A timer acts only while it is its slot's: one cancelled or replaced after
// it fell due (by an earlier timer of the same tick) is dropped here.
void AgentCore::State::fire_timer(const FiredTimer& timer) {
  if (timer.kind == TimerKind::kReconcile) {
    DeviceRecord* dev = devices.at_index(timer.subject);
    if (dev == nullptr || !Deadlines::take(dev->reconcile_timer, timer)) return;
    return on_reconcile_timer(dev->id);
  }
  OrderRec* rec = orders.at(timer.subject);
  if (rec == nullptr) return;
  TimerSlot& slot = timer.kind == TimerKind::kResend ? rec->resend_timer : rec->deadline_timer;
  if (!Deadlines::take(slot, timer)) return;
  switch (timer.kind) {
    case TimerKind::kReservation: expire_reservation(*rec, "reservation expired"); break;
    case TimerKind::kReconcile: break;  // handled above
    case TimerKind::kDispatchDeadline: on_dispatch_deadline(*rec); break;
    case TimerKind::kResend: on_resend(*rec); break;
  }
}

// ---- output and checks -----------------------------------------------------------

Status AgentCore::State::publish_command(const DeviceRecord& device, const proto::Command& command,
                                         const std::string& order_id) {
  if (!connected) {
    log.warn(detail::kLog, std::string(proto::type_name(command)) + " to " + device.id +
                               " not published: the broker connection is down");
    return make_error("not_connected", "the broker connection is down");
  }
  std::string mac = crypto::sign(device.keys.current(), proto::encode_canonical(command));
  effects.publishes.push_back(detail::Publish{
      Message{topics::device_cmd(device.id), proto::encode(command, mac), 1, false}, order_id});
  return {};
}

void AgentCore::State::publish_failed(const std::string& order_id) {
  OrderRec* rec = orders.find(order_id);
  if (rec == nullptr || rec->order.state != OrderState::kDispatched) return;
  rec->command_published = false;
  schedule_resend(*rec, clock.wall_ms() + options.busy_retry_ms);
}

detail::Effects AgentCore::State::take_effects() {
  detail::Effects out = std::move(effects);
  effects = {};
  return out;
}

void AgentCore::State::evict_finished() {
  orders.evict_finished(options.finished_orders_max, [this](const OrderRec& rec) {
    for (const auto& p : rec.payment_ids) payments.forget(p);
    if (rec.holds_token) stock.forget(rec.order.token);
  });
}

AgentMetrics AgentCore::State::take_metrics() {
  AgentMetrics m = counters;
  counters.dispatch_latency_ms.clear();
  for (size_t i = 0; i < kOrderStateCount; ++i) {
    m.orders_by_state.emplace_back(to_string(static_cast<OrderState>(i)), orders.state_counts()[i]);
  }
  for (const auto& [id, dev] : devices) {
    if (dev.online) ++m.devices_online;
    if (auto skew = dev.clock_skew.skew_ms()) m.device_clock_skew_ms.emplace_back(id, *skew);
  }
  m.stock_total = stock.pool_total();
  m.storage_failed = storage_failed;
  m.refunds_pending = static_cast<int64_t>(payments.refunds_pending());
  m.alerts_active = alerts.counts_by_code();
  return m;
}

}  // namespace vend::agent
