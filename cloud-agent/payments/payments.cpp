// Payments: the payment records and the refund outbox (payments.hpp).
#include "payments/payments.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace vend::agent {

namespace {

constexpr size_t kMaxErrorText = 256;

// The refund's record committed, successfully.
bool durable(const Ticket& t) {
  return t.valid() && t.wait_for(std::chrono::seconds(0)) == std::future_status::ready &&
         t.get().ok();
}

}  // namespace

Payments::Payments(RefundRetryPolicy policy) : policy_(policy) {}

const PaymentRecord* Payments::find(const std::string& payment_id) const {
  auto it = payments_.find(payment_id);
  return it == payments_.end() ? nullptr : &it->second;
}

void Payments::record(const std::string& payment_id, PaymentRecord record) {
  payments_[payment_id] = std::move(record);
}

void Payments::forget(const std::string& payment_id) { payments_.erase(payment_id); }

void Payments::stage_refund(StoredRefund refund) { staged_.push_back(std::move(refund)); }

void Payments::committed(const Ticket& recorded) {
  for (auto& r : staged_) {
    std::string id = r.payment_id;
    outbox_[id] = Refund{std::move(r), recorded, 0, false};
  }
  staged_.clear();
}

void Payments::drop_staged() { staged_.clear(); }

void Payments::load_refunds(const std::vector<StoredRefund>& pending, int64_t now_ms) {
  std::promise<Status> done;
  done.set_value(Status{});
  Ticket stored = done.get_future().share();  // read from the log: durable
  for (const auto& r : pending) outbox_[r.payment_id] = Refund{r, stored, now_ms, false};
}

const StoredRefund* Payments::pending_refund(const std::string& payment_id) const {
  auto it = outbox_.find(payment_id);
  return it == outbox_.end() ? nullptr : &it->second.refund;
}

std::vector<RefundDelivery> Payments::take_due(size_t max, int64_t now_ms) {
  std::vector<RefundDelivery> due;
  for (auto& [id, rec] : outbox_) {
    if (due.size() >= max) break;
    if (rec.in_flight || rec.next_attempt_ms > now_ms) continue;
    // Never refund what the log might not hold: wait for the commit.
    if (!durable(rec.recorded)) continue;
    rec.in_flight = true;
    const StoredRefund& r = rec.refund;
    due.push_back(RefundDelivery{refund_id_of(r.payment_id), r.payment_id, r.order_id,
                                 r.amount_cents, r.reason, r.attempts + 1});
  }
  return due;
}

Payments::Attempt Payments::attempted(const std::string& payment_id, RefundOutcome outcome,
                                      const std::string& detail, int64_t now_ms, Random& random,
                                      int64_t retry_after_ms) {
  Attempt a;
  auto it = outbox_.find(payment_id);
  if (it == outbox_.end() || !it->second.in_flight) return a;  // not ours (any more)
  Refund& rec = it->second;
  rec.in_flight = false;
  StoredRefund& r = rec.refund;
  ++r.attempts;
  r.last_error = detail.substr(0, kMaxErrorText);
  if (outcome == RefundOutcome::kDelivered) {
    a.next = Attempt::Next::kDelivered;
  } else if (outcome == RefundOutcome::kRejected) {
    a.next = Attempt::Next::kGiveUp;
    a.why = "refused: " + r.last_error;
  } else if (r.attempts >= policy_.max_attempts) {
    a.next = Attempt::Next::kGiveUp;
    a.why = std::to_string(r.attempts) + " attempts failed, the last: " + r.last_error;
  } else {
    a.next = Attempt::Next::kRetry;
    int64_t delay = backoff_ms(r.attempts);
    // Up to a quarter more, so refunds that failed together do not retry together.
    delay += static_cast<int64_t>(random.next_u64() % static_cast<uint64_t>(delay / 4 + 1));
    delay = std::max(delay, retry_after_ms);  // the gateway asked for at least that
    rec.next_attempt_ms = a.retry_at_ms = now_ms + delay;
    a.refund = r;
    return a;
  }
  a.refund = std::move(r);
  outbox_.erase(it);
  return a;
}

void Payments::release(const std::string& payment_id) {
  auto it = outbox_.find(payment_id);
  if (it != outbox_.end()) it->second.in_flight = false;
}

int64_t Payments::backoff_ms(int attempts) const {
  int64_t delay = policy_.base_ms;
  for (int i = 1; i < attempts && delay < policy_.max_ms; ++i) delay *= 2;
  return std::min(delay, policy_.max_ms);
}

}  // namespace vend::agent
