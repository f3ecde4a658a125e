// Fault injection of the deterministic world, every decision drawn from the
// world's one Random. Network faults (partition, offline) and crashes never
// overlap on one machine; each fault schedules its own healing a random
// number of steps later. Not thread-safe. Non-copyable.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "vend/in_memory_bus.hpp"
#include "world/trace.hpp"
#include "world/world.hpp"
#include "world/world_agents.hpp"
#include "world/world_machine.hpp"

namespace vend::sim {

struct FaultCounters {
  int64_t machine_crashes = 0, agent_crashes = 0, partitions = 0, offline = 0, skews = 0;
  int64_t agent_pauses = 0, agent_db_partitions = 0, agent_clock_steps = 0;
  int64_t commands_lost = 0, ledger_restores = 0;
};

// A dispense command the broker lost after accepting it (command_lost).
struct LostCommand {
  std::string order_id;
  std::string device;
  int64_t step = 0;
  int64_t disturbances = 0;  // WorldFaults::disturbances(device) right after the loss
};

class WorldFaults {
 public:
  // References must outlive this object. Installs the bus filter.
  WorldFaults(const FaultRates& rates, Random& random, InMemoryBus& bus,
              std::vector<std::unique_ptr<WorldMachine>>& machines, WorldAgents& agents,
              Trace& trace);
  ~WorldFaults() { bus_.set_filter({}); }
  WorldFaults(const WorldFaults&) = delete;
  WorldFaults& operator=(const WorldFaults&) = delete;

  // Heals what is due at `step`, then maybe injects new faults (none once
  // heal_all ran: settling steps only heal).
  Status step(int64_t step);
  // An agent crash at this point of the step, at the agent_crash rate:
  // called between the parts of a step, before its writes are flushed, so
  // the crash loses what was not committed yet. Several agents: one
  // instance, drawn by the seed.
  void maybe_crash_agent(double rate_factor = 1);
  // An agent crash inside a customer's call served by `agent`, at the
  // agent_crash rate times `rate_factor`: at kCommitted (the reservation or
  // the payment's first step committed, its answer or the payment's second
  // step — publishing the dispense — not run yet) or at kAnswered (the
  // answer given, not received). True when `agent` crashed; never while
  // it is under another fault. `call` names the call in the trace.
  bool maybe_crash_in_call(WorldAgent& agent, agent::CallPoint point, const std::string& call,
                           double rate_factor);
  // Heals everything now and stops injecting (the settle phase). A ledger
  // restore still pending is not done; a restored machine that is down
  // stays down its time (steps go on healing it).
  Status heal_all();
  const FaultCounters& counters() const { return counters_; }
  // Faults so far that could delay or lose a message between `device` and
  // the agent or change either one's state or clock: every fault of that
  // machine and of its traffic, every fault of an agent.
  int64_t disturbances(const std::string& device) const;
  // The commands lost since the last call while nothing else was wrong.
  std::vector<LostCommand> take_lost_commands() { return std::exchange(lost_, {}); }
  // Called with the device and the path of a copy of its ledger as it was
  // when a restore replaced it (the checker keeps it as the physical truth).
  void on_ledger_replaced(std::function<void(const std::string&, const std::string&)> f) {
    on_replaced_ = std::move(f);
  }

 private:
  using Heal = std::function<Status()>;
  InMemoryBus::Fault filter(const InMemoryBus::Envelope& envelope);
  void schedule(int64_t at_step, Heal heal) { heals_.emplace(at_step, std::move(heal)); }
  WorldMachine* pick_healthy_machine();
  void partition(WorldMachine& m);
  void offline(WorldMachine& m);
  void crash_machine(WorldMachine& m);
  void crash_agent(WorldAgent& agent);
  // Several agents: the instance a new fault hits, if it has none yet.
  WorldAgent* pick_healthy_instance();
  void instance_faults();
  void pause_instance(WorldAgent& agent);
  void partition_instance(WorldAgent& agent);
  void skew_clock(WorldMachine& m);
  void step_agent_clock();
  Status publish_late_will(const Message& will);
  bool lose_command(const InMemoryBus::Envelope& envelope);
  void disturb(const std::string& id) { ++disturbed_[id]; }
  void disturb_agents() { ++agents_disturbed_; }
  // The world's monotonic time (the machines' clocks never drift).
  int64_t now_ms() const { return machines_.front()->clock().monotonic_ms(); }
  // ledger_restore: a copy now, the restore later (world_faults_ledger.cpp).
  void copy_ledger(WorldMachine& m);
  Status restore_ledger(WorldMachine& m);

  FaultRates rates_;
  Random& random_;
  InMemoryBus& bus_;
  std::vector<std::unique_ptr<WorldMachine>>& machines_;
  WorldAgents& agents_;
  Trace& trace_;
  bool enabled_ = true;
  int64_t step_ = 0;
  std::multimap<int64_t, Heal> heals_;          // step -> healing, FIFO per step
  std::multimap<int64_t, Heal> restore_boots_;  // step -> boot; heal_all leaves them
  std::set<std::string> faulted_;               // machines under a fault
  std::set<WorldAgent*> faulted_agents_;        // instances under a fault
  std::set<size_t> stepped_clocks_;             // agents whose wall clock is stepped
  std::unique_ptr<InMemoryClient> late_wills_;  // publishes wills the broker sent late
  FaultCounters counters_;
  std::set<std::string> lost_orders_;            // orders whose command was lost once
  std::vector<LostCommand> lost_;                // not taken yet
  std::map<std::string, int64_t> disturbed_;     // machine -> its faults
  int64_t agents_disturbed_ = 0;                 // faults of any agent
  int64_t agent_clock_changed_ms_ = -1;          // world monotonic: an agent clock's last change
  std::set<std::string> copied_ledgers_;         // machines with a restore pending
  std::map<std::string, int> replaced_ledgers_;  // machine -> restores done
  std::function<void(const std::string&, const std::string&)> on_replaced_;
};

}  // namespace vend::sim
