#include <doctest/doctest.h>

#include <limits>
#include <set>

#include "vend/clock.hpp"
#include "vend/random.hpp"

TEST_CASE("ManualClock advances both clocks and skews only the wall clock") {
  vend::ManualClock clock(1000, 50);
  clock.advance(25);
  CHECK(clock.wall_ms() == 1025);
  CHECK(clock.monotonic_ms() == 75);
  clock.set_wall_skew(-500);
  CHECK(clock.wall_ms() == 525);
  CHECK(clock.monotonic_ms() == 75);
}

TEST_CASE("deadline sums saturate at the int64 limits instead of wrapping") {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  CHECK(vend::saturating_add(kMax, 5000) == kMax);
  CHECK(vend::saturating_add(kMax - 10, 5) == kMax - 5);
  CHECK(vend::saturating_add(kMin, -1) == kMin);
  CHECK(vend::saturating_add(1, 2) == 3);
  CHECK_FALSE(vend::past_deadline(1'700'000'000'000, kMax, 5000));
  CHECK_FALSE(vend::past_deadline(kMax, kMax, 0));
  CHECK(vend::past_deadline(1001, 500, 500));
  CHECK_FALSE(vend::past_deadline(1000, 500, 500));
}

TEST_CASE("SystemClock is monotonic and near the epoch now") {
  vend::SystemClock clock;
  int64_t a = clock.monotonic_ms();
  int64_t b = clock.monotonic_ms();
  CHECK(b >= a);
  CHECK(clock.wall_ms() > 1'700'000'000'000);
}

TEST_CASE("SeededRandom reproduces a sequence from its seed, on every CPU") {
  vend::SeededRandom a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.next_u64();
    CHECK(x == b.next_u64());
    CHECK(x != c.next_u64());
  }
  // Pinned value: the same seed must give the same ids on x86 and ARM.
  vend::SeededRandom d(7);
  CHECK(d.id128() == vend::SeededRandom(7).id128());
  vend::SeededRandom e(1);
  CHECK(e.next_u64() == 0xb3f2af6d0fc710c5ULL);
}

TEST_CASE("Random helpers stay in range") {
  vend::SeededRandom r(1);
  std::set<int64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    int64_t v = r.range(3, 6);
    CHECK(v >= 3);
    CHECK(v <= 6);
    seen.insert(v);
    double u = r.uniform();
    CHECK(u >= 0.0);
    CHECK(u < 1.0);
  }
  CHECK(seen.size() == 4);
  vend::SecureRandom s;
  CHECK(s.id128() != s.id128());
}
