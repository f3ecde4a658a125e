// The invariant checker over real ledger files: a clean ledger passes, and
// each planted violation is caught with its evidence.
#include "checker/invariant_checker.hpp"

#include <doctest/doctest.h>

#include <algorithm>

#include "test_support.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/random.hpp"

namespace vend::sim {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

// One machine's ledger with a restock of 3 items and one order dispensed.
struct LedgerRig {
  explicit LedgerRig(const std::string& dir, const std::string& device = "vm-1")
      : path(dir + "/" + ledger_file_name(device)) {
    auto opened = fw::Ledger::open(
        path, fw::Identity{device, crypto::Key::generate(), random.id128()}, sql::Sync::kOff);
    REQUIRE(opened.ok());
    ledger.emplace(std::move(opened).value());
    REQUIRE(ledger->sync_slots({{1, 5, "cola", -1}}).ok());
    auto minted = ledger->confirm_restock("r1", 1, 3, kNow, random);
    REQUIRE(minted.ok());
    tokens = minted->tokens;
    dispense("o1", tokens[0]);
  }

  void dispense(const std::string& order, const std::string& token) {
    REQUIRE(
        ledger->accept_dispense({ledger->identity().device_id, order, 1, token, kNow + 60000}, kNow)
            .ok());
    REQUIRE(ledger->mark_motor_running(order, kNow).ok());
    REQUIRE(ledger->finish_dispense(order, fw::DispenseState::kDispensed, "", kNow).ok());
  }

  void exec(const std::string& sql) { REQUIRE(ledger->db().exec(sql).ok()); }

  SeededRandom random{1};
  std::string path;
  std::optional<fw::Ledger> ledger;
  std::vector<std::string> tokens;
};

std::vector<Violation> check_dir(const std::string& dir) {
  InvariantChecker checker(fleet_files_in(dir));
  auto result = checker.check(CheckPhase::kSettled);
  REQUIRE(result.ok());
  return *result;
}

bool has(const std::vector<Violation>& vs, const std::string& invariant,
         const std::string& needle = "") {
  return std::any_of(vs.begin(), vs.end(), [&](const Violation& v) {
    return v.invariant == invariant && v.evidence.find(needle) != std::string::npos;
  });
}

TEST_CASE("a clean ledger passes every check") {
  test::TempDir dir;
  LedgerRig rig(dir.path());
  rig.dispense("o2", rig.tokens[1]);
  auto violations = check_dir(dir.path());
  CHECK_MESSAGE(violations.empty(), format_violations(violations));
}

TEST_CASE("planted: a dispensed order whose token is still available") {
  test::TempDir dir;
  LedgerRig rig(dir.path());
  rig.exec("UPDATE tokens SET state = 'AVAILABLE' WHERE token = '" + rig.tokens[0] + "'");
  auto violations = check_dir(dir.path());
  CHECK(has(violations, "dispense_without_token", "order o1 DISPENSED"));
}

TEST_CASE("planted: one token spent by two dispenses") {
  test::TempDir dir;
  LedgerRig rig(dir.path());
  rig.exec("DROP INDEX dispenses_token_spent");
  rig.exec(
      "INSERT INTO dispenses(order_id, slot, token, state, reason, expires_at_ms, "
      "token_consumed, accepted_ms, updated_ms) VALUES ('o9', 1, '" +
      rig.tokens[0] + "', 'DISPENSED', '', 1, 1, 1, 1)");
  CHECK(has(check_dir(dir.path()), "token_spent_twice", rig.tokens[0]));
}

TEST_CASE("planted: more dispensed than restocked") {
  test::TempDir dir;
  LedgerRig rig(dir.path());
  for (int i = 0; i < 4; ++i) {
    std::string id = "x" + std::to_string(i);
    rig.exec(
        "INSERT INTO dispenses(order_id, slot, token, state, reason, expires_at_ms, "
        "token_consumed, accepted_ms, updated_ms) VALUES ('" +
        id + "', 1, 'tok" + id + "', 'DISPENSED', '', 1, 1, 1, 1)");
  }
  auto violations = check_dir(dir.path());
  CHECK(has(violations, "dispensed_over_restocked", "vm-1/1: dispensed 5, restocked 3"));
  CHECK(has(violations, "dispense_without_token", "never minted"));
}

TEST_CASE("planted: one order dispensed by two machines") {
  test::TempDir dir;
  LedgerRig one(dir.path(), "vm-1");
  LedgerRig two(dir.path(), "vm-2");
  auto violations = check_dir(dir.path());
  CHECK(has(violations, "order_dispensed_twice", "order o1 spent a token on vm-1 and on vm-2"));
}

TEST_CASE("planted: a burned token that no dispense spent") {
  test::TempDir dir;
  LedgerRig rig(dir.path());
  rig.exec("UPDATE tokens SET state = 'BURNED' WHERE token = '" + rig.tokens[2] + "'");
  CHECK(has(check_dir(dir.path()), "token_conservation", rig.tokens[2]));
}

TEST_CASE("a ledger file that does not exist yet is skipped") {
  test::TempDir dir;
  FleetFiles files;
  files.ledgers["vm-9"] = dir.file(ledger_file_name("vm-9"));
  files.agent_db = dir.file(kAgentDbName);
  InvariantChecker checker(files);
  auto result = checker.check(CheckPhase::kRunning);
  REQUIRE(result.ok());
  CHECK(result->empty());
}

}  // namespace
}  // namespace vend::sim
