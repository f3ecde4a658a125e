// vend-sim: deterministic simulation, ledger checks, and the live fleet.
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>

#include "checker/invariant_checker.hpp"
#include "live/cli.hpp"
#include "live/live.hpp"
#include "world/world.hpp"

#ifndef VEND_VERSION
#define VEND_VERSION "0.0.0"
#endif

namespace vend::sim {
namespace {

nlohmann::json report_json(const WorldReport& r) {
  return {{"seed", r.seed},
          {"ok", r.ok},
          {"steps", r.steps},
          {"failed_step", r.failed_step},
          {"failure", r.failure},
          {"trace_hash", r.trace_hash},
          {"trace_lines", r.trace_lines},
          {"orders", r.orders},
          {"refused_orders", r.rejected_orders},
          {"completed", r.completed},
          {"refunded", r.refunded},
          {"needs_review", r.needs_review},
          {"expired", r.expired},
          {"cancelled", r.cancelled},
          {"machine_crashes", r.machine_crashes},
          {"agent_crashes", r.agent_crashes},
          {"partitions", r.partitions}};
}

int run_deterministic(const Command& c) {
  int failures = 0;
  nlohmann::json all = nlohmann::json::array();
  for (uint64_t i = 0; i < c.seed_count; ++i) {
    WorldOptions options = c.world;
    options.seed = c.first_seed + i;
    auto report = run_world(options);
    if (!report.ok()) {
      std::cerr << "vend-sim: seed " << options.seed << ": " << report.error().to_string() << "\n";
      return 2;
    }
    if (!report->ok) {
      ++failures;
      std::cerr << "vend-sim: INVARIANT BROKEN, " << report->failure
                << "reproduce: vend-sim --deterministic --seed " << options.seed
                << (c.scenario_path.empty() ? "" : " --scenario " + c.scenario_path)
                << " --trace FILE\n";
    }
    if (c.json) {
      all.push_back(report_json(*report));
    } else {
      std::cout << report->summary() << "\n" << std::flush;
    }
  }
  if (c.json) std::cout << (c.seed_count == 1 ? all[0] : all).dump(2) << "\n";
  return failures == 0 ? 0 : 1;
}

int run_check(const Command& c) {
  InvariantChecker checker(fleet_files_in(c.work_dir));
  auto violations = checker.check(CheckPhase::kSettled);
  if (!violations.ok()) {
    std::cerr << "vend-sim: " << violations.error().to_string() << "\n";
    return 2;
  }
  if (violations->empty()) {
    std::cout << "vend-sim: every invariant holds in " << c.work_dir << "\n";
    return 0;
  }
  std::cerr << "vend-sim: INVARIANT BROKEN in " << c.work_dir << ":\n"
            << format_violations(*violations);
  return 1;
}

}  // namespace
}  // namespace vend::sim

namespace {

int run(int argc, char** argv) {
  using vend::sim::Command;
  auto command = vend::sim::parse_command(std::vector<std::string>(argv + 1, argv + argc));
  if (!command.ok()) {
    std::cerr << "vend-sim: " << command.error().message << "\n";
    return 2;
  }
  for (const std::string& w : command->warnings) std::cerr << "vend-sim: warning: " << w << "\n";
  switch (command->mode) {
    case Command::Mode::kHelp: std::cout << vend::sim::usage(); return 0;
    case Command::Mode::kVersion: std::cout << "vend-sim " << VEND_VERSION << "\n"; return 0;
    case Command::Mode::kDeterministic: return vend::sim::run_deterministic(*command);
    case Command::Mode::kCheck: return vend::sim::run_check(*command);
    case Command::Mode::kLive: return vend::sim::run_live(*command);
  }
  return 2;
}

}  // namespace

// An exception that reaches here is a set-up failure nothing above expected
// (out of memory, a library's own error): one line and exit 2.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "vend-sim: " << e.what() << "\n";
    return 2;
  }
}
