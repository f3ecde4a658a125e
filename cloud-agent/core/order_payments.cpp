// OrderDesk: payment notifications. A payment either pays a RESERVED order
// (which is then dispatched) or is refunded; it is recorded once per
// payment id, and a repeat of the same id gets the same answer.
#include <algorithm>

#include "core/order_desk.hpp"
#include "core/output.hpp"
#include "core/writes.hpp"

namespace vend::agent {

namespace {
constexpr size_t kMaxPaymentId = 128;
}  // namespace

using detail::PayStep;

Result<std::optional<PaymentRecord>> OrderDesk::find_payment(const std::string& payment_id) {
  if (const PaymentRecord* p = payments_.find(payment_id)) return std::optional(*p);
  if (orders_.all_in_memory()) return std::optional<PaymentRecord>();
  auto stored = repo.find_payment(payment_id);  // an order evicted from memory
  if (!stored.ok()) return make_error("unavailable", stored.error().to_string());
  if (!stored->has_value()) return std::optional<PaymentRecord>();
  const StoredPayment& p = **stored;
  return std::optional(
      PaymentRecord{p.order_id, p.amount_cents, p.outcome, detail::ready_ticket()});
}

Result<PayStep> OrderDesk::pay(const std::string& order_id, const std::string& payment_id,
                               int64_t amount_cents) {
  if (auto s = detail::check_text("payment id", payment_id, kMaxPaymentId, false); !s.ok()) {
    return s.error();
  }
  if (amount_cents < 0) return make_error("bad_request", "amount_cents is negative");
  if (!writes_.started) return make_error("unavailable", "the agent core is not started");
  auto known = find_payment(payment_id);
  if (!known.ok()) return known.error();
  auto found = find_or_load_order(order_id);
  if (!found.ok()) return found.error();
  if (known->has_value()) {
    const PaymentRecord& p = **known;
    if (p.order_id != order_id) {
      return make_error("conflict", "payment " + payment_id + " belongs to order " + p.order_id);
    }
    // Same id, same answer.
    return PayStep{*found == nullptr ? unknown_order(order_id) : (*found)->order, p.outcome,
                   p.recorded};
  }
  if (*found == nullptr && !serves(order_id)) {
    // Several agents: an order none of them has belongs, with its payment
    // and refund, to the owner of its id's shard (as after a restart), so
    // two instances never record the same payment at once.
    return make_error("not_owner", order_id);
  }
  // One check, then one commit below: whatever the payment does (expire
  // and refund included) is one changeset, so a queue with room for one
  // write takes it whole, and a full one refuses it with nothing changed.
  if (auto s = writes_.writable(); !s.ok()) return s.error();
  if (*found == nullptr) return refund_unknown_order(order_id, payment_id, amount_cents);
  OrderRec& rec = **found;
  rules::PaymentDecision decision = rules::decide_payment(rec.order, amount_cents, order_now(rec));
  if (decision.kind == rules::PaymentDecision::Kind::kDispatch) {
    return dispatch_paid(rec, payment_id, amount_cents);
  }
  Changeset changes;
  // Past the deadline but the timer has not fired yet: it expires first,
  // in the refund's changeset (RESERVED -> EXPIRED -> REFUNDED).
  if (decision.expire_first) {
    if (Status s = expire_with_payment(rec, changes); !s.ok()) return s.error();
  }
  if (rec.order.state == OrderState::kReserved) {  // the amount is not the price
    log.warn(detail::kLog, "payment " + payment_id + " of " + std::to_string(amount_cents) +
                               " for order " + rec.order.id + " priced " +
                               std::to_string(rec.order.price_cents) + ": refunded");
  }
  return refund_payment(rec, payment_id, amount_cents, decision, std::move(changes));
}

Status OrderDesk::expire_with_payment(OrderRec& rec, Changeset& changes) {
  auto settlement = rules::decide_expiry(rec.order, "reservation expired");
  if (!settlement) {  // decide_payment expires RESERVED orders only: a bug
    log.error(detail::kLog, "payment: order " + rec.order.id + " is " + to_string(rec.order.state) +
                                ", not RESERVED: cannot expire it");
    return make_error("internal", "order " + rec.order.id + " cannot expire");
  }
  settle(rec, *settlement, changes);
  log.info(detail::kLog, "order " + rec.order.id + " expired; token back in the pool");
  return {};
}

Order OrderDesk::unknown_order(const std::string& order_id) {
  Order o;
  o.id = order_id;
  o.known = false;
  return o;
}

// The gateway took money for an order id this agent never had (a typo, a
// forged id signed by a leaked secret, a database restored from a backup):
// recorded, and refunded through the refund outbox.
PayStep OrderDesk::refund_unknown_order(const std::string& order_id, const std::string& payment_id,
                                        int64_t amount_cents) {
  int64_t now = clock.wall_ms();
  rules::PaymentDecision decision = rules::decide_unknown_order_payment();
  Changeset changes;
  changes.insert_payment(StoredPayment{payment_id, order_id, amount_cents, decision.outcome, now});
  add_refund(changes, new_refund(payment_id, order_id, amount_cents, decision.refund_reason, now));
  Ticket t = writes_.commit(std::move(changes));
  payments_.record(payment_id, PaymentRecord{order_id, amount_cents, decision.outcome, t});
  log.warn(detail::kLog, "payment " + payment_id + " for unknown order " + order_id + ": refunded");
  return PayStep{unknown_order(order_id), decision.outcome, t};
}

PayStep OrderDesk::dispatch_paid(OrderRec& rec, const std::string& payment_id,
                                 int64_t amount_cents) {
  int64_t now = clock.wall_ms();
  Changeset changes;
  changes.insert_payment(
      StoredPayment{payment_id, rec.order.id, amount_cents, rules::kPaymentApplied, now});
  rec.order.payment_id = payment_id;
  set_state(rec, OrderState::kPaid, changes, "payment " + payment_id);
  rec.order.dispatch_expires_at_ms = now + options.dispatch_ttl_ms;
  anchor_time(rec);
  set_state(rec, OrderState::kDispatched, changes,
            "dispense command, expires at " + std::to_string(rec.order.dispatch_expires_at_ms));
  move_token(rec, TokenState::kReserved, TokenState::kDispatched, changes);
  rec.paid_mono_ms = clock.monotonic_ms();
  rec.command_published = false;
  schedule_deadline(rec, TimerKind::kDispatchDeadline,
                    rec.order.dispatch_expires_at_ms + options.expiry_skew_ms);
  Ticket t = writes_.commit(std::move(changes));
  rec.last_write = rec.durable = t;
  payments_.record(payment_id,
                   PaymentRecord{rec.order.id, amount_cents, rules::kPaymentApplied, t});
  rec.payment_ids.push_back(payment_id);
  return PayStep{rec.order, rules::kPaymentApplied, t};
}

PayStep OrderDesk::refund_payment(OrderRec& rec, const std::string& payment_id,
                                  int64_t amount_cents, const rules::PaymentDecision& decision,
                                  Changeset changes) {
  int64_t now = clock.wall_ms();
  OrderState state = rec.order.state;
  changes.insert_payment(
      StoredPayment{payment_id, rec.order.id, amount_cents, decision.outcome, now});
  add_refund(changes, new_refund(payment_id, rec.order.id, amount_cents, decision.refund_reason,
                                 now, rec.order.device));
  if (decision.order_reason) {
    // A late payment is the order's (it never had another); the order ends REFUNDED.
    rec.order.payment_id = payment_id;
    rec.order.reason = *decision.order_reason;
    set_state(rec, OrderState::kRefunded, changes, "payment " + payment_id + " refunded");
  }
  Ticket t = writes_.commit(std::move(changes));
  rec.last_write = t;
  payments_.record(payment_id, PaymentRecord{rec.order.id, amount_cents, decision.outcome, t});
  rec.payment_ids.push_back(payment_id);
  log.info(detail::kLog, "payment " + payment_id + " for " + to_string(state) + " order " +
                             rec.order.id + ": " + decision.outcome);
  return PayStep{rec.order, decision.outcome, t};
}

Result<Order> OrderDesk::finish_pay(const std::string& order_id, const PayStep& step,
                                    const Status& committed) {
  if (!committed.ok()) {
    writes_.write_failed(committed.error(), "payment for " + order_id);
    return make_error("unavailable", "payment not stored: " + committed.error().message);
  }
  auto found = find_or_load_order(order_id);
  if (!found.ok()) return found.error();
  if (*found == nullptr) {
    Order answer = unknown_order(order_id);
    answer.payment_outcome = step.outcome;
    return answer;
  }
  OrderRec& rec = **found;
  // DISPATCHED is durable now: the command may go out (once; a concurrent
  // repeat of the same payment may have sent it already).
  if (rec.order.state == OrderState::kDispatched && !rec.command_published) {
    publish_dispense(rec);
  }
  Order answer = rec.order;
  answer.payment_outcome = step.outcome;
  return answer;
}

void OrderDesk::publish_dispense(OrderRec& rec) {
  auto* dev = devices_.find(rec.order.device);
  if (dev == nullptr) return;
  const Order& o = rec.order;
  if (rules::dispatched_under_replaced_ledger(o)) return;  // the device's new ledger refuses it
  proto::DispenseCommand command{o.device, o.id, o.slot, o.token, o.dispatch_expires_at_ms};
  // What this agent knows of the device's ledger: a device whose file holds
  // less refuses the command and starts a new ledger before anything runs.
  if (!dev->ledger_id.empty()) {
    command.ledger_id = dev->ledger_id;
    command.ledger_seq = dev->acks.last_processed();
    command.ledger_mac = dev->acks.last_mac();
  }
  if (!out_.publish_command(*dev, command, o.id).ok()) {
    return schedule_resend(rec, options.busy_retry_ms);
  }
  rec.command_published = true;
  // A PUBACK is no delivery (a lost session, a broker without its store, a
  // full or restarted firmware): sent again until a result or the expiry.
  // Never later than half the command's remaining life (busy_retry_ms at
  // least), so a copy lost near the expiry is still followed by another.
  int64_t left = o.dispatch_expires_at_ms - order_now(rec);
  int64_t delay = resend_delay(rec.command_sends++);
  schedule_resend(rec, std::min(delay, std::max(options.busy_retry_ms, left / 2)));
}

int64_t OrderDesk::resend_delay(uint32_t sends) const {
  int64_t delay = std::max<int64_t>(1, options.command_resend_ms);
  for (uint32_t i = 0; i < sends && delay < options.command_resend_max_ms; ++i) delay *= 2;
  return std::min(delay, std::max<int64_t>(1, options.command_resend_max_ms));
}

void OrderDesk::refund_order(OrderRec& rec, const std::string& reason, Changeset& changes) {
  add_refund(changes, new_refund(rec.order.payment_id, rec.order.id, rec.order.price_cents, reason,
                                 clock.wall_ms(), rec.order.device));
  set_state(rec, OrderState::kRefunded, changes, "refunded: " + reason);
}

void OrderDesk::publish_failed(const std::string& order_id) {
  OrderRec* rec = orders_.find(order_id);
  if (rec == nullptr || rec->order.state != OrderState::kDispatched) return;
  rec->command_published = false;
  schedule_resend(*rec, options.busy_retry_ms);
}

}  // namespace vend::agent
