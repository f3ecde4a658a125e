// AgentCore::State: the refund outbox. A refund is recorded in the same
// changeset as what caused it; once that commit is durable, the shell's
// refund sender delivers it to the payment gateway, retrying with backoff,
// until the gateway confirms it or it is given up to an alert. The gateway
// deduplicates by refund id, so a delivery repeated after a crash or a lost
// answer refunds once.
#include <algorithm>

#include "agent_state.hpp"

namespace vend::agent {

namespace {
constexpr size_t kMaxErrorText = 256;
}  // namespace

using detail::RefundRec;

void AgentCore::State::add_refund(Changeset& changes, StoredRefund refund) {
  changes.insert_refund(refund);
  refunds_to_queue.push_back(std::move(refund));
}

void AgentCore::State::queue_refunds(const Ticket& recorded) {
  for (auto& r : refunds_to_queue) {
    std::string id = r.payment_id;
    refund_outbox[id] = RefundRec{std::move(r), recorded, 0, false};
  }
  refunds_to_queue.clear();
}

void AgentCore::State::load_refunds(const LoadedState& loaded) {
  int64_t now = clock.wall_ms();
  for (const auto& r : loaded.pending_refunds) {
    // A delivery in flight at the crash is sent again: the gateway dedups.
    refund_outbox[r.payment_id] = RefundRec{r, detail::ready_ticket(), now, false};
  }
}

std::vector<RefundDelivery> AgentCore::State::take_due_refunds(size_t max) {
  std::vector<RefundDelivery> due;
  if (!started || storage_failed) return due;
  int64_t now = clock.wall_ms();
  for (auto& [id, rec] : refund_outbox) {
    if (due.size() >= max) break;
    if (rec.in_flight || rec.next_attempt_ms > now) continue;
    // Never refund what the log might not hold: wait for the commit.
    if (!detail::is_ready(rec.recorded) || !rec.recorded.get().ok()) continue;
    rec.in_flight = true;
    const StoredRefund& r = rec.refund;
    due.push_back(RefundDelivery{refund_id_of(r.payment_id), r.payment_id, r.order_id,
                                 r.amount_cents, r.reason, r.attempts + 1});
  }
  return due;
}

int64_t AgentCore::State::refund_backoff_ms(int attempts) const {
  int64_t delay = options.refund_retry_base_ms;
  for (int i = 1; i < attempts && delay < options.refund_retry_max_ms; ++i) delay *= 2;
  delay = std::min(delay, options.refund_retry_max_ms);
  // Up to a quarter more, so refunds that failed together do not retry together.
  return delay + static_cast<int64_t>(random.next_u64() % static_cast<uint64_t>(delay / 4 + 1));
}

void AgentCore::State::refund_attempted(const std::string& payment_id, RefundOutcome outcome,
                                        const std::string& detail) {
  auto it = refund_outbox.find(payment_id);
  if (it == refund_outbox.end() || !it->second.in_flight) return;  // not ours (any more)
  RefundRec& rec = it->second;
  rec.in_flight = false;
  if (!writable().ok()) return;  // stays PENDING; sent again after the restart
  ++counters.refund_attempts_total;
  StoredRefund& r = rec.refund;
  ++r.attempts;
  r.last_error = detail.substr(0, kMaxErrorText);
  int64_t now = clock.wall_ms();
  if (outcome == RefundOutcome::kDelivered) {
    Changeset changes;
    changes.update_refund(payment_id, RefundState::kDelivered, r.attempts, "", now);
    (void)commit(std::move(changes));
    ++counters.refunds_delivered_total;
    log.info(detail::kLog, "refund " + refund_id_of(payment_id) + " of order " + r.order_id +
                               " delivered (attempt " + std::to_string(r.attempts) + ")");
    refund_outbox.erase(it);
    return;
  }
  if (outcome == RefundOutcome::kRejected) return give_up_refund(rec, "refused: " + r.last_error);
  if (r.attempts >= options.refund_max_attempts) {
    return give_up_refund(
        rec, std::to_string(r.attempts) + " attempts failed, the last: " + r.last_error);
  }
  Changeset changes;
  changes.update_refund(payment_id, RefundState::kPending, r.attempts, r.last_error, now);
  (void)commit(std::move(changes));
  rec.next_attempt_ms = now + refund_backoff_ms(r.attempts);
  log.warn(detail::kLog, "refund " + refund_id_of(payment_id) + " attempt " +
                             std::to_string(r.attempts) + " failed (" + r.last_error +
                             "); again in " + std::to_string(rec.next_attempt_ms - now) + " ms");
}

// Money the customer is owed and the gateway would not take back: a person
// must act. The refund stays on record as GAVE_UP with its last error.
void AgentCore::State::give_up_refund(RefundRec& rec, const std::string& why) {
  StoredRefund& r = rec.refund;
  Changeset changes;
  changes.update_refund(r.payment_id, RefundState::kGaveUp, r.attempts, r.last_error,
                        clock.wall_ms());
  (void)commit(std::move(changes));
  ++counters.refunds_given_up_total;
  std::string device;
  int slot = 0;
  if (detail::OrderRec* order = find_order(r.order_id)) {
    device = order->order.device;
    slot = order->order.slot;
  }
  raise_alert(device, slot, "refund_undeliverable", "critical",
              "refund " + refund_id_of(r.payment_id) + " of " + std::to_string(r.amount_cents) +
                  " cents (order " + r.order_id + "): " + why);
  std::string id = r.payment_id;  // a copy: erasing destroys `r`
  refund_outbox.erase(id);
}

}  // namespace vend::agent
