// Several agents in the deterministic world (issue 14): instances sharing
// one fenced database keep every invariant over a few seeds of
// several-agents.json, a seed reproduces its run, and the lease invariants
// catch an instance that keeps believing in a lease the store gave away
// (no safety margin, clocks drifting 5 %). At fleet size (fleet-floods.json,
// fewer machines): rebuilds that take virtual time, bounded call queues and
// floods keep every invariant.
#include <doctest/doctest.h>

#include <cstdlib>

#include "test_support.hpp"
#include "world/world.hpp"

namespace vend::sim {
namespace {

WorldOptions several_agents(uint64_t seed) {
  std::string path =
      std::string(std::getenv("VEND_SOURCE_DIR")) + "/simulator/scenarios/several-agents.json";
  auto options = load_scenario(path, WorldOptions{});
  REQUIRE_MESSAGE(options.ok(), vend::test::error_text(options));
  options->seed = seed;
  return *options;
}

WorldOptions fleet_floods(uint64_t seed) {
  std::string path =
      std::string(std::getenv("VEND_SOURCE_DIR")) + "/simulator/scenarios/fleet-floods.json";
  auto options = load_scenario(path, WorldOptions{});
  REQUIRE_MESSAGE(options.ok(), vend::test::error_text(options));
  options->seed = seed;
  options->machines = 60;  // the file's 2,000 run for minutes (scripts/sim-sweep)
  return *options;
}

WorldReport run_ok(const WorldOptions& options) {
  auto report = run_world(options);
  REQUIRE_MESSAGE(report.ok(), vend::test::error_text(report));
  return *report;
}

TEST_CASE("three agents on one fenced database keep every invariant") {
  int64_t completed = 0;
  for (uint64_t seed : {1, 2, 3}) {
    WorldOptions options = several_agents(seed);
    options.steps = 2500;
    WorldReport report = run_ok(options);
    INFO(report.summary());
    CHECK_MESSAGE(report.ok, report.failure);
    CHECK(report.agents == 3);
    CHECK(report.orders > 0);
    completed += report.completed;
  }
  CHECK(completed > 0);
}

TEST_CASE("a several-agents seed reproduces its run") {
  WorldOptions options = several_agents(5);
  options.steps = 1000;
  WorldReport a = run_ok(options);
  WorldReport b = run_ok(options);
  CHECK(a.trace_hash == b.trace_hash);
  CHECK(a.trace_lines == b.trace_lines);
  CHECK(a.summary() == b.summary());
}

TEST_CASE("an instance believing in a lease past the store's expiry is caught") {
  // No safety margin and clocks 5 % apart: a paused instance on a slow clock
  // still counts its lease valid after the store let it expire.
  bool caught = false;
  for (uint64_t seed = 1; seed <= 6 && !caught; ++seed) {
    WorldOptions options = several_agents(seed);
    options.steps = 2000;
    options.lease_safety_ms = 0;
    options.faults.max_agent_drift_ppm = 50'000;
    options.faults.agent_pause = 0.01;
    WorldReport report = run_ok(options);
    if (report.ok) continue;
    INFO(report.failure);
    caught = report.failure.find("shard_owner_not_leased") != std::string::npos;
    CHECK(caught);
  }
  CHECK(caught);
}

TEST_CASE("slow rebuilds, a bounded call queue and floods keep every invariant") {
  int64_t rebuilds = 0, refused_busy = 0, floods = 0, orders = 0;
  for (uint64_t seed : {1, 2}) {
    WorldReport report = run_ok(fleet_floods(seed));
    INFO(report.summary());
    CHECK_MESSAGE(report.ok, report.failure);
    rebuilds += report.rebuilds;
    refused_busy += report.calls_refused_busy;
    floods += report.flood_requests;
    orders += report.orders;
  }
  CHECK(rebuilds > 0);
  CHECK(refused_busy > 0);
  CHECK(floods > 0);
  CHECK(orders > 0);
}

TEST_CASE("a rebuild longer than a lease costs no lease and settles") {
  // 20 machines a gain at 200 ms each: 4 s, more than the 3 s lease. The
  // rounds go on during it, so no lease lapses and the cluster settles.
  WorldOptions options = fleet_floods(3);
  options.rebuild_ms_per_machine = 200;
  options.flood_rate = 0;
  options.max_calls_per_step = 0;
  WorldReport report = run_ok(options);
  INFO(report.summary());
  CHECK_MESSAGE(report.ok, report.failure);
  CHECK(report.rebuilds > 0);
}

}  // namespace
}  // namespace vend::sim
