// The order lifecycle's decisions alone (rules::): every payment outcome,
// every dispense result against every order state, the dispatch deadline
// and the overdue check of a snapshot. No rig, no clock, no repository.
#include "orders/order_rules.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using vend::agent::Order;
using vend::agent::OrderState;
using vend::agent::TokenState;
namespace proto = vend::proto;
namespace rules = vend::agent::rules;

namespace {

constexpr int64_t kNow = 1'000'000;

Order order(OrderState state) {
  Order o;
  o.id = "o-1";
  o.device = "vm-1";
  o.slot = 2;
  o.token = "tok-1";
  o.price_cents = 150;
  o.state = state;
  o.reserve_deadline_ms = kNow + 60'000;
  o.dispatch_expires_at_ms = kNow + 30'000;
  return o;
}

proto::DispenseResult result(proto::DispenseStatus status, const std::string& reason = "") {
  proto::DispenseResult r;
  r.order_id = "o-1";
  r.slot = 2;
  r.token = "tok-1";
  r.status = status;
  r.reason = reason;
  return r;
}

const std::vector<OrderState> kAll = {
    OrderState::kReserved,  OrderState::kPaid,      OrderState::kDispatched,
    OrderState::kCompleted, OrderState::kFailed,    OrderState::kRefunded,
    OrderState::kExpired,   OrderState::kCancelled, OrderState::kNeedsReview};

proto::Snapshot snapshot_with(std::vector<std::string> tokens) {
  proto::Snapshot s;
  proto::SlotSnapshot slot;
  slot.slot = 2;
  slot.tokens = std::move(tokens);
  s.slots.push_back(slot);
  return s;
}

}  // namespace

TEST_CASE("payment: the price in time dispatches; the wrong amount is refunded, the order kept") {
  auto paid = rules::decide_payment(order(OrderState::kReserved), 150, kNow);
  CHECK(paid.kind == rules::PaymentDecision::Kind::kDispatch);
  CHECK(std::string(paid.outcome) == rules::kPaymentApplied);
  CHECK_FALSE(paid.expire_first);
  auto wrong = rules::decide_payment(order(OrderState::kReserved), 149, kNow);
  CHECK(wrong.kind == rules::PaymentDecision::Kind::kRefund);
  CHECK(std::string(wrong.outcome) == "amount_mismatch_refunded");
  CHECK(std::string(wrong.refund_reason) == "amount_mismatch");
  CHECK_FALSE(wrong.order_reason.has_value());  // the order stays RESERVED: it may still be paid
}

TEST_CASE(
    "payment: late (expired, cancelled, or past the deadline before its timer) ends REFUNDED") {
  Order o = order(OrderState::kReserved);
  auto past = rules::decide_payment(o, 150, o.reserve_deadline_ms);  // the deadline itself
  CHECK(past.kind == rules::PaymentDecision::Kind::kRefund);
  CHECK(past.expire_first);
  CHECK(std::string(past.outcome) == "late_payment_refunded");
  CHECK(past.order_reason == "paid after the reservation expired");
  // A late payment of the wrong amount is late first: the order ends REFUNDED.
  CHECK(rules::decide_payment(o, 1, o.reserve_deadline_ms).order_reason.has_value());
  auto cancelled = rules::decide_payment(order(OrderState::kCancelled), 150, kNow);
  CHECK_FALSE(cancelled.expire_first);
  CHECK(std::string(cancelled.refund_reason) == "late_payment");
  CHECK(cancelled.order_reason == "paid after the order was cancelled");
  CHECK(rules::decide_payment(order(OrderState::kExpired), 150, kNow).order_reason ==
        "paid after the reservation expired");
}

TEST_CASE("payment: any other state is a second payment, refunded, the order unchanged") {
  for (OrderState s : kAll) {
    if (s == OrderState::kReserved || s == OrderState::kExpired || s == OrderState::kCancelled) {
      continue;
    }
    CAPTURE(static_cast<int>(s));
    auto d = rules::decide_payment(order(s), 150, kNow);
    CHECK(d.kind == rules::PaymentDecision::Kind::kRefund);
    CHECK(std::string(d.outcome) == "duplicate_payment_refunded");
    CHECK(std::string(d.refund_reason) == "duplicate_payment");
    CHECK_FALSE(d.order_reason.has_value());
    CHECK_FALSE(d.expire_first);
  }
  auto unknown = rules::decide_unknown_order_payment();
  CHECK(std::string(unknown.outcome) == "unknown_order_refunded");
  CHECK(std::string(unknown.refund_reason) == "unknown_order");
}

TEST_CASE("result: each status of a DISPATCHED order's own token settles it once") {
  Order o = order(OrderState::kDispatched);
  auto done = rules::decide_result(&o, "vm-1", result(proto::DispenseStatus::kDispensed), kNow);
  REQUIRE(done.kind == rules::ResultDecision::Kind::kSettle);
  CHECK(done.settlement.token == TokenState::kSold);
  CHECK(done.settlement.to == OrderState::kCompleted);
  CHECK(done.settlement.refund_reason.empty());

  auto failed =
      rules::decide_result(&o, "vm-1", result(proto::DispenseStatus::kFailed, "jammed"), kNow);
  REQUIRE(failed.kind == rules::ResultDecision::Kind::kSettle);
  CHECK(failed.settlement.token == TokenState::kBurned);  // the motor ran
  CHECK(failed.settlement.to == OrderState::kFailed);
  CHECK(failed.settlement.reason == "jammed");
  CHECK(failed.settlement.refund_reason == "dispense_failed_jammed");

  auto unsure =
      rules::decide_result(&o, "vm-1", result(proto::DispenseStatus::kUncertain, "sensor"), kNow);
  REQUIRE(unsure.kind == rules::ResultDecision::Kind::kSettle);
  CHECK(unsure.settlement.to == OrderState::kNeedsReview);
  CHECK(unsure.settlement.refund_reason.empty());  // an operator decides
}

TEST_CASE("result: REJECTED — busy retries in time, expired returns the token, the rest burn it") {
  Order o = order(OrderState::kDispatched);
  auto busy = result(proto::DispenseStatus::kRejected, proto::reason::kBusy);
  CHECK(rules::decide_result(&o, "vm-1", busy, kNow).kind == rules::ResultDecision::Kind::kRetry);
  CHECK(rules::decide_result(&o, "vm-1", busy, o.dispatch_expires_at_ms).kind ==
        rules::ResultDecision::Kind::kAwaitDeadline);
  auto expired = result(proto::DispenseStatus::kRejected, proto::reason::kExpired);
  auto back = rules::decide_result(&o, "vm-1", expired, kNow);
  REQUIRE(back.kind == rules::ResultDecision::Kind::kSettle);
  CHECK(back.settlement.token == TokenState::kPool);
  CHECK(back.settlement.refund_reason == "rejected_expired");
  expired.token_consumed = true;  // the device spent it: never sold again
  CHECK(rules::decide_result(&o, "vm-1", expired, kNow).settlement.token == TokenState::kBurned);
  busy.token_consumed = true;  // not transient once the token is gone
  CHECK(rules::decide_result(&o, "vm-1", busy, kNow).kind == rules::ResultDecision::Kind::kSettle);
  auto unknown = rules::decide_result(
      &o, "vm-1", result(proto::DispenseStatus::kRejected, "unknown_token"), kNow);
  CHECK(unknown.settlement.token == TokenState::kBurned);
  CHECK(unknown.settlement.to == OrderState::kFailed);
  CHECK(unknown.settlement.reason == "rejected_unknown_token");
}

TEST_CASE(
    "result: never a second settlement; DISPENSED for an order settled otherwise is a "
    "contradiction") {
  for (OrderState s : kAll) {
    if (s == OrderState::kDispatched) continue;
    CAPTURE(static_cast<int>(s));
    Order o = order(s);
    auto dispensed =
        rules::decide_result(&o, "vm-1", result(proto::DispenseStatus::kDispensed), kNow);
    CHECK(dispensed.kind == (s == OrderState::kCompleted
                                 ? rules::ResultDecision::Kind::kIgnore
                                 : rules::ResultDecision::Kind::kContradiction));
    auto failed =
        rules::decide_result(&o, "vm-1", result(proto::DispenseStatus::kFailed, "x"), kNow);
    CHECK(failed.kind == rules::ResultDecision::Kind::kIgnore);
    CHECK(failed.ignored == rules::ResultDecision::Ignored::kSettled);
  }
}

TEST_CASE("result: no order, another device's, or another token or slot changes nothing") {
  auto r = result(proto::DispenseStatus::kDispensed);
  CHECK(rules::decide_result(nullptr, "vm-1", r, kNow).kind ==
        rules::ResultDecision::Kind::kIgnore);
  Order o = order(OrderState::kDispatched);
  CHECK(rules::decide_result(&o, "vm-2", r, kNow).kind == rules::ResultDecision::Kind::kIgnore);
  CHECK(rules::decide_result(&o, "vm-2", r, kNow).ignored ==
        rules::ResultDecision::Ignored::kNoOrder);
  auto other = r;
  other.token = "tok-2";
  auto d = rules::decide_result(&o, "vm-1", other, kNow);
  CHECK(d.kind == rules::ResultDecision::Kind::kIgnore);
  CHECK(d.ignored == rules::ResultDecision::Ignored::kOtherTokenOrSlot);
  other = r;
  other.slot = 3;
  CHECK(rules::decide_result(&o, "vm-1", other, kNow).ignored ==
        rules::ResultDecision::Ignored::kOtherTokenOrSlot);
}

TEST_CASE("dispatch deadline: check the device until the review time, then NEEDS_REVIEW") {
  constexpr int64_t kTtl = 30'000, kReview = 600'000;
  Order o = order(OrderState::kDispatched);  // dispatched at kNow (expires kNow + ttl)
  CHECK(rules::decide_dispatch_deadline(o, kNow + kTtl + 1, kTtl, kReview).kind ==
        rules::DeadlineDecision::Kind::kCheck);
  CHECK(rules::decide_dispatch_deadline(o, kNow + kReview - 1, kTtl, kReview).kind ==
        rules::DeadlineDecision::Kind::kCheck);
  auto review = rules::decide_dispatch_deadline(o, kNow + kReview, kTtl, kReview);
  REQUIRE(review.kind == rules::DeadlineDecision::Kind::kReview);
  CHECK(review.settlement.token == TokenState::kBurned);
  CHECK(review.settlement.to == OrderState::kNeedsReview);
  CHECK(review.settlement.reason == "no_result");
  CHECK(review.settlement.refund_reason.empty());
  CHECK(review.settlement.detail == "no result from vm-1 for 600 s");
  CHECK(
      rules::decide_dispatch_deadline(order(OrderState::kCompleted), kNow + kReview, kTtl, kReview)
          .kind == rules::DeadlineDecision::Kind::kNone);
}

TEST_CASE("overdue: both clocks past expiry + skew; the token still there settles it, gone asks") {
  constexpr int64_t kSkew = 5'000;
  Order o = order(OrderState::kDispatched);
  int64_t cutoff = o.dispatch_expires_at_ms + kSkew;
  auto held = snapshot_with({"tok-0", "tok-1"});
  auto never = rules::decide_overdue(o, held, cutoff + 1, cutoff, kSkew);
  REQUIRE(never.kind == rules::OverdueDecision::Kind::kSettle);
  CHECK(never.settlement.token == TokenState::kPool);
  CHECK(never.settlement.reason == "never_dispensed");
  CHECK(never.settlement.refund_reason == "never_dispensed");
  CHECK(rules::decide_overdue(o, snapshot_with({"tok-0"}), cutoff + 1, cutoff, kSkew).kind ==
        rules::OverdueDecision::Kind::kAskResult);
  // The device's clock not yet past the cutoff: the command may still run there.
  CHECK(rules::decide_overdue(o, held, cutoff, cutoff, kSkew).kind ==
        rules::OverdueDecision::Kind::kNone);
  // The agent's clock not yet past it.
  CHECK(rules::decide_overdue(o, held, cutoff + 1, cutoff - 1, kSkew).kind ==
        rules::OverdueDecision::Kind::kNone);
  // A snapshot without the slot's tokens tells nothing.
  proto::Snapshot bare = held;
  bare.slots[0].tokens.reset();
  CHECK(rules::decide_overdue(o, bare, cutoff + 1, cutoff, kSkew).kind ==
        rules::OverdueDecision::Kind::kNone);
  CHECK(rules::decide_overdue(order(OrderState::kFailed), held, cutoff + 1, cutoff, kSkew).kind ==
        rules::OverdueDecision::Kind::kNone);
}

TEST_CASE("ledger replaced: a DISPATCHED order is marked once; its token never goes back") {
  for (OrderState s : kAll) {
    CAPTURE(static_cast<int>(s));
    CHECK(rules::decide_ledger_replaced(order(s)).has_value() == (s == OrderState::kDispatched));
  }
  auto marked = rules::decide_ledger_replaced(order(OrderState::kDispatched));
  REQUIRE(marked);
  CHECK(marked->reason == rules::kLedgerReplaced);
  CHECK(marked->state == OrderState::kDispatched);
  CHECK(rules::dispatched_under_replaced_ledger(*marked));
  CHECK_FALSE(rules::decide_ledger_replaced(*marked).has_value());  // once
  CHECK_FALSE(rules::dispatched_under_replaced_ledger(order(OrderState::kDispatched)));

  // Rejected as expired by the new ledger: money back, the token burned.
  auto expired = rules::decide_result(
      &*marked, "vm-1", result(proto::DispenseStatus::kRejected, proto::reason::kExpired), kNow);
  REQUIRE(expired.kind == rules::ResultDecision::Kind::kSettle);
  CHECK(expired.settlement.token == TokenState::kBurned);
  CHECK(expired.settlement.refund_reason == "rejected_expired");
  // A result carried over settles it as any result.
  auto dispensed =
      rules::decide_result(&*marked, "vm-1", result(proto::DispenseStatus::kDispensed), kNow);
  REQUIRE(dispensed.kind == rules::ResultDecision::Kind::kSettle);
  CHECK(dispensed.settlement.token == TokenState::kSold);
  CHECK(dispensed.settlement.to == OrderState::kCompleted);

  // Overdue on the new ledger's snapshot: refunded with the token burned,
  // whether that ledger holds the token or not (its result cannot be asked).
  constexpr int64_t kSkew = 5'000;
  int64_t cutoff = marked->dispatch_expires_at_ms + kSkew;
  for (const auto& tokens :
       {std::vector<std::string>{"tok-0", "tok-1"}, std::vector<std::string>{"tok-0"}}) {
    auto d = rules::decide_overdue(*marked, snapshot_with(tokens), cutoff + 1, cutoff, kSkew);
    REQUIRE(d.kind == rules::OverdueDecision::Kind::kSettle);
    CHECK(d.settlement.token == TokenState::kBurned);
    CHECK(d.settlement.reason == rules::kLedgerReplaced);
    CHECK(d.settlement.refund_reason == rules::kLedgerReplaced);
  }
  CHECK(rules::decide_overdue(*marked, snapshot_with({"tok-1"}), cutoff, cutoff, kSkew).kind ==
        rules::OverdueDecision::Kind::kNone);
}

TEST_CASE("cancel: a RESERVED order's token goes back; a repeat is answered; others refused") {
  auto d = rules::decide_cancel(order(OrderState::kReserved));
  REQUIRE(d.kind == rules::RequestDecision::Kind::kApply);
  CHECK(d.settlement.token_from == TokenState::kReserved);
  CHECK(d.settlement.token == TokenState::kPool);
  CHECK(d.settlement.to == OrderState::kCancelled);
  CHECK(d.settlement.refund_reason.empty());
  CHECK(rules::decide_cancel(order(OrderState::kCancelled)).kind ==
        rules::RequestDecision::Kind::kRepeat);
  for (OrderState s : kAll) {
    if (s == OrderState::kReserved || s == OrderState::kCancelled) continue;
    CAPTURE(static_cast<int>(s));
    CHECK(rules::decide_cancel(order(s)).kind == rules::RequestDecision::Kind::kRefuse);
  }
}

TEST_CASE("review: dispensed sells the burned token; not dispensed refunds; only NEEDS_REVIEW") {
  Order o = order(OrderState::kNeedsReview);
  auto sold = rules::decide_review(o, true, "dispensed (by ana)");
  REQUIRE(sold.kind == rules::RequestDecision::Kind::kApply);
  CHECK(sold.settlement.token_from == TokenState::kBurned);
  CHECK(sold.settlement.token == TokenState::kSold);
  CHECK(sold.settlement.to == OrderState::kCompleted);
  CHECK(sold.settlement.reason == "review: dispensed (by ana)");
  CHECK(sold.settlement.refund_reason.empty());
  auto back = rules::decide_review(o, false, "not dispensed (by ana)");
  REQUIRE(back.kind == rules::RequestDecision::Kind::kApply);
  CHECK(back.settlement.token == back.settlement.token_from);  // stays burned
  CHECK(back.settlement.to == OrderState::kRefunded);
  CHECK(back.settlement.refund_reason == "review_not_dispensed");
  // The same resolution again is a repeat; the other one is refused.
  Order done = order(OrderState::kCompleted);
  done.reason = "review: dispensed (by ana)";
  CHECK(rules::decide_review(done, true, "x").kind == rules::RequestDecision::Kind::kRepeat);
  CHECK(rules::decide_review(done, false, "x").kind == rules::RequestDecision::Kind::kRefuse);
  // A COMPLETED order that was never under review is not a repeat.
  CHECK(rules::decide_review(order(OrderState::kCompleted), true, "x").kind ==
        rules::RequestDecision::Kind::kRefuse);
}

TEST_CASE("decommission: a RESERVED order is cancelled, its token back; nothing else changes") {
  auto w = rules::decide_withdrawal(order(OrderState::kReserved));
  REQUIRE(w.has_value());
  CHECK(w->token_from == TokenState::kReserved);
  CHECK(w->token == TokenState::kPool);
  CHECK(w->to == OrderState::kCancelled);
  CHECK(w->reason == "device_decommissioned");
  CHECK(w->refund_reason.empty());  // never paid
  for (OrderState s : kAll) {
    if (s == OrderState::kReserved) continue;
    CAPTURE(static_cast<int>(s));
    CHECK_FALSE(rules::decide_withdrawal(order(s)).has_value());
  }
}

TEST_CASE("a reservation whose token left its machine is cancelled, the token burned") {
  auto l = rules::decide_token_lost(order(OrderState::kReserved));
  REQUIRE(l.has_value());
  CHECK(l->token_from == TokenState::kReserved);
  CHECK(l->token == TokenState::kBurned);  // never back in the pool: the machine lacks it
  CHECK(l->to == OrderState::kCancelled);
  CHECK(l->reason == "token_lost");
  CHECK(l->refund_reason.empty());
  for (OrderState s : kAll) {
    if (s == OrderState::kReserved) continue;
    CAPTURE(static_cast<int>(s));
    CHECK_FALSE(rules::decide_token_lost(order(s)).has_value());  // paid: the device decides
  }
}

TEST_CASE("expiry: only RESERVED expires, its token back in the pool") {
  auto e = rules::decide_expiry(order(OrderState::kReserved), "reservation expired");
  REQUIRE(e.has_value());
  CHECK(e->token_from == TokenState::kReserved);
  CHECK(e->token == TokenState::kPool);
  CHECK(e->to == OrderState::kExpired);
  CHECK(e->reason == "reservation expired");
  for (OrderState s : kAll) {
    if (s == OrderState::kReserved) continue;
    CAPTURE(static_cast<int>(s));
    CHECK_FALSE(rules::decide_expiry(order(s), "reservation expired").has_value());
  }
}
