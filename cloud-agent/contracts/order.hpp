// The agent's order and slot records: the data contract shared by the core
// (AgentCore) and its durable log (Repository), with the order state machine
// (order_state.cpp). No behaviour beyond the transition table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vend::agent {

enum class OrderState {
  kReserved,
  kPaid,
  kDispatched,
  kCompleted,
  kExpired,
  kCancelled,
  kFailed,
  kRefunded,
  kNeedsReview,
};
const char* to_string(OrderState state);
std::optional<OrderState> parse_order_state(std::string_view text);
// RESERVED->PAID->DISPATCHED->COMPLETED; RESERVED->EXPIRED|CANCELLED;
// DISPATCHED->FAILED->REFUNDED; DISPATCHED->NEEDS_REVIEW->COMPLETED|REFUNDED
// (an operator's resolution); EXPIRED->REFUNDED and CANCELLED->REFUNDED (a
// payment that arrives for an expired or cancelled order is refunded).
// Nothing else, not even X->X.
bool is_legal_transition(OrderState from, OrderState to);

struct Order {
  std::string id;
  std::string device;
  int slot = 0;
  std::string token;
  int64_t price_cents = 0;
  OrderState state = OrderState::kReserved;
  int64_t created_ms = 0;  // wall clock
  int64_t updated_ms = 0;
  int64_t reserve_deadline_ms = 0;     // wall clock: RESERVED expires after this
  int64_t dispatch_expires_at_ms = 0;  // the command's expires_at_ms (0 before dispatch)
  std::string payment_id;
  std::string reason;  // why FAILED / REFUNDED / NEEDS_REVIEW
  // The scoped key "<client>\n<key>" (create_order), stored as is in the
  // orders.idempotency_key column; empty without a key. Internal: never
  // shown to any client (http::order_json leaves it out).
  std::string idempotency_key;
  // Who reserved it (AgentCore::create_order's client: "id:<X-Client-Id>"
  // or "addr:<peer>"), stored so that a restart counts its open
  // reservation against the client's cap again. Internal, like the key.
  std::string client;
  // Only in pay()'s answer: what happened to THIS payment. "applied" (it
  // paid the order), "duplicate_payment_refunded" (the order was already
  // paid by another payment), "late_payment_refunded" (the order had
  // expired or was cancelled), "amount_mismatch_refunded" (the amount was
  // not the price; the order is unchanged), "unknown_order_refunded" (no
  // such order: only `id` is set and `known` is false). Empty elsewhere.
  std::string payment_outcome;
  bool known = true;
};

struct SlotSpec {
  int slot = 0;
  std::string product;
  int64_t price_cents = 0;
  int capacity = 10;
};

// A firmware update an operator asks of one device (POST
// /v1/devices/{id}/update): what the `update` command carries besides its
// device, id and expiry. `signature` was made offline with the update key.
struct UpdateRequest {
  std::string version;
  std::string url;
  uint64_t size_bytes = 0;
  std::string sha256;
  std::string signature;
};

}  // namespace vend::agent
