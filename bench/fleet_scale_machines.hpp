// The live fleet of bench_fleet_scale: machines already provisioned in the
// database (fleet_scale_seed.hpp: their keys derive from their ids), each the
// real firmware core with the simulated HAL, its own SQLite ledger and Paho
// client (vend-sim's LiveMachine) with the firmware's default options, all in
// this process. At boot an operator loads every slot at the machine, so
// each one starts by sending one `tokens` event per slot.
//
// Threads: a bounded pool boots, connects and stops the machines;
// `step_threads` threads step them; each machine's Paho transport has a
// reconnect thread. Non-copyable; stops every machine on destruction.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "vend/log.hpp"
#include "vend/result.hpp"

namespace vend::sim {
class LiveMachine;
}

namespace vend::bench {

struct ScaleFleetSpec {
  std::string prefix;
  int first = 1;  // index of the first machine (scale_machine_id)
  int machines = 0;
  int slots = 8;
  int capacity = 100;
  int loaded_per_slot = 20;  // items loaded into each slot at boot
  std::string broker_url;
  std::string ledger_dir;
  int setup_threads = 16;  // boot and connect in parallel
  int step_threads = 2;
  int64_t tick_us = 5000;  // pause between two rounds of steps
};

class ScaleFleet {
 public:
  explicit ScaleFleet(ScaleFleetSpec spec, Logger& log);
  ~ScaleFleet();
  ScaleFleet(const ScaleFleet&) = delete;
  ScaleFleet& operator=(const ScaleFleet&) = delete;

  // Boots every machine (ledger, slots, the operator's load), connects it to
  // the broker and starts stepping. The first error stops the start-up.
  Status start();
  const std::vector<std::string>& ids() const { return ids_; }
  int online() const;
  // Events every machine has written and not had acknowledged (as of its
  // last step; a machine refreshes the figure every 500 ms).
  int64_t unacked_events() const;

 private:
  Status boot_one(size_t i);
  // Runs fn(i) for every machine on setup_threads threads; the first error.
  Status for_each_machine(const std::function<Status(size_t)>& fn);
  void step_loop(size_t first, size_t stride);

  ScaleFleetSpec spec_;
  Logger& log_;
  std::vector<std::string> ids_;
  std::vector<std::unique_ptr<sim::LiveMachine>> machines_;
  std::vector<std::thread> steppers_;
  std::atomic<bool> run_{false};
};

}  // namespace vend::bench
