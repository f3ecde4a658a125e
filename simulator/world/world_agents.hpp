// The agents of the deterministic world, and the front the customers call:
// one agent (the default), or several instances sharing one database with
// leases (WorldOptions::agents > 1, docs/simulator.md "Several agents").
//
// A call goes to a serving instance (drawn by the seed); one answered
// "not_owner" is sent to the owner the answering instance's latest
// heartbeat names, as the HTTP front's 307 would; with no live owner, or an
// owner that is paused or down, the answer is "unavailable" (the shard is
// moving: callers retry). With WorldOptions::max_calls_per_step an instance
// takes that many calls a step and answers the rest "unavailable" (its call
// queue is full). Not thread-safe. Non-copyable.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checker/invariant_checker.hpp"
#include "core/agent_core.hpp"
#include "vend/clock.hpp"
#include "vend/in_memory_bus.hpp"
#include "vend/random.hpp"
#include "world/skewed_clock.hpp"
#include "world/trace.hpp"
#include "world/world.hpp"
#include "world/world_agent.hpp"
#include "world/world_database.hpp"

namespace vend::sim {

template <typename T>
Status status_of(const Result<T>& r) {
  if (r.ok()) return {};
  return r.error();
}

class WorldAgents {
 public:
  // One agent over db_path, or options.agents instances over it.
  // `devices`: the world's machines (a rebuild's cost counts them).
  WorldAgents(const WorldOptions& options, std::string db_path,
              const agent::AgentOptions& agent_options, const std::vector<std::string>& devices,
              InMemoryBus& bus, const Clock& clock, Random& random, Logger& log, Trace& trace);
  WorldAgents(const WorldAgents&) = delete;
  WorldAgents& operator=(const WorldAgents&) = delete;

  Status start();
  bool clustered() const { return db_ != nullptr; }
  size_t size() const { return agents_.size(); }
  WorldAgent& at(size_t i) { return *agents_[i]; }
  // Agent i's own clock (its wall clock can be skewed and stepped).
  SkewedClock& clock_of(size_t i) { return *clocks_[i]; }

  // Some instance takes calls now.
  bool up() const;
  // `call` on the instance serving what it names (see above): the world's
  // own calls (set-up, the restocker, checks), outside the call queues.
  Status route(const std::function<Status(agent::AgentCore&)>& call);
  // The same, given the instance: a customer's call, which may crash it and
  // takes its place in the call queues.
  Status route_agent(const std::function<Status(WorldAgent&)>& call);
  // Every serving instance (its refund sender).
  void each_core(const std::function<void(agent::AgentCore&)>& fn);
  // A serving instance drawn by the seed, or null (an outside client's
  // request, which follows no redirect).
  WorldAgent* any_serving();
  // Takes one call of `agent`'s queue for this step: false (answer
  // "unavailable") when max_calls_per_step are taken already.
  bool take_call(const WorldAgent& agent);

  // The instances' lease rounds, rebuilds and ticks; a new step's call
  // queues.
  void tick();
  void flush();
  // Every instance serving and every shard believed owned: the cluster is
  // whole again (settling).
  bool whole() const;

  // Cluster invariants (Violation names in docs/simulator.md):
  // shard_owner_not_leased — an instance believes it owns a shard at an
  // epoch that is not the shard's live lease in the store (two believers
  // cannot both match it); write_bypassed_fence — a committed write of a
  // machine's data without a fence claim of the instance applying it.
  std::vector<Violation> check_leases();
  int64_t fenced_writes() const { return db_ ? db_->fenced_writes : 0; }
  int64_t rebuilds() const;
  int64_t calls_refused_busy() const { return refused_busy_; }
  SharedDatabase* database() { return db_.get(); }

 private:
  WorldAgent* serving(const std::string& instance);
  Status routed(const std::function<Status(WorldAgent&)>& call, bool queued);

  int shard_count_ = 0;
  int max_calls_per_step_ = 0;
  std::vector<int> calls_;  // this step's, per instance
  int64_t refused_busy_ = 0;
  Random& random_;
  std::unique_ptr<SharedDatabase> db_;  // cluster mode
  std::vector<std::unique_ptr<SkewedClock>> clocks_;
  std::vector<std::unique_ptr<WorldAgent>> agents_;
};

}  // namespace vend::sim
