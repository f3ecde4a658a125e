// OrderDesk: the refund outbox. A refund is recorded in the same changeset
// as what caused it; once that commit is durable, the shell's refund sender
// delivers it to the payment gateway, retrying with backoff, until the
// gateway confirms it or it is given up to an alert. The gateway
// deduplicates by refund id, so a delivery repeated after a crash or a lost
// answer refunds once.
#include "core/order_desk.hpp"
#include "core/output.hpp"
#include "core/writes.hpp"

namespace vend::agent {

void OrderDesk::add_refund(Changeset& changes, StoredRefund refund) {
  changes.insert_refund(refund);
  payments_.stage_refund(std::move(refund));
}

std::vector<RefundDelivery> OrderDesk::take_due_refunds(size_t max) {
  if (!writes_.started || writes_.storage_failed) return {};
  return payments_.take_due(max, clock.monotonic_ms());  // retry times are monotonic
}

bool OrderDesk::refund_attempted(const std::string& payment_id, RefundOutcome outcome,
                                 const std::string& detail, int64_t retry_after_ms) {
  // Nothing writable now: the outcome is not dropped (a refund the gateway
  // confirmed must not be sent again for nothing, one it refused must be
  // alerted): it stays in flight and the sender offers it again.
  if (!writes_.writable().ok()) return false;
  int64_t now = clock.wall_ms();  // stored; the retry time is monotonic
  int64_t now_mono = clock.monotonic_ms();
  Payments::Attempt a =
      payments_.attempted(payment_id, outcome, detail, now_mono, random, retry_after_ms);
  using Next = Payments::Attempt::Next;
  if (a.next == Next::kNone) return true;
  ++counters.refund_attempts_total;
  const StoredRefund& r = a.refund;
  std::string device = r.device;  // the alert names it
  int slot = 0;
  if (OrderRec* order = orders_.find(r.order_id)) {
    device = order->order.device;  // also for a refund written before schema v8
    slot = order->order.slot;
  }
  Changeset changes;
  // Several agents: written under the fence of the shard it is held by.
  if (owns) changes.fence_device(owner_key(r));
  if (a.next == Next::kDelivered) {
    changes.update_refund(payment_id, RefundState::kDelivered, r.attempts, "", now);
    (void)writes_.commit(std::move(changes));
    ++counters.refunds_delivered_total;
    log.info(detail::kLog, "refund " + refund_id_of(payment_id) + " of order " + r.order_id +
                               " delivered (attempt " + std::to_string(r.attempts) + ")");
    return true;
  }
  if (a.next == Next::kRetry) {
    changes.update_refund(payment_id, RefundState::kPending, r.attempts, r.last_error, now);
    (void)writes_.commit(std::move(changes));
    log.warn(detail::kLog, "refund " + refund_id_of(payment_id) + " attempt " +
                               std::to_string(r.attempts) + " failed (" + r.last_error +
                               "); again in " + std::to_string(a.retry_at_ms - now_mono) + " ms");
    return true;
  }
  // Given up: money the customer is owed and the gateway would not take
  // back; a person must act. The refund stays on record as GAVE_UP with its
  // last error.
  changes.update_refund(payment_id, RefundState::kGaveUp, r.attempts, r.last_error, now);
  (void)writes_.commit(std::move(changes));
  ++counters.refunds_given_up_total;
  out_.raise_alert(device, slot, "refund_undeliverable", "critical",
                   "refund " + refund_id_of(payment_id) + " of " + std::to_string(r.amount_cents) +
                       " cents (order " + r.order_id + "): " + a.why);
  return true;
}

}  // namespace vend::agent
