// The order state machine: names round-trip, and the full 9x9 table of
// transitions is exactly the documented one.
#include <doctest/doctest.h>

#include <set>
#include <utility>

#include "contracts/order.hpp"

using vend::agent::is_legal_transition;
using vend::agent::OrderState;
using vend::agent::parse_order_state;
using vend::agent::to_string;

namespace {

const OrderState kAll[] = {OrderState::kReserved,  OrderState::kPaid,     OrderState::kDispatched,
                           OrderState::kCompleted, OrderState::kExpired,  OrderState::kCancelled,
                           OrderState::kFailed,    OrderState::kRefunded, OrderState::kNeedsReview};

}  // namespace

TEST_CASE("state names round-trip and unknown names are refused") {
  std::set<std::string> names;
  for (OrderState s : kAll) {
    names.insert(to_string(s));
    CHECK(parse_order_state(to_string(s)) == s);
  }
  CHECK(names.size() == 9);
  CHECK(std::string(to_string(OrderState::kNeedsReview)) == "NEEDS_REVIEW");
  CHECK_FALSE(parse_order_state("reserved").has_value());
  CHECK_FALSE(parse_order_state("").has_value());
  CHECK_FALSE(parse_order_state("SHIPPED").has_value());
}

TEST_CASE("every legal transition is allowed and every other one refused (9x9)") {
  const std::set<std::pair<OrderState, OrderState>> legal = {
      {OrderState::kReserved, OrderState::kPaid},
      {OrderState::kReserved, OrderState::kExpired},
      {OrderState::kReserved, OrderState::kCancelled},
      {OrderState::kPaid, OrderState::kDispatched},
      {OrderState::kDispatched, OrderState::kCompleted},
      {OrderState::kDispatched, OrderState::kFailed},
      {OrderState::kDispatched, OrderState::kNeedsReview},
      {OrderState::kFailed, OrderState::kRefunded},
      {OrderState::kExpired, OrderState::kRefunded},
      {OrderState::kCancelled, OrderState::kRefunded},
      {OrderState::kNeedsReview, OrderState::kCompleted},
      {OrderState::kNeedsReview, OrderState::kRefunded},
  };
  int allowed = 0;
  for (OrderState from : kAll) {
    for (OrderState to : kAll) {
      bool expected = legal.count({from, to}) == 1;
      CHECK_MESSAGE(is_legal_transition(from, to) == expected, to_string(from)
                                                                   << " -> " << to_string(to));
      if (is_legal_transition(from, to)) ++allowed;
    }
  }
  CHECK(allowed == 12);
}

TEST_CASE("terminal states go nowhere") {
  for (OrderState terminal : {OrderState::kCompleted, OrderState::kRefunded}) {
    for (OrderState to : kAll) CHECK_FALSE(is_legal_transition(terminal, to));
  }
  // Nothing goes back to RESERVED, and a paid order is never expired or cancelled.
  for (OrderState from : kAll) CHECK_FALSE(is_legal_transition(from, OrderState::kReserved));
  for (OrderState from : {OrderState::kPaid, OrderState::kDispatched}) {
    CHECK_FALSE(is_legal_transition(from, OrderState::kExpired));
    CHECK_FALSE(is_legal_transition(from, OrderState::kCancelled));
  }
}
