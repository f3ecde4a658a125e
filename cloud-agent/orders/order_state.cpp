// Order states: names and the table of legal transitions.
#include <array>

#include "contracts/order.hpp"

namespace vend::agent {

namespace {

constexpr size_t kStates = 9;

constexpr size_t index_of(OrderState s) { return static_cast<size_t>(s); }

// kLegal[from][to]. Everything not listed is illegal, including staying in
// the same state (a repeat is answered from memory, never written again).
constexpr std::array<std::array<bool, kStates>, kStates> make_table() {
  std::array<std::array<bool, kStates>, kStates> t{};
  auto allow = [&t](OrderState from, OrderState to) { t[index_of(from)][index_of(to)] = true; };
  allow(OrderState::kReserved, OrderState::kPaid);
  allow(OrderState::kReserved, OrderState::kExpired);
  allow(OrderState::kReserved, OrderState::kCancelled);
  allow(OrderState::kPaid, OrderState::kDispatched);
  allow(OrderState::kDispatched, OrderState::kCompleted);
  allow(OrderState::kDispatched, OrderState::kFailed);
  allow(OrderState::kDispatched, OrderState::kNeedsReview);
  allow(OrderState::kFailed, OrderState::kRefunded);
  // An operator resolves a review: it dropped, or the customer is refunded.
  allow(OrderState::kNeedsReview, OrderState::kCompleted);
  allow(OrderState::kNeedsReview, OrderState::kRefunded);
  // A payment that arrives after the reservation ended is refunded.
  allow(OrderState::kExpired, OrderState::kRefunded);
  allow(OrderState::kCancelled, OrderState::kRefunded);
  return t;
}

constexpr auto kLegal = make_table();

constexpr std::array<OrderState, kStates> kAll = {
    OrderState::kReserved,  OrderState::kPaid,     OrderState::kDispatched,
    OrderState::kCompleted, OrderState::kExpired,  OrderState::kCancelled,
    OrderState::kFailed,    OrderState::kRefunded, OrderState::kNeedsReview};

}  // namespace

const char* to_string(OrderState state) {
  switch (state) {
    case OrderState::kReserved: return "RESERVED";
    case OrderState::kPaid: return "PAID";
    case OrderState::kDispatched: return "DISPATCHED";
    case OrderState::kCompleted: return "COMPLETED";
    case OrderState::kExpired: return "EXPIRED";
    case OrderState::kCancelled: return "CANCELLED";
    case OrderState::kFailed: return "FAILED";
    case OrderState::kRefunded: return "REFUNDED";
    case OrderState::kNeedsReview: return "NEEDS_REVIEW";
  }
  return "?";
}

std::optional<OrderState> parse_order_state(std::string_view text) {
  for (OrderState s : kAll) {
    if (text == to_string(s)) return s;
  }
  return std::nullopt;
}

bool is_legal_transition(OrderState from, OrderState to) {
  return kLegal[index_of(from)][index_of(to)];
}

}  // namespace vend::agent
