// Payments alone: payment records, and the refund outbox from the commit
// that records a refund to its confirmation or its give-up.
#include "payments/payments.hpp"

#include <doctest/doctest.h>

#include <future>
#include <string>

using vend::Status;
using vend::agent::PaymentRecord;
using vend::agent::Payments;
using vend::agent::RefundOutcome;
using vend::agent::RefundRetryPolicy;
using vend::agent::StoredRefund;
using vend::agent::Ticket;
using Next = vend::agent::Payments::Attempt::Next;

namespace {

constexpr RefundRetryPolicy kPolicy{1'000, 8'000, 5};

Ticket done(Status s = {}) {
  std::promise<Status> p;
  p.set_value(std::move(s));
  return p.get_future().share();
}

StoredRefund refund(const std::string& payment_id, int64_t cents = 150) {
  return vend::agent::new_refund(payment_id, "ord-" + payment_id, cents, "late_payment", 0);
}

// A refund of `payment_id` staged, committed with `t`, and taken once at `now`.
void stage_and_take(Payments& p, const std::string& payment_id, int64_t now = 0) {
  p.stage_refund(refund(payment_id));
  p.committed(done());
  auto due = p.take_due(10, now);
  REQUIRE(due.size() == 1);
  REQUIRE(due[0].payment_id == payment_id);
}

}  // namespace

TEST_CASE("payment records: found by id until forgotten") {
  Payments p(kPolicy);
  CHECK(p.find("pay-1") == nullptr);
  p.record("pay-1", PaymentRecord{"ord-1", 150, "applied", done()});
  REQUIRE(p.find("pay-1") != nullptr);
  CHECK(p.find("pay-1")->order_id == "ord-1");
  CHECK(p.find("pay-1")->outcome == "applied");
  p.forget("pay-1");
  CHECK(p.find("pay-1") == nullptr);
}

TEST_CASE("a staged refund enters the outbox only with its commit, and a refused one never") {
  Payments p(kPolicy);
  p.stage_refund(refund("pay-1"));
  CHECK(p.refunds_pending() == 0);
  CHECK(p.pending_refund("pay-1") == nullptr);
  p.drop_staged();  // the submit was refused
  p.committed(done());
  CHECK(p.refunds_pending() == 0);

  p.stage_refund(refund("pay-2"));
  p.stage_refund(refund("pay-3"));
  p.committed(done());
  CHECK(p.refunds_pending() == 2);
  REQUIRE(p.pending_refund("pay-2") != nullptr);
  CHECK(p.pending_refund("pay-2")->order_id == "ord-pay-2");
}

TEST_CASE("a refund is delivered only once its record is durable, and once at a time") {
  Payments p(kPolicy);
  std::promise<Status> commit;
  p.stage_refund(refund("pay-1"));
  p.committed(commit.get_future().share());
  CHECK(p.take_due(10, 0).empty());  // the commit has not happened
  commit.set_value(Status{});
  auto due = p.take_due(10, 0);
  REQUIRE(due.size() == 1);
  CHECK(due[0].refund_id == "rfd-pay-1");
  CHECK(due[0].order_id == "ord-pay-1");
  CHECK(due[0].amount_cents == 150);
  CHECK(due[0].attempt == 1);
  CHECK(p.take_due(10, 0).empty());  // in flight

  // A failed commit never refunds (the log does not hold it).
  p.stage_refund(refund("pay-2"));
  p.committed(done(vend::make_error("io", "disk full")));
  CHECK(p.take_due(10, 0).empty());
}

TEST_CASE("take_due: at most `max`") {
  Payments p(kPolicy);
  for (int i = 0; i < 5; ++i) p.stage_refund(refund("pay-" + std::to_string(i)));
  p.committed(done());
  CHECK(p.take_due(2, 0).size() == 2);
  CHECK(p.take_due(10, 0).size() == 3);
}

TEST_CASE("a failed delivery is retried with doubling backoff and jitter, then given up") {
  Payments p(kPolicy);
  vend::SeededRandom random(7);
  stage_and_take(p, "pay-1");
  int64_t now = 0;
  int64_t base[] = {1'000, 2'000, 4'000, 8'000};  // capped at max_ms
  for (int attempt = 1; attempt <= 4; ++attempt) {
    auto a = p.attempted("pay-1", RefundOutcome::kRetry, "503 busy", now, random);
    REQUIRE(a.next == Next::kRetry);
    CHECK(a.refund.attempts == attempt);
    CHECK(a.refund.last_error == "503 busy");
    int64_t delay = a.retry_at_ms - now;
    CHECK(delay >= base[attempt - 1]);
    CHECK(delay <= base[attempt - 1] + base[attempt - 1] / 4);
    CHECK(p.take_due(10, a.retry_at_ms - 1).empty());
    auto due = p.take_due(10, a.retry_at_ms);
    REQUIRE(due.size() == 1);
    CHECK(due[0].attempt == attempt + 1);
    now = a.retry_at_ms;
  }
  auto last = p.attempted("pay-1", RefundOutcome::kRetry, "timeout", now, random);
  CHECK(last.next == Next::kGiveUp);
  CHECK(last.refund.attempts == 5);
  CHECK(last.why == "5 attempts failed, the last: timeout");
  CHECK(p.refunds_pending() == 0);
  CHECK(p.backoff_ms(10) == 8'000);
}

TEST_CASE("confirmed: leaves the outbox; refused: given up at once") {
  Payments p(kPolicy);
  vend::SeededRandom random(1);
  stage_and_take(p, "pay-1");
  auto a = p.attempted("pay-1", RefundOutcome::kDelivered, "", 5, random);
  CHECK(a.next == Next::kDelivered);
  CHECK(a.refund.attempts == 1);
  CHECK(p.pending_refund("pay-1") == nullptr);

  stage_and_take(p, "pay-2");
  auto r = p.attempted("pay-2", RefundOutcome::kRejected, "400 unknown payment", 5, random);
  CHECK(r.next == Next::kGiveUp);
  CHECK(r.why == "refused: 400 unknown payment");
  CHECK(r.refund.order_id == "ord-pay-2");
  CHECK(p.refunds_pending() == 0);
}

TEST_CASE("an outcome for a refund not in flight is nothing; release makes it due again") {
  Payments p(kPolicy);
  vend::SeededRandom random(1);
  CHECK(p.attempted("pay-x", RefundOutcome::kDelivered, "", 0, random).next == Next::kNone);
  stage_and_take(p, "pay-1");
  p.release("pay-1");  // nothing could be written: no attempt counted
  CHECK(p.attempted("pay-1", RefundOutcome::kDelivered, "", 0, random).next == Next::kNone);
  auto due = p.take_due(10, 0);
  REQUIRE(due.size() == 1);
  CHECK(due[0].attempt == 1);
}

TEST_CASE("refunds loaded after a restart are due at once; the error text is bounded") {
  Payments p(kPolicy);
  vend::SeededRandom random(1);
  StoredRefund r = refund("pay-1");
  r.attempts = 2;
  p.load_refunds({r}, 100);
  auto due = p.take_due(10, 100);
  REQUIRE(due.size() == 1);
  CHECK(due[0].attempt == 3);
  auto a = p.attempted("pay-1", RefundOutcome::kRetry, std::string(1000, 'x'), 100, random);
  CHECK(a.refund.last_error.size() == 256);
}
