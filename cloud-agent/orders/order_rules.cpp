#include "orders/order_rules.hpp"

#include <algorithm>

namespace vend::agent::rules {

namespace {

constexpr const char* kDuplicateRefunded = "duplicate_payment_refunded";
constexpr const char* kLateRefunded = "late_payment_refunded";
constexpr const char* kMismatchRefunded = "amount_mismatch_refunded";
constexpr const char* kUnknownOrderRefunded = "unknown_order_refunded";

PaymentDecision refund(const char* outcome, const char* reason) {
  PaymentDecision d;
  d.kind = PaymentDecision::Kind::kRefund;
  d.outcome = outcome;
  d.refund_reason = reason;
  return d;
}

ResultDecision ignore(ResultDecision::Ignored why) {
  ResultDecision d;
  d.kind = ResultDecision::Kind::kIgnore;
  d.ignored = why;
  return d;
}

ResultDecision settle(TokenState token, OrderState to, std::string reason,
                      std::string refund_reason, std::string detail) {
  ResultDecision d;
  d.kind = ResultDecision::Kind::kSettle;
  d.settlement =
      Settlement{TokenState::kDispatched, token, to, std::move(reason), std::move(refund_reason),
                 std::move(detail)};
  return d;
}

// A RESERVED order ends `to`, its token going `token`; nothing for any
// other state.
std::optional<Settlement> end_reservation(const Order& order, TokenState token, OrderState to,
                                          std::string reason, std::string detail) {
  if (order.state != OrderState::kReserved) return std::nullopt;
  return Settlement{TokenState::kReserved, token, to, std::move(reason), "", std::move(detail)};
}

}  // namespace

RequestDecision decide_cancel(const Order& order) {
  RequestDecision d;
  if (order.state == OrderState::kCancelled) {
    d.kind = RequestDecision::Kind::kRepeat;
  } else if (order.state == OrderState::kReserved) {
    d.kind = RequestDecision::Kind::kApply;
    d.settlement = Settlement{
        TokenState::kReserved,      TokenState::kPool, OrderState::kCancelled, "cancelled", "",
        "cancelled by the customer"};
  }
  return d;
}

RequestDecision decide_review(const Order& order, bool dispensed, const std::string& why) {
  RequestDecision d;
  OrderState wanted = dispensed ? OrderState::kCompleted : OrderState::kRefunded;
  if (order.state == wanted && order.reason.rfind("review:", 0) == 0) {
    d.kind = RequestDecision::Kind::kRepeat;
    return d;
  }
  if (order.state != OrderState::kNeedsReview) return d;
  d.kind = RequestDecision::Kind::kApply;
  if (dispensed) {  // the burned token did drop an item: it counts as sold
    d.settlement = Settlement{
        TokenState::kBurned,      TokenState::kSold, OrderState::kCompleted, "review: " + why, "",
        "review resolved: " + why};
  } else {
    d.settlement = Settlement{TokenState::kBurned, TokenState::kBurned,    OrderState::kRefunded,
                              "review: " + why,    "review_not_dispensed", ""};
  }
  return d;
}

std::optional<Settlement> decide_withdrawal(const Order& order) {
  return end_reservation(order, TokenState::kPool, OrderState::kCancelled, "device_decommissioned",
                         "device decommissioned");
}

std::optional<Settlement> decide_token_lost(const Order& order) {
  return end_reservation(order, TokenState::kBurned, OrderState::kCancelled, "token_lost",
                         "its token is no longer on the device");
}

std::optional<Settlement> decide_expiry(const Order& order, const std::string& why) {
  return end_reservation(order, TokenState::kPool, OrderState::kExpired, why, why);
}

PaymentDecision decide_payment(const Order& order, int64_t amount_cents, int64_t now_ms) {
  OrderState state = order.state;
  bool expire_first = state == OrderState::kReserved && now_ms >= order.reserve_deadline_ms;
  if (expire_first) state = OrderState::kExpired;
  if (state == OrderState::kReserved) {
    if (amount_cents != order.price_cents) return refund(kMismatchRefunded, "amount_mismatch");
    PaymentDecision d;
    d.kind = PaymentDecision::Kind::kDispatch;
    d.outcome = kPaymentApplied;
    return d;
  }
  if (state == OrderState::kExpired || state == OrderState::kCancelled) {
    PaymentDecision d = refund(kLateRefunded, "late_payment");
    d.expire_first = expire_first;
    d.order_reason = state == OrderState::kExpired ? "paid after the reservation expired"
                                                   : "paid after the order was cancelled";
    return d;
  }
  // Paid already (by another payment), or settled: this money goes back.
  return refund(kDuplicateRefunded, "duplicate_payment");
}

PaymentDecision decide_unknown_order_payment() {
  return refund(kUnknownOrderRefunded, "unknown_order");
}

ResultDecision decide_result(const Order* order, const std::string& device,
                             const proto::DispenseResult& r, int64_t now_ms) {
  if (order == nullptr || order->device != device) return ignore(ResultDecision::Ignored::kNoOrder);
  if (order->state != OrderState::kDispatched) {
    // A re-report of a settled order, or a late answer: never a second settlement.
    if (r.status == proto::DispenseStatus::kDispensed && order->state != OrderState::kCompleted) {
      ResultDecision d;
      d.kind = ResultDecision::Kind::kContradiction;
      return d;
    }
    return ignore(ResultDecision::Ignored::kSettled);
  }
  if (r.token != order->token || r.slot != order->slot) {
    return ignore(ResultDecision::Ignored::kOtherTokenOrSlot);
  }
  switch (r.status) {
    case proto::DispenseStatus::kDispensed:
      return settle(TokenState::kSold, OrderState::kCompleted, "", "", "dispensed");
    case proto::DispenseStatus::kFailed:
      // The motor ran: the token is spent, the customer gets the money back.
      return settle(TokenState::kBurned, OrderState::kFailed, r.reason,
                    "dispense_failed_" + r.reason, "dispense failed: " + r.reason);
    case proto::DispenseStatus::kUncertain:
      // Maybe dropped, maybe not: an operator decides; no automatic refund.
      return settle(TokenState::kBurned, OrderState::kNeedsReview, r.reason, "",
                    "dispense uncertain: " + r.reason);
    case proto::DispenseStatus::kRejected: break;
  }
  // REJECTED: the motor never ran for this command. Only "busy" is transient.
  if (r.reason == proto::reason::kBusy && !r.token_consumed) {
    ResultDecision d;
    d.kind = now_ms < order->dispatch_expires_at_ms ? ResultDecision::Kind::kRetry
                                                    : ResultDecision::Kind::kAwaitDeadline;
    return d;
  }
  // The token goes back to the pool only for "expired": the device restored
  // it as available. For unknown_slot / unknown_token / token_consumed the
  // device does not hold the token as available for this slot, so selling
  // it again could only fail: it is burned (reconciliation sorts out why).
  bool back = r.reason == proto::reason::kExpired && !r.token_consumed &&
              !dispatched_under_replaced_ledger(*order);
  return settle(back ? TokenState::kPool : TokenState::kBurned, OrderState::kFailed,
                "rejected_" + r.reason, "rejected_" + r.reason, "device rejected: " + r.reason);
}

bool dispatched_under_replaced_ledger(const Order& order) {
  return order.state == OrderState::kDispatched && order.reason == kLedgerReplaced;
}

std::optional<Order> decide_ledger_replaced(const Order& order) {
  if (order.state != OrderState::kDispatched || order.reason == kLedgerReplaced) {
    return std::nullopt;
  }
  Order marked = order;
  marked.reason = kLedgerReplaced;
  return marked;
}

DeadlineDecision decide_dispatch_deadline(const Order& order, int64_t now_ms,
                                          int64_t dispatch_ttl_ms, int64_t review_after_ms) {
  DeadlineDecision d;
  if (order.state != OrderState::kDispatched) return d;
  int64_t dispatched_ms = order.dispatch_expires_at_ms - dispatch_ttl_ms;
  if (now_ms < dispatched_ms + review_after_ms) {
    d.kind = DeadlineDecision::Kind::kCheck;
    return d;
  }
  // No result for so long that a person must decide: the device may be gone
  // for good. The token is burned (never sold again; reconciliation raises
  // it if the device still holds it) and the order waits for an operator.
  d.kind = DeadlineDecision::Kind::kReview;
  d.settlement = Settlement{
      TokenState::kDispatched,
      TokenState::kBurned,
      OrderState::kNeedsReview,
      "no_result",
      "",
      "no result from " + order.device + " for " + std::to_string(review_after_ms / 1000) + " s"};
  return d;
}

OverdueDecision decide_overdue(const Order& order, const proto::Snapshot& snapshot,
                               int64_t device_ts_ms, int64_t now_ms, int64_t expiry_skew_ms) {
  OverdueDecision d;
  if (order.state != OrderState::kDispatched) return d;
  int64_t cutoff = order.dispatch_expires_at_ms + expiry_skew_ms;
  if (now_ms < cutoff || device_ts_ms <= cutoff) return d;
  auto slot = std::find_if(snapshot.slots.begin(), snapshot.slots.end(),
                           [&](const proto::SlotSnapshot& s) { return s.slot == order.slot; });
  if (slot == snapshot.slots.end() || !slot->tokens) return d;
  const auto& tokens = *slot->tokens;
  const bool held = std::find(tokens.begin(), tokens.end(), order.token) != tokens.end();
  if (dispatched_under_replaced_ledger(order)) {
    // The item may have left under the old ledger: money back, token never
    // sold again (held by the new ledger or not).
    d.kind = OverdueDecision::Kind::kSettle;
    d.settlement = Settlement{
        TokenState::kDispatched,
        TokenState::kBurned,
        OrderState::kFailed,
        kLedgerReplaced,
        kLedgerReplaced,
        held ? "expired unused on the device's new ledger" : "not on the device's new ledger"};
    return d;
  }
  if (!held) {
    // Spent: the device stored a result. The (expired) command sent again
    // makes it report that result once more (it never runs a known order
    // twice), in case the first report was lost.
    d.kind = OverdueDecision::Kind::kAskResult;
    return d;
  }
  d.kind = OverdueDecision::Kind::kSettle;
  d.settlement =
      Settlement{TokenState::kDispatched, TokenState::kPool, OrderState::kFailed,
                 "never_dispensed",       "never_dispensed", "expired unused on the device"};
  return d;
}

}  // namespace vend::agent::rules
