// Deadlines alone: timers fire in deadline order with their kind and
// subject; one slot holds one timer (a new one replaces it); cancelled or
// replaced timers never act, even when they fell due in the same advance().
#include "deadlines/deadlines.hpp"

#include <doctest/doctest.h>

#include <vector>

using vend::agent::Deadlines;
using vend::agent::FiredTimer;
using vend::agent::TimerKind;
using vend::agent::TimerSlot;

TEST_CASE("timers fire in deadline order with their kind and subject") {
  Deadlines d(1000, 10);
  TimerSlot a, b, c;
  d.schedule(a, TimerKind::kReservation, 7, 1500);
  d.schedule(b, TimerKind::kResend, 0xFFFFFFFFu, 1200);
  d.schedule(c, TimerKind::kReconcile, 3, 1300);
  CHECK(d.pending() == 3);
  CHECK(d.advance(1100).empty());
  auto due = d.advance(2000);
  REQUIRE(due.size() == 3);
  CHECK(due[0].kind == TimerKind::kResend);
  CHECK(due[0].subject == 0xFFFFFFFFu);
  CHECK(due[1].kind == TimerKind::kReconcile);
  CHECK(due[1].subject == 3);
  CHECK(due[2].kind == TimerKind::kReservation);
  CHECK(due[2].subject == 7);
  CHECK(Deadlines::take(b, due[0]));
  CHECK_FALSE(b.pending());
  CHECK_FALSE(Deadlines::take(b, due[0]));  // taken once
  CHECK(d.pending() == 0);
}

TEST_CASE("timers with the same deadline fire in the order they were scheduled") {
  Deadlines d(0, 10);
  TimerSlot a, b, c;
  d.schedule(a, TimerKind::kReconcile, 9, 105);
  d.schedule(b, TimerKind::kReservation, 1, 105);
  d.schedule(c, TimerKind::kResend, 5, 105);
  auto due = d.advance(110);
  REQUIRE(due.size() == 3);
  CHECK(due[0].kind == TimerKind::kReconcile);
  CHECK(due[1].kind == TimerKind::kReservation);
  CHECK(due[2].kind == TimerKind::kResend);
}

TEST_CASE("a slot holds one timer: scheduling again replaces it") {
  Deadlines d(0, 10);
  TimerSlot s;
  d.schedule(s, TimerKind::kDispatchDeadline, 1, 100);
  d.schedule(s, TimerKind::kDispatchDeadline, 1, 300);
  CHECK(d.pending() == 1);
  CHECK(d.advance(200).empty());
  auto due = d.advance(300);
  REQUIRE(due.size() == 1);
  CHECK(Deadlines::take(s, due[0]));
}

TEST_CASE("cancel removes the timer and empties the slot") {
  Deadlines d(0, 10);
  TimerSlot s;
  d.cancel(s);  // empty: nothing happens
  d.schedule(s, TimerKind::kReservation, 5, 50);
  d.cancel(s);
  CHECK_FALSE(s.pending());
  CHECK(d.pending() == 0);
  CHECK(d.advance(1000).empty());
}

TEST_CASE("a timer cancelled or replaced after it fell due is refused by its slot") {
  Deadlines d(0, 10);
  TimerSlot deadline, resend;
  d.schedule(deadline, TimerKind::kDispatchDeadline, 9, 100);
  d.schedule(resend, TimerKind::kResend, 9, 100);
  auto due = d.advance(100);
  REQUIRE(due.size() == 2);
  // Dispatching the first cancels the second's slot, then a new resend is
  // scheduled into it: the fired one no longer matches.
  d.cancel(resend);
  d.schedule(resend, TimerKind::kResend, 9, 500);
  const FiredTimer& stale = due[0].kind == TimerKind::kResend ? due[0] : due[1];
  CHECK_FALSE(Deadlines::take(resend, stale));
  CHECK(resend.pending());
  auto later = d.advance(500);
  REQUIRE(later.size() == 1);
  CHECK(Deadlines::take(resend, later[0]));
}

TEST_CASE("timers scheduled from a dispatch fire in a later advance") {
  Deadlines d(0, 10);
  std::vector<TimerSlot> slots(100);
  for (uint32_t i = 0; i < 100; ++i) {
    d.schedule(slots[i], TimerKind::kReservation, i, 10 + static_cast<int64_t>(i));
  }
  size_t fired = 0;
  for (const auto& t : d.advance(200)) {
    REQUIRE(Deadlines::take(slots[t.subject], t));
    ++fired;
    d.schedule(slots[t.subject], TimerKind::kReservation, t.subject, 1000);
  }
  CHECK(fired == 100);
  CHECK(d.pending() == 100);
  CHECK(d.advance(999).empty());
  CHECK(d.advance(1000).size() == 100);
}
