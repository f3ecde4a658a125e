#include "world/world_agents.hpp"

#include <algorithm>

#include "cluster/shard_map.hpp"

namespace vend::sim {

WorldAgents::WorldAgents(const WorldOptions& o, std::string db_path,
                         const agent::AgentOptions& agent_options,
                         const std::vector<std::string>& devices, InMemoryBus& bus,
                         const Clock& clock, Random& random, Logger& log, Trace& trace)
    : shard_count_(o.shards), max_calls_per_step_(o.max_calls_per_step), random_(random) {
  if (o.agents <= 1) {
    clocks_.push_back(std::make_unique<SkewedClock>(clock));  // no drift: one clock to step
    agents_.push_back(std::make_unique<WorldAgent>(std::move(db_path), agent_options, bus,
                                                   *clocks_.back(), random, log, trace));
    return;
  }
  db_ = std::make_unique<SharedDatabase>(db_path, clock);
  std::vector<int> per_shard(static_cast<size_t>(o.shards), 0);
  for (const std::string& d : devices)
    ++per_shard[static_cast<size_t>(agent::shard_of(d, o.shards))];
  calls_.assign(static_cast<size_t>(o.agents), 0);
  for (int i = 0; i < o.agents; ++i) {
    int64_t drift = o.faults.max_agent_drift_ppm == 0
                        ? 0
                        : random.range(-o.faults.max_agent_drift_ppm, o.faults.max_agent_drift_ppm);
    clocks_.push_back(std::make_unique<SkewedClock>(clock, drift));
    InstanceSetup setup;
    setup.lease.instance_id = "a" + std::to_string(i + 1);
    setup.lease.shard_count = o.shards;
    setup.lease.lease_ms = o.lease_ms;
    setup.lease.renew_every_ms = o.renew_ms;
    setup.lease.safety_ms = o.lease_safety_ms;
    setup.db = db_.get();
    setup.clock = clocks_.back().get();
    setup.rebuild_ms_per_machine = o.rebuild_ms_per_machine;
    setup.machines_per_shard = per_shard;
    agents_.push_back(std::make_unique<WorldAgent>(db_path, agent_options, bus, clock, random, log,
                                                   trace, setup));
    trace.add("instance " + setup.lease.instance_id + " drift " + std::to_string(drift) + " ppm");
  }
}

Status WorldAgents::start() {
  for (auto& a : agents_) {
    if (Status s = a->start(); !s.ok()) return s;
  }
  return {};
}

bool WorldAgents::up() const {
  for (const auto& a : agents_) {
    if (a->serving()) return true;
  }
  return false;
}

WorldAgent* WorldAgents::serving(const std::string& instance) {
  for (auto& a : agents_) {
    if (a->clustered() && a->instance_id() == instance) return a->serving() ? a.get() : nullptr;
  }
  return nullptr;
}

Status WorldAgents::route(const std::function<Status(agent::AgentCore&)>& call) {
  return routed([&call](WorldAgent& agent) { return call(agent.core()); }, false);
}

Status WorldAgents::route_agent(const std::function<Status(WorldAgent&)>& call) {
  return routed(call, true);
}

Status WorldAgents::routed(const std::function<Status(WorldAgent&)>& call, bool queued) {
  if (!clustered()) {
    if (!agents_[0]->up()) return make_error("unavailable", "the agent is down");
    return call(*agents_[0]);
  }
  std::vector<WorldAgent*> live;
  for (auto& a : agents_) {
    if (a->serving()) live.push_back(a.get());
  }
  if (live.empty()) return make_error("unavailable", "no agent instance is serving");
  WorldAgent* target = live[static_cast<size_t>(random_.range(0, live.size() - 1))];
  if (queued && !take_call(*target))
    return make_error("unavailable", "the call queue is full (503)");
  Status s = call(*target);
  if (s.ok() || s.error().code != "not_owner") return s;
  // One redirect, as an HTTP client follows the 307.
  std::string owner = target->redirect_for(s.error().message);
  WorldAgent* next = owner.empty() ? nullptr : serving(owner);
  if (next == nullptr) {
    return make_error("unavailable", s.error().message + ": its shard is moving (asked " +
                                         target->instance_id() + ")");
  }
  if (queued && !take_call(*next)) return make_error("unavailable", "the call queue is full (503)");
  s = call(*next);
  if (!s.ok() && s.error().code == "not_owner") {
    return make_error("unavailable", s.error().message + ": redirected from " +
                                         target->instance_id() + " to " + owner +
                                         ", which does not serve it");
  }
  return s;
}

void WorldAgents::each_core(const std::function<void(agent::AgentCore&)>& fn) {
  for (auto& a : agents_) {
    if (a->serving()) fn(a->core());
  }
}

WorldAgent* WorldAgents::any_serving() {
  std::vector<WorldAgent*> live;
  for (auto& a : agents_) {
    if (a->serving()) live.push_back(a.get());
  }
  if (live.empty()) return nullptr;
  return live[static_cast<size_t>(random_.range(0, live.size() - 1))];
}

bool WorldAgents::take_call(const WorldAgent& agent) {
  if (max_calls_per_step_ == 0) return true;
  for (size_t i = 0; i < agents_.size(); ++i) {
    if (agents_[i].get() != &agent) continue;
    if (calls_[i] >= max_calls_per_step_) {
      ++refused_busy_;
      return false;
    }
    ++calls_[i];
  }
  return true;
}

int64_t WorldAgents::rebuilds() const {
  int64_t n = 0;
  for (const auto& a : agents_) n += a->rebuilds();
  return n;
}

void WorldAgents::tick() {
  for (auto& a : agents_) a->tick();
  std::fill(calls_.begin(), calls_.end(), 0);
}

void WorldAgents::flush() {
  for (auto& a : agents_) a->flush();
}

bool WorldAgents::whole() const {
  if (!clustered()) return agents_[0]->up();
  for (const auto& a : agents_) {
    if (!a->serving()) return false;
  }
  for (int shard = 0; shard < shard_count_; ++shard) {
    bool owned = false;
    for (const auto& a : agents_) owned = owned || a->believed_epoch(shard).has_value();
    if (!owned) return false;
  }
  return true;
}

std::vector<Violation> WorldAgents::check_leases() {
  std::vector<Violation> out;
  if (!clustered()) return out;
  for (int shard = 0; shard < shard_count_; ++shard) {
    std::vector<std::string> believers;
    for (auto& a : agents_) {
      auto epoch = a->believed_epoch(shard);
      if (!epoch) continue;
      believers.push_back(a->instance_id() + "@" + std::to_string(*epoch));
      // fence_ok is the store's own test of a live lease at that epoch.
      if (!db_->leases().fence_ok(shard, a->instance_id(), *epoch)) {
        out.push_back({"shard_owner_not_leased",
                       "instance " + a->instance_id() + " believes it owns shard " +
                           std::to_string(shard) + " at epoch " + std::to_string(*epoch) +
                           ", which is not the shard's live lease in the store"});
      }
    }
    if (believers.size() > 1) {
      std::string who;
      for (const auto& b : believers) who += " " + b;
      out.push_back({"shard_owned_twice", "shard " + std::to_string(shard) + ":" + who});
    }
  }
  for (const std::string& bypass : db_->bypasses()) out.push_back({"write_bypassed_fence", bypass});
  return out;
}

}  // namespace vend::sim
