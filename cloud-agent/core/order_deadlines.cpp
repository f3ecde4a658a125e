// OrderDesk: time. The timing wheel fires reservation and dispatch deadlines
// and resends on the monotonic clock: a deadline is stored in wall-clock ms
// (and sent to the device), but measured from the order's anchor
// (order_now), so stepping the wall clock expires, reviews or delays
// nothing. A periodic sweep over the open orders is the backstop for any
// deadline the wheel missed.
#include <utility>
#include <vector>

#include "core/order_desk.hpp"
#include "core/output.hpp"
#include "core/writes.hpp"

namespace vend::agent {

int64_t OrderDesk::order_now(const OrderRec& rec) const {
  return saturating_add(clock.monotonic_ms(), rec.wall_offset_ms);
}

void OrderDesk::anchor_time(OrderRec& rec) const {
  rec.wall_offset_ms = clock.wall_ms() - clock.monotonic_ms();
}

void OrderDesk::schedule_deadline(OrderRec& rec, TimerKind kind, int64_t at_ms) {
  deadlines_.schedule(rec.deadline_timer, kind, rec.ref,
                      saturating_add(at_ms, -rec.wall_offset_ms));
}

void OrderDesk::schedule_resend(OrderRec& rec, int64_t delay_ms) {
  deadlines_.schedule(rec.resend_timer, TimerKind::kResend, rec.ref,
                      clock.monotonic_ms() + delay_ms);
}

void OrderDesk::cancel_timers(OrderRec& rec) {
  deadlines_.cancel(rec.deadline_timer);
  deadlines_.cancel(rec.resend_timer);
}

// A timer acts only while it is its slot's: one cancelled or replaced after
// it fell due (by an earlier timer of the same tick) is dropped here.
void OrderDesk::fire_timer(const FiredTimer& timer) {
  OrderRec* rec = orders_.at(timer.subject);
  if (rec == nullptr) return;
  TimerSlot& slot = timer.kind == TimerKind::kResend ? rec->resend_timer : rec->deadline_timer;
  if (!Deadlines::take(slot, timer)) return;
  if (!serves(rec->order.device)) {
    // Its shard's lease is not valid here now (a pause or a partition past
    // it, or the shard is leaving): the timer waits instead of deciding for
    // a machine another instance may own. A rebuild drops it; a renewed
    // lease lets it fire.
    return deadlines_.schedule(slot, timer.kind, rec->ref,
                               clock.monotonic_ms() + detail::kUnservedRetryMs);
  }
  switch (timer.kind) {
    case TimerKind::kReservation:
      // Re-checked: a timer never decides before its deadline.
      if (order_now(*rec) < rec->order.reserve_deadline_ms) {
        return schedule_deadline(*rec, timer.kind, rec->order.reserve_deadline_ms);
      }
      expire_reservation(*rec, "reservation expired");
      break;
    case TimerKind::kReconcile:
    case TimerKind::kRestockResend: break;  // a device's (DeviceDesk::fire_timer)
    case TimerKind::kDispatchDeadline: on_dispatch_deadline(*rec); break;
    case TimerKind::kResend: on_resend(*rec); break;
  }
}

// A DISPATCHED order without a result past expires_at + skew. Do not guess:
// the device stores every result, or still holds the token. Ask it; after
// dispatch_review_ms without a result, an operator decides.
void OrderDesk::on_dispatch_deadline(OrderRec& rec) {
  auto* dev = devices_.find(rec.order.device);
  if (dev == nullptr) return;
  auto decision = rules::decide_dispatch_deadline(
      rec.order, order_now(rec), options.dispatch_ttl_ms, options.dispatch_review_ms);
  switch (decision.kind) {
    case rules::DeadlineDecision::Kind::kNone: return;
    case rules::DeadlineDecision::Kind::kReview: return send_to_review(rec, decision.settlement);
    case rules::DeadlineDecision::Kind::kCheck: break;
  }
  log.info(detail::kLog, "order " + rec.order.id + " has no result past its deadline; checking " +
                             rec.order.device);
  out_.request_check_snapshot(*dev);
  schedule_deadline(rec, TimerKind::kDispatchDeadline,
                    order_now(rec) + options.dispatch_recheck_ms);
}

void OrderDesk::send_to_review(OrderRec& rec, const rules::Settlement& settlement) {
  if (!settle_and_commit(rec, settlement).ok()) return;  // the recheck tries again
  log.warn(detail::kLog,
           "order " + rec.order.id + ": no result from " + rec.order.device + "; NEEDS_REVIEW");
}

// A full snapshot arrived: each of the device's overdue DISPATCHED orders
// is settled or its result asked for again (rules::decide_overdue).
void OrderDesk::resolve_overdue(const std::string& device, int64_t device_ts_ms,
                                const proto::Snapshot& snapshot, Changeset& changes) {
  std::vector<std::pair<OrderRec*, rules::OverdueDecision>> overdue;
  for (OrderRef ref : orders_.open_orders()) {
    OrderRec& rec = *orders_.at(ref);
    if (rec.order.device != device) continue;
    auto decision = rules::decide_overdue(rec.order, snapshot, device_ts_ms, order_now(rec),
                                          options.expiry_skew_ms);
    if (decision.kind != rules::OverdueDecision::Kind::kNone) {
      overdue.emplace_back(&rec, std::move(decision));
    }
  }
  // Applied after the walk: a settled order leaves the open orders.
  for (auto& [rec, decision] : overdue) {
    if (decision.kind == rules::OverdueDecision::Kind::kAskResult) {
      log.info(detail::kLog, "order " + rec->order.id + ": token spent on the device; " +
                                 "asking it to report the result again");
      publish_dispense(*rec);
      continue;
    }
    settle(*rec, decision.settlement, changes);
    log.info(detail::kLog, "order " + rec->order.id + " on " + device + ": refunded, " +
                               decision.settlement.detail + ", token " +
                               to_string(decision.settlement.token));
  }
}

void OrderDesk::on_resend(OrderRec& rec) {
  if (rec.order.state != OrderState::kDispatched) return;
  if (order_now(rec) >= rec.order.dispatch_expires_at_ms) return;  // the deadline check takes over
  publish_dispense(rec);
}

size_t OrderDesk::republish_dispatched(const std::string& device) {
  if (orders_.state_counts()[static_cast<size_t>(OrderState::kDispatched)] == 0) return 0;
  size_t sent = 0;
  for (OrderRef ref : orders_.open_orders()) {
    OrderRec& rec = *orders_.at(ref);
    if (rec.order.state != OrderState::kDispatched) continue;
    if (!device.empty() && rec.order.device != device) continue;
    if (order_now(rec) >= rec.order.dispatch_expires_at_ms) continue;
    // A new connection is a new way through: if this copy is lost too, the
    // next one goes command_resend_ms later, not after the backoff reached
    // so far (which may lie past the command's expiry).
    rec.command_sends = 0;
    publish_dispense(rec);
    ++sent;
  }
  return sent;
}

void OrderDesk::sweep() {
  for (OrderRef ref : orders_.open_orders()) {
    OrderRec* rec = orders_.at(ref);
    if (rec == nullptr) continue;
    const Order& o = rec->order;
    if (!serves(o.device)) continue;  // not this instance's to decide now
    int64_t now = order_now(*rec);
    if (o.state == OrderState::kReserved && now >= o.reserve_deadline_ms) {
      expire_reservation(*rec, "reservation expired");
    } else if (o.state == OrderState::kDispatched && !rec->deadline_timer.pending() &&
               now >= o.dispatch_expires_at_ms + options.expiry_skew_ms) {
      on_dispatch_deadline(*rec);
    }
  }
}

void OrderDesk::evict_finished() {
  orders_.evict_finished(options.finished_orders_max, [this](const OrderRec& rec) {
    for (const auto& p : rec.payment_ids) payments_.forget(p);
    if (rec.holds_token) stock_.forget(rec.order.token);
  });
}

}  // namespace vend::agent
