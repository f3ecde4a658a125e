// RateLimitedLog on a ManualClock: one line per (source, reason) per
// interval, the suppressed count logged when the interval ends, and a bounded
// number of lines and keys whatever the input.
#include "vend/log_limiter.hpp"

#include <doctest/doctest.h>

#include <string>

#include "vend/clock.hpp"
#include "vend/log.hpp"

using vend::LogLevel;
using vend::ManualClock;
using vend::MemoryLogger;
using vend::RateLimitedLog;

namespace {
RateLimitedLog::Options opts(int64_t interval_ms, size_t max_keys) {
  RateLimitedLog::Options o;
  o.interval_ms = interval_ms;
  o.max_keys = max_keys;
  return o;
}
}  // namespace

TEST_CASE("one line per (source, reason) per interval, then the suppressed count") {
  ManualClock clock;
  MemoryLogger log;
  RateLimitedLog limited(clock, log, opts(1000, 8));
  CHECK(limited.log(LogLevel::kWarn, "agent", "vm-1", "bad_mac", "first"));
  for (int i = 0; i < 99; ++i) {
    CHECK_FALSE(limited.log(LogLevel::kWarn, "agent", "vm-1", "bad_mac", "again"));
  }
  CHECK(limited.log(LogLevel::kWarn, "agent", "vm-1", "bad_json", "other reason"));
  CHECK(limited.log(LogLevel::kWarn, "agent", "vm-2", "bad_mac", "other source"));
  CHECK(log.records().size() == 3);
  CHECK(limited.suppressed_total() == 99);

  clock.advance(999);
  limited.flush();  // not over yet: nothing summarized
  CHECK(log.records().size() == 3);
  clock.advance(1);
  limited.flush();
  auto records = log.records();
  REQUIRE(records.size() == 4);
  CHECK(records[3].message == "99 similar line(s) (vm-1, bad_mac) suppressed in the last 1 s");
  CHECK(records[3].level == LogLevel::kWarn);
  CHECK(records[3].component == "agent");
  CHECK(limited.tracked_keys() == 0);  // every interval ended: forgotten
}

TEST_CASE("the next line after an interval carries the summary first") {
  ManualClock clock;
  MemoryLogger log;
  RateLimitedLog limited(clock, log, opts(1000, 8));
  limited.log(LogLevel::kWarn, "fw", "dispense", "bad_mac", "one");
  limited.log(LogLevel::kWarn, "fw", "dispense", "bad_mac", "two");
  clock.advance(2500);
  CHECK(limited.log(LogLevel::kWarn, "fw", "dispense", "bad_mac", "three"));
  auto records = log.records();
  REQUIRE(records.size() == 3);
  CHECK(records[1].message == "1 similar line(s) (dispense, bad_mac) suppressed in the last 2 s");
  CHECK(records[2].message == "three");
}

TEST_CASE("many distinct keys: bounded keys and lines through the overflow key") {
  ManualClock clock;
  MemoryLogger log;
  RateLimitedLog limited(clock, log, opts(60'000, 4));
  for (int i = 0; i < 10'000; ++i) {
    limited.log(LogLevel::kWarn, "agent", "vm-" + std::to_string(i), "bad_json", "junk");
  }
  CHECK(limited.tracked_keys() == 5);  // 4 keys + the overflow one
  CHECK(log.records().size() == 5);    // one line each
  CHECK(limited.suppressed_total() == 10'000 - 5);
  clock.advance(60'000);
  limited.flush();
  auto records = log.records();
  REQUIRE(records.size() == 6);
  CHECK(records[5].message ==
        "9995 similar line(s) (other sources and reasons) suppressed in the last 60 s");
}

TEST_CASE("long sources and reasons are cut, so a key stays small") {
  ManualClock clock;
  MemoryLogger log;
  RateLimitedLog limited(clock, log, opts(1000, 2));
  std::string a(5000, 'a');
  CHECK(limited.log(LogLevel::kWarn, "agent", a + "x", a, "one"));
  CHECK_FALSE(limited.log(LogLevel::kWarn, "agent", a + "y", a + "z", "same cut key"));
}

TEST_CASE("interval 0 logs every line") {
  ManualClock clock;
  MemoryLogger log;
  RateLimitedLog limited(clock, log, opts(0, 2));
  for (int i = 0; i < 5; ++i) CHECK(limited.log(LogLevel::kInfo, "c", "s", "r", "m"));
  CHECK(log.records().size() == 5);
  CHECK(limited.suppressed_total() == 0);
}

TEST_CASE("Logger::enabled: a stderr logger says which levels it drops; a null logger drops all") {
  vend::StderrLogger warn_up(LogLevel::kWarn);
  CHECK_FALSE(warn_up.enabled(LogLevel::kDebug));
  CHECK_FALSE(warn_up.enabled(LogLevel::kInfo));
  CHECK(warn_up.enabled(LogLevel::kWarn));
  CHECK(warn_up.enabled(LogLevel::kError));
  vend::NullLogger null;
  CHECK_FALSE(null.enabled(LogLevel::kError));
  MemoryLogger memory;  // keeps everything: tests read debug lines too
  CHECK(memory.enabled(LogLevel::kDebug));
}
