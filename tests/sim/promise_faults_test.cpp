// Issue 36 in the deterministic world: dispense commands the broker loses
// after accepting them are re-sent until the item is out, and machines that
// boot on an older copy of their ledger keep every invariant, the file a
// restore replaced staying the physical truth of the checks.
#include <doctest/doctest.h>

#include <filesystem>

#include "checker/invariant_checker.hpp"
#include "test_support.hpp"
#include "vend/sqlite.hpp"
#include "world/world.hpp"

namespace vend::sim {
namespace {

WorldOptions scenario(const std::string& name) {
  std::string path =
      std::string(std::getenv("VEND_SOURCE_DIR")) + "/simulator/scenarios/" + name + ".json";
  auto options = load_scenario(path, WorldOptions{});
  REQUIRE_MESSAGE(options.ok(), vend::test::error_text(options));
  return *options;
}

WorldReport run(const WorldOptions& options) {
  auto report = run_world(options);
  REQUIRE_MESSAGE(report.ok(), vend::test::error_text(report));
  return *report;
}

TEST_CASE("lost dispense commands are re-sent and their orders dispensed") {
  int64_t lost = 0, completed = 0;
  for (uint64_t seed : {1, 2, 3}) {
    WorldOptions options = scenario("lost-commands");
    options.seed = seed;
    WorldReport report = run(options);
    INFO(report.summary());
    CHECK_MESSAGE(report.ok, report.failure);
    lost += report.commands_lost;
    completed += report.lost_commands_completed;
  }
  CHECK(lost >= 10);
  CHECK(completed >= 3);  // watched undisturbed to the end, and dispensed
}

TEST_CASE("without the agent's re-sends a lost command's order is refunded: the run stops") {
  bool caught = false;
  for (uint64_t seed : {2, 3}) {
    WorldOptions options = scenario("lost-commands");
    options.seed = seed;
    options.command_resend_ms = 600'000;  // past every order's life
    WorldReport report = run(options);
    INFO(report.summary());
    caught |= !report.ok && report.failure.find("lost_command_not_resent") != std::string::npos;
  }
  CHECK(caught);
}

TEST_CASE("machines booting on an older copy of their ledger keep every invariant") {
  int64_t restores = 0;
  for (uint64_t seed : {1, 2, 3}) {
    WorldOptions options = scenario("restored-ledgers");
    options.seed = seed;
    WorldReport report = run(options);
    INFO(report.summary());
    CHECK_MESSAGE(report.ok, report.failure);
    CHECK(report.completed > 0);
    restores += report.ledger_restores;
  }
  CHECK(restores >= 3);
}

bool has(const std::vector<Violation>& vs, const std::string& invariant) {
  for (const auto& v : vs) {
    if (v.invariant == invariant) return true;
  }
  return false;
}

TEST_CASE("a ledger that went back in time: the file it replaced stays the truth") {
  test::TempDir dir;
  WorldOptions options;
  options.seed = 3;
  options.steps = 1500;
  options.work_dir = dir.file("world");
  WorldReport report = run(options);
  REQUIRE_MESSAGE(report.ok, report.failure);
  const std::string ledger = options.work_dir + "/" + ledger_file_name("vm-001");
  std::filesystem::copy_file(ledger, ledger + ".replaced-1");
  int64_t rotated = 0;
  {
    auto db = sql::Database::open(ledger);
    REQUIRE(db.ok());
    auto n = db->prepare(
        "SELECT count(*) FROM dispenses WHERE state IN "
        "('MOTOR_RUNNING', 'DISPENSED', 'FAILED', 'UNCERTAIN')");
    REQUIRE(n.ok());
    REQUIRE(*n->step());
    rotated = n->column_int64(0);
    // The copy the machine booted on predates its last dispense.
    REQUIRE(db->exec("UPDATE tokens SET state = 'AVAILABLE', order_id = NULL WHERE token = "
                     "(SELECT token FROM dispenses WHERE state = 'DISPENSED' "
                     "ORDER BY order_id DESC LIMIT 1)")
                .ok());
    REQUIRE(db->exec("DELETE FROM dispenses WHERE order_id = (SELECT order_id FROM dispenses "
                     "WHERE state = 'DISPENSED' ORDER BY order_id DESC LIMIT 1)")
                .ok());
  }
  REQUIRE(rotated > 0);

  FleetFiles without = fleet_files_in(options.work_dir);
  REQUIRE(without.replaced.count("vm-001"));
  without.replaced.clear();
  auto forgot = InvariantChecker(without).check(CheckPhase::kSettled);
  REQUIRE(forgot.ok());
  CHECK(has(*forgot, "completed_without_dispense"));
  CHECK(has(*forgot, "token_conservation"));

  InvariantChecker checker(fleet_files_in(options.work_dir));
  auto kept = checker.check(CheckPhase::kSettled, {{"vm-001", rotated}});
  REQUIRE(kept.ok());
  CHECK_MESSAGE(kept->empty(), format_violations(*kept));
  // One rotation more than the orders that reached the motor: an item
  // dispensed twice for one order.
  auto twice = checker.check(CheckPhase::kSettled, {{"vm-001", rotated + 1}});
  REQUIRE(twice.ok());
  CHECK(has(*twice, "motor_ran_unaccounted"));
}

}  // namespace
}  // namespace vend::sim
