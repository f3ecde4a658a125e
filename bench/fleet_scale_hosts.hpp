// The live fleet of bench_fleet_scale spread over child processes ("machine
// hosts"): each runs a ScaleFleet of up to `per_host` machines. A process has
// about four descriptors (its socket, its ledger's database, WAL and WAL
// index), a thread (its Paho reconnect thread) and several memory maps per
// machine: RLIMIT_NOFILE (a hard 20,000 where the bench cannot raise it)
// and vm.max_map_count (65,530) cap what one process can host. Several
// hosts also use both cores for the machines' Paho traffic.
//
// A host is this benchmark's own binary started as
//   bench_fleet_scale --fleet-host PREFIX FIRST COUNT BROKER_URL LEDGER_DIR STATUS_FILE
// (run_fleet_host); every 500 ms it replaces STATUS_FILE with
// "<online> <unacked events>", or "error: <why>" when start-up failed; on
// SIGTERM it exits at once, its machines gone as in a power cut. Non-copyable; SIGTERM to every
// host on destruction.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fleet_scale_machines.hpp"
#include "test_support.hpp"
#include "vend/result.hpp"

namespace vend::bench {

class FleetHosts {
 public:
  // Starts hosts for machines 1..spec.machines and waits (up to
  // `timeout_s`) until each has booted and connected its machines.
  static Result<std::unique_ptr<FleetHosts>> start(const ScaleFleetSpec& spec, int per_host,
                                                   int timeout_s);
  ~FleetHosts();
  FleetHosts(const FleetHosts&) = delete;
  FleetHosts& operator=(const FleetHosts&) = delete;

  const std::vector<std::string>& ids() const { return ids_; }
  int online() const;
  int64_t unacked_events() const;

 private:
  FleetHosts() = default;
  // Every host's status; an error when one failed or died.
  Result<std::vector<std::pair<int, int64_t>>> statuses() const;

  test::TempDir dir_;
  std::vector<std::unique_ptr<test::Child>> hosts_;
  std::vector<std::string> status_files_;
  std::vector<std::string> ids_;
};

// main() of a host: argv as above (argv[1] == "--fleet-host"). Returns the
// exit code.
int run_fleet_host(int argc, char** argv);

}  // namespace vend::bench
