// The order lifecycle's decisions: what a cancel, a decommission, an
// expiry, a token lost from its machine, an operator's review, a payment, a
// dispense result, a passed dispatch deadline or a device snapshot does to
// an order, returned as a value. Pure functions: no state, no clock (times are passed in), no
// log, no I/O. The core's OrderDesk (cloud-agent/core/order_desk.hpp)
// applies what they decide — the token move, the state change, the refund, the changeset, the log
// line — and one Settlement is applied the same way whatever decided it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "contracts/order.hpp"
#include "contracts/repository_types.hpp"
#include "vend/protocol.hpp"

namespace vend::agent::rules {

// Where an order's token goes, the order's new state and reason, the refund
// (if any) and the text of the transition in its history.
struct Settlement {
  TokenState token_from = TokenState::kDispatched;
  TokenState token = TokenState::kBurned;  // kPool: back to the pool; == token_from: no move
  // The new state. With a refund, the state passed on the way to REFUNDED
  // (kRefunded: straight there).
  OrderState to = OrderState::kFailed;
  std::string reason;         // Order::reason ("" leaves it)
  std::string refund_reason;  // "" = no refund; else the order then ends REFUNDED
  std::string detail;         // the transition's text (unused when `to` is kRefunded)
};

// ---- customers' and operators' requests, reservations ----
struct RequestDecision {
  enum class Kind {
    kApply,   // `settlement`
    kRepeat,  // already done by the same request: answered with the order as it is
    kRefuse,  // not in a state the request applies to (invalid_state)
  };
  Kind kind = Kind::kRefuse;
  Settlement settlement;
};
// A customer's cancel: only a RESERVED order; its token goes back.
RequestDecision decide_cancel(const Order& order);
// An operator's resolution of a NEEDS_REVIEW order (its token burned):
// dispensed counts the token sold and completes the order; not dispensed
// refunds it. `why`: the resolution's words (who, and the note).
RequestDecision decide_review(const Order& order, bool dispensed, const std::string& why);
// The order's machine is decommissioned: a RESERVED order is cancelled, its
// token back in the pool (the decommission then burns the pool); nullopt
// for any other state (a paid order in flight holds the decommission off).
std::optional<Settlement> decide_withdrawal(const Order& order);
// Reconciliation found the reservation's token gone from its machine: it
// can never be dispensed, so a RESERVED order is cancelled and its token
// burned (a payment arriving later is refunded as for any cancelled order);
// nullopt for any other state.
std::optional<Settlement> decide_token_lost(const Order& order);
// A reservation's deadline passed: only a RESERVED order expires (a paid
// one is never taken back); its token goes back.
std::optional<Settlement> decide_expiry(const Order& order, const std::string& why);

// ---- payments ----
// The outcome of a payment that paid its order.
inline constexpr const char* kPaymentApplied = "applied";

// What a verified payment notification (its id new to the agent) does to
// its order.
struct PaymentDecision {
  enum class Kind {
    kDispatch,  // RESERVED, in time, the price: PAID -> DISPATCHED
    kRefund,    // recorded and refunded (outcome, refund_reason)
  };
  Kind kind = Kind::kRefund;
  // RESERVED past its deadline whose timer has not fired: expired first
  // (the token back in the pool), then refunded as a late payment.
  bool expire_first = false;
  const char* outcome = "";        // the payment's recorded outcome, what a repeat is answered
  const char* refund_reason = "";  // kRefund
  // A late payment (the order EXPIRED or was CANCELLED, and never had a
  // payment) is the order's: it ends REFUNDED with this reason.
  std::optional<std::string> order_reason;
};
PaymentDecision decide_payment(const Order& order, int64_t amount_cents, int64_t now_ms);
// A payment for an order id the agent never had: recorded and refunded.
PaymentDecision decide_unknown_order_payment();

// ---- a device's ledger replaced ----
// The reason of a DISPATCHED order whose device switched to another ledger
// (a new board, or a file that went back in time) before its result came:
// the device's new ledger may not know the order although its item may have
// left the machine, so its token is never sold again. Such an order's
// command is not sent again (it names the old ledger; the device refuses
// it); a result carried over to the new ledger, or a late one of the old,
// still settles it, and where another order's token would go back to the
// pool (rejected as expired, never dispensed) this one's is burned.
inline constexpr const char* kLedgerReplaced = "ledger_replaced";
// True for a DISPATCHED order marked kLedgerReplaced.
bool dispatched_under_replaced_ledger(const Order& order);
// The order, marked when DISPATCHED and not marked yet; nullopt otherwise.
std::optional<Order> decide_ledger_replaced(const Order& order);

// ---- dispense results ----
struct ResultDecision {
  enum class Kind {
    kIgnore,         // no such order here, another token or slot, or already settled
    kContradiction,  // DISPENSED for an order settled otherwise: alert and fault, no change
    kRetry,          // busy, in time: the command is sent again after a pause
    kAwaitDeadline,  // busy past expiry: the dispatch deadline settles it
    kSettle,         // `settlement`; the payment-to-result latency is sampled
  };
  Kind kind = Kind::kIgnore;
  // kIgnore: why nothing changes. kOtherTokenOrSlot is suspicious (a bug
  // or a forgery: the coordinator warns).
  enum class Ignored { kNoOrder, kSettled, kOtherTokenOrSlot };
  Ignored ignored = Ignored::kNoOrder;
  Settlement settlement;
};
// `order`: the order the result names, nullptr when the agent has none;
// `device`: the reporting device.
ResultDecision decide_result(const Order* order, const std::string& device,
                             const proto::DispenseResult& result, int64_t now_ms);

// ---- time ----
// A DISPATCHED order's deadline (expiry + skew) passed without a result.
struct DeadlineDecision {
  enum class Kind {
    kNone,    // not DISPATCHED any more
    kCheck,   // ask the device for a snapshot; look again after the recheck interval
    kReview,  // no result for `review_after_ms` since dispatch: `settlement` (NEEDS_REVIEW)
  };
  Kind kind = Kind::kNone;
  Settlement settlement;
};
DeadlineDecision decide_dispatch_deadline(const Order& order, int64_t now_ms,
                                          int64_t dispatch_ttl_ms, int64_t review_after_ms);

// A full snapshot of the order's device, taken at the device's `device_ts_ms`.
struct OverdueDecision {
  enum class Kind {
    kNone,       // not DISPATCHED, not overdue, or the snapshot does not show its slot's tokens
    kAskResult,  // the token is spent on the device: its stored result is asked for again
    kSettle,     // the command can never run and the token is still there: `settlement`
  };
  Kind kind = Kind::kNone;
  Settlement settlement;
};
// Overdue: the agent's and the device's clocks are both past the command's
// expiry + `expiry_skew_ms` (the command can no longer run on the device).
// An order dispatched under a replaced ledger is settled from the new
// ledger's snapshot either way, refunded with its token burned: its result
// cannot be asked for (the new ledger does not know the order).
OverdueDecision decide_overdue(const Order& order, const proto::Snapshot& snapshot,
                               int64_t device_ts_ms, int64_t now_ms, int64_t expiry_skew_ms);

}  // namespace vend::agent::rules
