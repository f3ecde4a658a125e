// The deterministic world: the fixed seed set keeps every invariant, a seed
// reproduces its run byte for byte, the checker catches a violation planted in
// a finished world's files, and every scenario file loads and runs.
#include <doctest/doctest.h>

#include <filesystem>

#include "checker/invariant_checker.hpp"
#include "test_support.hpp"
#include "vend/sqlite.hpp"
#include "world/world.hpp"

namespace vend::sim {
namespace {

// The ctest seed set: small worlds with every fault on. scripts/sim-sweep runs more.
constexpr uint64_t kSeeds[] = {1, 2, 3, 4, 5, 6, 7, 8};

WorldReport run_ok(const WorldOptions& options) {
  auto report = run_world(options);
  REQUIRE_MESSAGE(report.ok(), vend::test::error_text(report));
  return *report;
}

TEST_CASE("the fixed seed set keeps every invariant") {
  for (uint64_t seed : kSeeds) {
    WorldOptions options;
    options.seed = seed;
    WorldReport report = run_ok(options);
    INFO(report.summary());
    CHECK_MESSAGE(report.ok, report.failure);
    CHECK(report.orders > 0);
    CHECK(report.completed > 0);
  }
}

// Issue 36: the agent's wall clock stepped forward and back while orders are
// open (deadlines on the monotonic clock) breaks no invariant.
TEST_CASE("stepped agent clocks keep every invariant") {
  int64_t steps = 0;
  for (uint64_t seed : {1, 2, 3}) {
    WorldOptions options;
    options.seed = seed;
    options.steps = 2000;
    options.faults.agent_clock_step = 0.01;
    options.faults.machine_crash = 0;  // an UNCERTAIN rotation is the one other way to review
    WorldReport report = run_ok(options);
    INFO(report.summary());
    CHECK_MESSAGE(report.ok, report.failure);
    CHECK(report.completed > 0);
    CHECK(report.needs_review == 0);
    steps += report.agent_clock_steps;
  }
  CHECK(steps >= 10);
}

TEST_CASE("a seed reproduces its run byte for byte") {
  test::TempDir dir;
  WorldOptions options;
  options.seed = 11;
  options.steps = 1500;
  options.trace_path = dir.file("a.trace");
  WorldReport a = run_ok(options);
  options.trace_path = dir.file("b.trace");
  WorldReport b = run_ok(options);
  CHECK(a.trace_hash == b.trace_hash);
  CHECK(a.trace_lines == b.trace_lines);
  std::string first = test::read_file(dir.file("a.trace"));
  CHECK(first.size() > 1000);
  CHECK(first == test::read_file(dir.file("b.trace")));

  options.seed = 12;
  options.trace_path.clear();
  CHECK(run_ok(options).trace_hash != a.trace_hash);
}

// The agent is killed inside customers' calls (after a reservation's or a
// payment's commit, before its answer; between a payment's two steps, with
// DISPATCHED durable and the dispense not published): every answer the
// customers received still holds, and every paid order still finishes.
TEST_CASE("an agent killed inside a reservation or a payment keeps its word") {
  test::TempDir dir;
  bool between_pay_steps = false, order_unanswered = false, pay_unanswered = false;
  for (uint64_t seed : {1, 2, 3, 4}) {
    WorldOptions options;
    options.seed = seed;
    options.steps = 2000;
    options.order_rate = 0.08;
    options.faults.agent_crash = 0.004;  // x20 inside a call
    options.trace_path = dir.file("s" + std::to_string(seed) + ".trace");
    WorldReport report = run_ok(options);
    CHECK_MESSAGE(report.ok, report.failure);
    std::string trace = test::read_file(options.trace_path);
    // A trace line "fault agent crash in <call>...<point>".
    auto crashed = [&](const std::string& call, const std::string& point) {
      const std::string fault = "fault agent crash in " + call;
      for (size_t at = trace.find(fault); at != std::string::npos; at = trace.find(fault, at + 1)) {
        if (trace.substr(at, trace.find('\n', at) - at).find(point) != std::string::npos) {
          return true;
        }
      }
      return false;
    };
    between_pay_steps |= crashed("pay ", ": committed, its next step not run");
    order_unanswered |= crashed("order ", ": committed, its next step not run");
    pay_unanswered |= crashed("pay ", ": answered, the answer not received");
  }
  CHECK(between_pay_steps);
  CHECK(order_unanswered);
  CHECK(pay_unanswered);
}

// Runs a world whose files stay in `dir`, then plants `sql` into one file.
std::vector<Violation> plant(const test::TempDir& dir, const std::string& file,
                             const std::string& sql) {
  WorldOptions options;
  options.seed = 3;
  options.steps = 1500;
  options.work_dir = dir.file("world");
  WorldReport report = run_ok(options);
  REQUIRE_MESSAGE(report.ok, report.failure);
  InvariantChecker clean(fleet_files_in(options.work_dir));
  auto before = clean.check(CheckPhase::kSettled);
  REQUIRE(before.ok());
  REQUIRE_MESSAGE(before->empty(), format_violations(*before));

  auto db = sql::Database::open(options.work_dir + "/" + file);
  REQUIRE(db.ok());
  REQUIRE(db->exec(sql).ok());
  REQUIRE(db->changes() > 0);
  InvariantChecker checker(fleet_files_in(options.work_dir));
  auto after = checker.check(CheckPhase::kSettled);
  REQUIRE(after.ok());
  return *after;
}

bool has(const std::vector<Violation>& vs, const std::string& invariant) {
  for (const auto& v : vs) {
    if (v.invariant == invariant) return true;
  }
  return false;
}

TEST_CASE("planted in a finished world: an order completed but never dispensed") {
  test::TempDir dir;
  auto vs = plant(dir, ledger_file_name("vm-001"),
                  "UPDATE dispenses SET state = 'FAILED', reason = 'jam' WHERE order_id = "
                  "(SELECT order_id FROM dispenses WHERE state = 'DISPENSED' LIMIT 1)");
  CHECK(has(vs, "completed_without_dispense"));
  CHECK(has(vs, "dispense_without_token"));  // FAILED must burn its token
}

TEST_CASE("planted in a finished world: the agent sells a token the machine spent") {
  test::TempDir dir;
  auto vs = plant(dir, kAgentDbName,
                  "UPDATE pool_tokens SET state = 'POOL', order_id = NULL WHERE token = "
                  "(SELECT token FROM pool_tokens WHERE state = 'SOLD' LIMIT 1)");
  CHECK(has(vs, "token_conservation"));
}

TEST_CASE("planted in a finished world: a paid order left behind") {
  test::TempDir dir;
  auto vs = plant(dir, kAgentDbName,
                  "UPDATE orders SET state = 'PAID' WHERE id = "
                  "(SELECT id FROM orders WHERE state = 'REFUNDED' LIMIT 1)");
  CHECK(has(vs, "paid_order_lost"));
}

TEST_CASE("every scenario file loads and runs") {
  std::string dir = std::string(std::getenv("VEND_SOURCE_DIR")) + "/simulator/scenarios";
  int found = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++found;
    INFO(entry.path().string());
    auto options = load_scenario(entry.path().string(), WorldOptions{});
    REQUIRE_MESSAGE(options.ok(), vend::test::error_text(options));
    options->steps = std::min<int64_t>(options->steps, 800);
    options->machines = std::min(options->machines, 4);
    WorldReport report = run_ok(*options);
    CHECK_MESSAGE(report.ok, report.failure);
  }
  CHECK(found > 0);
}

TEST_CASE("a violation planted mid-run stops the run at that step with the evidence") {
  WorldOptions options;
  options.seed = 2;
  options.plant_violation_at_step = 600;
  WorldReport report = run_ok(options);
  CHECK_FALSE(report.ok);
  CHECK(report.failed_step >= 600);
  CHECK(report.failure.find("seed 2, step " + std::to_string(report.failed_step)) == 0);
  CHECK(report.failure.find("dispense_without_token") != std::string::npos);
}

TEST_CASE("a scenario file with an unknown key is refused, naming it") {
  test::TempDir dir;
  test::write_file(dir.file("bad.json"), R"({"machines": 2, "faults": {"dorp": 0.1}})");
  auto options = load_scenario(dir.file("bad.json"), WorldOptions{});
  REQUIRE_FALSE(options.ok());
  CHECK(options.error().message.find("faults.dorp") != std::string::npos);
}

}  // namespace
}  // namespace vend::sim
