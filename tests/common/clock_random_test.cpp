#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST_CASE("SecureRandom hands out each buffered byte once, across refills") {
  vend::SecureRandom s;
  std::set<uint64_t> seen;
  const size_t draws = 10 * vend::SecureRandom::kBufferBytes / sizeof(uint64_t);
  for (size_t i = 0; i < draws; ++i) seen.insert(s.next_u64());
  CHECK(seen.size() == draws);  // 64-bit collisions: ~2^-45 here
}

TEST_CASE("a forked child never repeats its parent's buffered SecureRandom bytes") {
  vend::SecureRandom s;
  (void)s.next_u64();  // the buffer now holds bytes the parent will hand out next
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    uint64_t v = s.next_u64();
    _exit(write(fds[1], &v, sizeof v) == static_cast<ssize_t>(sizeof v) ? 0 : 1);
  }
  close(fds[1]);
  uint64_t from_child = 0;
  REQUIRE(read(fds[0], &from_child, sizeof from_child) == static_cast<ssize_t>(sizeof from_child));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(s.next_u64() != from_child);
}
