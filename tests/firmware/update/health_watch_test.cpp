// After the boot of an update: HealthWatch decides installed or rollback;
// BootMarker is the file the root helper and the daemon share.
#include "update/health_watch.hpp"

#include <doctest/doctest.h>

#include <string>

namespace vend::fw {
namespace {

using proto::UpdateState;

BootMarker pending(const std::string& version = "0.2.0") {
  return BootMarker{BootMarker::State::kPending, "upd-7", version, "0.1.0", ""};
}

constexpr HealthInputs kHealthy{true, true, true};
constexpr int64_t kBound = 120'000;

TEST_CASE("a healthy new version reports installed, then marks good") {
  ManualClock clock;
  HealthWatch watch(clock, pending(), "0.2.0", kBound);
  BootEffects effects;
  watch.start(effects);
  CHECK(effects.empty());
  CHECK(watch.watching());
  watch.tick(HealthInputs{false, true, true}, effects);  // not online yet
  CHECK(effects.empty());
  clock.advance(5'000);
  watch.tick(kHealthy, effects);
  REQUIRE(effects.size() == 2);
  CHECK(std::get<ReportStatus>(effects[0]).status ==
        proto::UpdateStatus{"upd-7", UpdateState::kInstalled, "0.2.0", ""});
  CHECK(std::holds_alternative<MarkGood>(effects[1]));
  CHECK_FALSE(watch.watching());
}

TEST_CASE("not healthy within the bound asks for a rollback naming what failed") {
  ManualClock clock;
  HealthWatch watch(clock, pending(), "0.2.0", kBound);
  BootEffects effects;
  watch.start(effects);
  clock.advance(kBound - 1);
  watch.tick(HealthInputs{true, false, true}, effects);
  CHECK(effects.empty());
  clock.advance(1);
  watch.tick(HealthInputs{false, false, true}, effects);
  REQUIRE(effects.size() == 1);
  const auto& rollback = std::get<RequestRollback>(effects[0]);
  CHECK(rollback.reason.find("offline") != std::string::npos);
  CHECK(rollback.reason.find("integrity_check") != std::string::npos);
  CHECK(rollback.reason.find("self-test") == std::string::npos);
  effects.clear();
  watch.tick(kHealthy, effects);  // decided once
  CHECK(effects.empty());
}

TEST_CASE("a pending marker of another version is left to the helper's watchdog") {
  ManualClock clock;
  HealthWatch watch(clock, pending("0.3.0"), "0.1.0", kBound);
  BootEffects effects;
  watch.start(effects);
  clock.advance(kBound * 2);
  watch.tick(HealthInputs{}, effects);
  CHECK(effects.empty());
  CHECK_FALSE(watch.watching());
}

TEST_CASE("after a rollback the old version reports rolled_back, then marks good") {
  ManualClock clock;
  BootMarker m{BootMarker::State::kRolledBack, "upd-7", "0.2.0", "0.1.0", "crash loop"};
  HealthWatch watch(clock, m, "0.1.0", kBound);
  BootEffects effects;
  watch.start(effects);
  REQUIRE(effects.size() == 2);
  CHECK(std::get<ReportStatus>(effects[0]).status ==
        proto::UpdateStatus{"upd-7", UpdateState::kRolledBack, "0.2.0", "crash loop"});
  CHECK(std::holds_alternative<MarkGood>(effects[1]));
}

TEST_CASE("a failed install (dpkg refused it) is reported as failed") {
  ManualClock clock;
  BootMarker m{BootMarker::State::kFailed, "upd-7", "0.2.0", "0.1.0", "dpkg -i failed"};
  HealthWatch watch(clock, m, "0.1.0", kBound);
  BootEffects effects;
  watch.start(effects);
  REQUIRE(effects.size() == 2);
  CHECK(std::get<ReportStatus>(effects[0]).status.state == UpdateState::kFailed);
}

TEST_CASE("good or no marker: nothing to do") {
  ManualClock clock;
  for (auto state : {BootMarker::State::kGood, BootMarker::State::kNone}) {
    HealthWatch watch(clock, BootMarker{state, "", "", "", ""}, "0.1.0", kBound);
    BootEffects effects;
    watch.start(effects);
    watch.tick(HealthInputs{}, effects);
    CHECK(effects.empty());
  }
}

TEST_CASE("boot markers: the helper's text parses, the daemon's round-trips") {
  auto m = parse_boot_marker(
      "state=pending\nupdate_id=upd-7\nversion=0.2.0\nprevious_version=0.1.0\ndeadline_s=99\n"
      "boots=1\n");
  REQUIRE(m.ok());
  CHECK(*m == pending());
  BootMarker back{BootMarker::State::kRolledBack, "upd-7", "0.2.0", "0.1.0", "x = y"};
  CHECK(parse_boot_marker(format_boot_marker(back)).value() == back);
  auto bad = parse_boot_marker("state=exploded\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("line 1") != std::string::npos);
  CHECK_FALSE(parse_boot_marker("version=1\n").ok());
  CHECK_FALSE(parse_boot_marker("state=pending\n").ok());  // pending of no version
  CHECK_FALSE(parse_boot_marker("state=good\ngarbage\n").ok());
}

}  // namespace
}  // namespace vend::fw
