#include "deadlines/timing_wheel.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "vend/random.hpp"

using vend::agent::TimerId;
using vend::agent::TimingWheel;

namespace {

constexpr int64_t kStart = 1'000'000;
constexpr int64_t kMinute = 60'000;
constexpr int64_t kDay = 24 * 60 * kMinute;

struct Fired {
  uint64_t payload;
  int64_t deadline_ms;
  int64_t now_ms;
};

// Advances and records what fired, checking the order promise on the way.
std::vector<Fired> advance(TimingWheel& wheel, int64_t now_ms) {
  std::vector<Fired> fired;
  size_t n = wheel.advance(now_ms, [&](uint64_t payload, int64_t deadline_ms) {
    if (!fired.empty()) CHECK(fired.back().deadline_ms <= deadline_ms);
    fired.push_back({payload, deadline_ms, now_ms});
  });
  CHECK(n == fired.size());
  return fired;
}

// The first time a timer may fire: its deadline rounded up to a tick.
int64_t fire_time(int64_t deadline_ms, int64_t tick_ms) {
  if (deadline_ms <= kStart) return kStart;
  int64_t ticks = (deadline_ms - kStart + tick_ms - 1) / tick_ms;
  return kStart + ticks * tick_ms;
}

}  // namespace

TEST_CASE("a timer fires at the first advance at or after its tick-rounded deadline") {
  TimingWheel wheel(kStart, 10);
  std::vector<int64_t> deadlines = {kStart,
                                    kStart + 1,
                                    kStart + 9,
                                    kStart + 10,
                                    kStart + 11,
                                    kStart + 255 * 10,
                                    kStart + 256 * 10 + 3,
                                    kStart + 1234};
  for (size_t i = 0; i < deadlines.size(); ++i) wheel.schedule(deadlines[i], i);
  CHECK(wheel.size() == deadlines.size());
  std::vector<Fired> all;
  for (int64_t now = kStart; now <= kStart + 3000; ++now) {
    for (const Fired& f : advance(wheel, now)) all.push_back(f);
  }
  REQUIRE(all.size() == deadlines.size());
  for (const Fired& f : all) {
    CAPTURE(f.deadline_ms);
    CHECK(f.now_ms >= f.deadline_ms);  // never early
    CHECK(f.now_ms == fire_time(f.deadline_ms, 10));
    CHECK(f.now_ms - f.deadline_ms < 10);  // granularity: under one tick late
  }
  CHECK(wheel.size() == 0);
}

TEST_CASE("tick_ms = 1 fires exactly at the deadline") {
  TimingWheel wheel(kStart, 1);
  for (int64_t d : {kStart + 1, kStart + 300, kStart + 70'000, kStart + 17'000'000}) {
    wheel.schedule(d, static_cast<uint64_t>(d));
    CHECK(advance(wheel, d - 1).empty());
    auto fired = advance(wheel, d);
    REQUIRE(fired.size() == 1);
    CHECK(fired[0].deadline_ms == d);
  }
}

TEST_CASE("a deadline in the past fires on the next advance") {
  TimingWheel wheel(kStart, 10);
  wheel.schedule(kStart - 5 * kDay, 1);  // before the wheel's start
  auto fired = advance(wheel, kStart);
  REQUIRE(fired.size() == 1);
  CHECK(fired[0].payload == 1);
  advance(wheel, kStart + kMinute);
  wheel.schedule(kStart + 10, 2);  // long past by now
  wheel.schedule(kStart + kMinute, 3);
  fired = advance(wheel, kStart + kMinute);  // time did not move: still fires both
  REQUIRE(fired.size() == 2);
  CHECK(fired[0].payload == 2);
  CHECK(fired[1].payload == 3);
  CHECK(advance(wheel, kStart).empty());  // time going back fires nothing new
}

TEST_CASE("cancel removes a timer; stale, fired and unknown ids are refused") {
  TimingWheel wheel(kStart, 10);
  TimerId a = wheel.schedule(kStart + 100, 1);
  CHECK(a.valid());
  CHECK(wheel.cancel(a));
  CHECK_FALSE(wheel.cancel(a));
  TimerId b = wheel.schedule(kStart + 100, 2);  // reuses a's node
  CHECK_FALSE(b == a);
  CHECK_FALSE(wheel.cancel(a));  // a stale id cannot cancel b
  CHECK(wheel.size() == 1);
  CHECK_FALSE(wheel.cancel(TimerId{}));
  CHECK_FALSE(wheel.cancel(TimerId{(uint64_t{1} << 32) | 12345}));
  auto fired = advance(wheel, kStart + 100);
  REQUIRE(fired.size() == 1);
  CHECK(fired[0].payload == 2);
  CHECK_FALSE(wheel.cancel(b));  // already fired
}

TEST_CASE("timers fire in deadline order within one advance, across levels") {
  vend::SeededRandom rng(7);
  TimingWheel wheel(kStart, 10);
  for (uint64_t i = 0; i < 20'000; ++i) wheel.schedule(kStart + rng.range(-100, 40 * kDay), i);
  auto fired = advance(wheel, kStart + 41 * kDay);  // advance() checks the order
  CHECK(fired.size() == 20'000);
  CHECK(std::is_sorted(fired.begin(), fired.end(), [](const Fired& x, const Fired& y) {
    return x.deadline_ms < y.deadline_ms;
  }));
}

TEST_CASE("a jump of days fires everything due and nothing more") {
  TimingWheel wheel(kStart, 10);
  for (uint64_t i = 0; i < 3000; ++i) wheel.schedule(kStart + static_cast<int64_t>(i) * kMinute, i);
  auto fired = advance(wheel, kStart + 2 * kDay);  // 2880 minutes
  CHECK(fired.size() == 2881);
  CHECK(wheel.size() == 3000 - 2881);
  fired = advance(wheel, kStart + 400 * kDay);
  CHECK(fired.size() == 3000 - 2881);
  CHECK(wheel.size() == 0);
  CHECK_FALSE(wheel.next_wakeup_ms().has_value());
}

TEST_CASE("far deadlines cascade through every level and the overflow list") {
  for (int64_t tick : {1, 10}) {
    CAPTURE(tick);
    TimingWheel wheel(kStart, tick);
    // With 1 ms ticks the levels span 2^32 ms (~49.7 days): beyond is overflow.
    std::vector<int64_t> deadlines = {kStart + 3 * kDay,   kStart + 49 * kDay,
                                      kStart + 50 * kDay,  kStart + 120 * kDay + 7,
                                      kStart + 498 * kDay, kStart + 3 * 365 * kDay + 1};
    for (size_t i = 0; i < deadlines.size(); ++i) wheel.schedule(deadlines[i], i);
    size_t next = 0;
    for (int64_t now = kStart; next < deadlines.size(); now += kDay / 3) {
      for (const Fired& f : advance(wheel, now)) {
        REQUIRE(next < deadlines.size());
        CHECK(f.payload == next);
        CHECK(f.deadline_ms <= now);
        CHECK(f.deadline_ms > now - kDay / 3 - tick);  // by the first advance past it
        ++next;
      }
    }
    CHECK(wheel.size() == 0);
  }
}

TEST_CASE("the fire callback may schedule and cancel") {
  TimingWheel wheel(kStart, 10);
  TimerId victim = wheel.schedule(kStart + 500, 99);
  wheel.schedule(kStart + 100, 1);
  std::vector<uint64_t> order;
  size_t n = wheel.advance(kStart + 1000, [&](uint64_t payload, int64_t deadline_ms) {
    order.push_back(payload);
    if (payload == 1) {
      CHECK(wheel.cancel(victim));
      wheel.schedule(deadline_ms + 200, 2);  // still within this advance
      wheel.schedule(kStart + 5000, 3);      // later
    }
  });
  CHECK(n == 2);
  CHECK(order == std::vector<uint64_t>{1, 2});
  CHECK(wheel.size() == 1);
}

TEST_CASE("next_wakeup_ms is never after the next firing") {
  TimingWheel wheel(kStart, 10);
  CHECK_FALSE(wheel.next_wakeup_ms().has_value());
  wheel.schedule(kStart + 3 * kDay + 5, 1);
  int64_t now = kStart;
  size_t fired = 0;
  for (int steps = 0; fired == 0 && steps < 10; ++steps) {
    auto wake = wheel.next_wakeup_ms();
    REQUIRE(wake.has_value());
    CHECK(*wake <= fire_time(kStart + 3 * kDay + 5, 10));
    CHECK(*wake > now);
    now = *wake;
    fired = advance(wheel, now).size();
  }
  CHECK(fired == 1);
  CHECK(now == fire_time(kStart + 3 * kDay + 5, 10));
}

// ---------------------------------------------------------------------------
// A million timers against a model: std::multimap by first firing time.

namespace {

enum class State { kPending, kCancelled, kFired };

class ModelCheck {
 public:
  ModelCheck(TimingWheel& wheel, vend::Random& rng) : wheel_(wheel), rng_(rng) {}

  void schedule(int64_t deadline_ms) {
    uint64_t payload = add(deadline_ms);
    where_[payload] = model_.emplace(fire_time(deadline_ms, wheel_.tick_ms()), payload);
  }

  // Many at once; the model is filled in firing order (a random-order fill of
  // a million-node multimap would dominate the test's run time).
  void schedule_batch(const std::vector<int64_t>& deadlines) {
    std::vector<std::pair<int64_t, uint64_t>> sorted;
    sorted.reserve(deadlines.size());
    for (int64_t d : deadlines) sorted.emplace_back(fire_time(d, wheel_.tick_ms()), add(d));
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [fire_at, payload] : sorted) {
      where_[payload] = model_.emplace_hint(model_.end(), fire_at, payload);
    }
  }

  // Cancels a random timer (pending or not): the wheel must agree with the model.
  void cancel_random() {
    uint64_t p = static_cast<uint64_t>(rng_.range(0, static_cast<int64_t>(ids_.size()) - 1));
    bool pending = state_[p] == State::kPending;
    bool cancelled = wheel_.cancel(ids_[p]);
    if (cancelled != pending) REQUIRE(cancelled == pending);
    if (pending) {
      model_.erase(where_[p]);
      state_[p] = State::kCancelled;
    }
  }

  void advance_to(int64_t now_ms) {
    std::vector<uint64_t> got;
    int64_t last_deadline = INT64_MIN;
    bool consistent = true;  // one assertion per advance: a million REQUIREs are slow
    wheel_.advance(now_ms, [&](uint64_t payload, int64_t deadline_ms) {
      consistent = consistent && payload < state_.size() && state_[payload] == State::kPending &&
                   deadline_ms == deadline_[payload] && deadline_ms >= last_deadline;
      if (!consistent) return;
      last_deadline = deadline_ms;
      state_[payload] = State::kFired;
      got.push_back(payload);
    });
    REQUIRE(consistent);
    std::vector<uint64_t> want;
    auto end = model_.upper_bound(now_ms);
    for (auto it = model_.begin(); it != end; ++it) want.push_back(it->second);
    model_.erase(model_.begin(), end);
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    REQUIRE(got == want);
    REQUIRE(wheel_.size() == model_.size());
  }

  size_t pending() const { return model_.size(); }

 private:
  uint64_t add(int64_t deadline_ms) {
    uint64_t payload = ids_.size();
    ids_.push_back(wheel_.schedule(deadline_ms, payload));
    state_.push_back(State::kPending);
    deadline_.push_back(deadline_ms);
    where_.emplace_back();
    return payload;
  }

  TimingWheel& wheel_;
  vend::Random& rng_;
  std::vector<TimerId> ids_;
  std::vector<State> state_;
  std::vector<int64_t> deadline_;
  std::multimap<int64_t, uint64_t> model_;  // first firing time -> payload
  std::vector<std::multimap<int64_t, uint64_t>::iterator> where_;
};

int64_t random_delay(vend::Random& rng) {
  double p = rng.uniform();
  if (p < 0.70) return rng.range(-1000, 10 * kMinute);
  if (p < 0.95) return rng.range(10 * kMinute, 30 * kDay);
  return rng.range(30 * kDay, 2 * 365 * kDay);
}

int64_t random_step(vend::Random& rng, int64_t elapsed) {
  if (elapsed < 15 * kMinute) return rng.range(1, 2000);
  double p = rng.uniform();
  if (p < 0.5) return rng.range(1, 2000);
  if (p < 0.8) return rng.range(1, 60 * kMinute);
  if (p < 0.95) return rng.range(1, 5 * kDay);
  return rng.range(1, 60 * kDay);
}

}  // namespace

TEST_CASE("1M timers with random cancels and advances fire exactly as the model says") {
  vend::SeededRandom rng(20'251'129);
  TimingWheel wheel(kStart, 10);
  ModelCheck check(wheel, rng);
  std::vector<int64_t> deadlines;
  deadlines.reserve(1'000'000);
  for (int i = 0; i < 1'000'000; ++i) deadlines.push_back(kStart + random_delay(rng));
  check.schedule_batch(deadlines);
  for (int i = 0; i < 400'000; ++i) check.cancel_random();
  int64_t now = kStart;
  while (now < kStart + 2 * 365 * kDay) {
    now += random_step(rng, now - kStart);
    for (int i = 0; i < 20; ++i) check.schedule(now + random_delay(rng));
    for (int i = 0; i < 10; ++i) check.cancel_random();
    check.advance_to(now);
  }
  check.advance_to(now + 3 * 365 * kDay);
  CHECK(check.pending() == 0);
  CHECK(wheel.size() == 0);
}
