// One cloud agent of the deterministic world: AgentCore over a Repository
// (manual commit: writes commit when the core waits for them or the world
// flushes), a CallerRunner (a step posted after a commit runs when the world
// drives the call on: core/order_calls.hpp) and a bus client. A crash drops the core, every write
// not committed yet and the bus connection; the database stays and is reopened by start(), which
// rebuilds the timers from it.
//
// Cluster mode (an InstanceSetup, several agents sharing one database):
// the instance has its own bus client (vend-agent-<id>, clean session; the
// core subscribes to its own machines), its own clock (skewed, drifting),
// a LeaseKeeper and a session in the shared lease table, and a Repository
// over FencedBackend. It runs what ClusterNode (cloud-agent/shell/
// cluster_node.cpp) runs on its thread, on virtual time: a lease round every
// renew interval of its own monotonic clock — restrict the core before a
// shard leaves, rebuild it (fence set in between) after shards moved or a
// write was fenced, stop when the repository failed or the instance id was
// taken — and the process stopping is followed by a restart a second later
// (systemd), which joins again once the predecessor's membership expired.
// A paused instance (SIGSTOP) runs neither steps nor rounds and buffers the
// messages it is sent; resume() hands them over first.
//
// Not thread-safe (everything runs on the world's thread). Non-copyable.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/lease_keeper.hpp"
#include "cluster/shard_map.hpp"
#include "core/agent_core.hpp"
#include "core/order_calls.hpp"
#include "repository/repository.hpp"
#include "vend/in_memory_bus.hpp"
#include "world/skewed_clock.hpp"
#include "world/trace.hpp"
#include "world/world_database.hpp"

namespace vend::sim {

inline constexpr const char* kAgentClientId = "vend-agent";

// "vm-001 evt 12 dispense_result DISPENSED ord-..." / "vm-001 status online 0123abcd",
// for the trace.
std::string describe_device_message(const Message& message);

// One of several agents. `db` and `clock` must outlive the agent.
struct InstanceSetup {
  agent::LeaseOptions lease;  // instance id, shard count, lease, renew interval
  SharedDatabase* db = nullptr;
  SkewedClock* clock = nullptr;  // the instance's own
  // A rebuild's virtual time per machine it loads (WorldOptions), and the
  // world's machines per shard (index: shard).
  int64_t rebuild_ms_per_machine = 0;
  std::vector<int> machines_per_shard;
};

class WorldAgent {
 public:
  // `instance`: cluster mode (then its clock replaces `clock`).
  WorldAgent(std::string db_path, agent::AgentOptions options, InMemoryBus& bus, const Clock& clock,
             Random& random, Logger& log, Trace& trace,
             std::optional<InstanceSetup> instance = std::nullopt);
  ~WorldAgent();
  WorldAgent(const WorldAgent&) = delete;
  WorldAgent& operator=(const WorldAgent&) = delete;

  // The process starts. REQUIRES: !up(). Cluster mode: when the lease store
  // or the database cannot be reached, or the instance id is still held by a
  // predecessor, the instance keeps trying at every renew interval (up()
  // stays false meanwhile); only set-up failures are errors.
  Status start();
  // Process death (kill -9): uncommitted writes are lost. REQUIRES: started.
  void crash();
  bool up() const { return core_ != nullptr; }
  // Started (up, or trying to join): crash() may be called.
  bool started() const { return up() || starting_; }
  // Runs what is due: the lease round (cluster mode), a rebuild whose
  // virtual time is over, the core's tick, a pending restart. Nothing while
  // paused.
  void tick();
  // Waits until every write submitted so far is committed. No-op while down.
  void flush();

  // REQUIRES: up().
  agent::AgentCore& core() { return *core_; }
  // A customer's reservation or payment through the asynchronous path,
  // driven to its answer (agent::call_order); `crash_at` may crash this
  // agent between a commit and its next step or answer, and the call is
  // then answered "unavailable" (the customer heard nothing).
  // REQUIRES: serving().
  Result<agent::Order> call_order(const agent::OrderCall& start, const agent::CrashAt& crash_at);

  // ---- cluster mode ----
  bool clustered() const { return instance_.has_value(); }
  const std::string& instance_id() const { return instance_->lease.instance_id; }
  // SIGSTOP / SIGCONT. REQUIRES: clustered().
  void pause();
  void resume();
  bool paused() const { return paused_; }
  // Takes calls now: up and not paused.
  bool serving() const { return up() && !paused_; }
  // The epoch of `shard` if this instance believes it owns it now (its
  // keeper's local validity, on its own clock).
  std::optional<uint64_t> believed_epoch(int shard) const;
  // The instance a redirect for `device` goes to, from this instance's
  // latest heartbeat (a live lease of another instance), or "".
  std::string redirect_for(const std::string& device) const;
  SkewedClock& own_clock() { return *instance_->clock; }
  // Rebuilds (and gains) finished by this instance's processes.
  int64_t rebuilds() const { return rebuilds_; }

 private:
  Status start_single();
  Status start_instance();
  // A new process of the instance: a new session and keeper, not joined.
  void begin_process();
  Status open_instance_repository();
  // One join attempt and the first round; false (and a retry later) when
  // the store or the database cannot be reached or the id is still held.
  bool try_join();
  void connect_client();
  void lease_round();
  // Starts a rebuild that ends rebuild_ms_per_machine x the machines it
  // loads later (at once with 0): the lease rounds go on meanwhile.
  void start_rebuild();
  // The shards gained since the last build when only gains happened (the
  // core then adds them), else nullopt (it is rebuilt whole).
  std::optional<agent::ShardEpochs> gained_only(const agent::ShardEpochs& held) const;
  // The machines a rebuild now would load.
  int64_t machines_to_load() const;
  void rebuild();
  // The process stops (ClusterNode: replaced; the shell exits) and starts
  // again a second later. `leave`: the id is still ours.
  void stop_process(const std::string& why, bool leave);
  void teardown();
  std::shared_ptr<const agent::WriteFence> fence_of_held() const;
  agent::AgentCore::Ownership ownership(std::set<int> shards) const;
  agent::AgentCore::Ownership ownership(const agent::ShardEpochs& leases) const;
  agent::ShardEpochs held_leases() const;
  std::string client_id() const;

  std::string db_path_;
  agent::AgentOptions options_;
  InMemoryBus& bus_;
  const Clock& clock_;
  Random& random_;
  Logger& log_;
  Trace& trace_;
  std::optional<InstanceSetup> instance_;
  std::unique_ptr<agent::CallerRunner> runner_;  // outlives core_ and repo_
  std::unique_ptr<agent::Repository> repo_;
  std::unique_ptr<InMemoryClient> client_;
  std::unique_ptr<agent::AgentCore> core_;

  // Cluster mode.
  std::unique_ptr<PartitionedLeaseStore> store_;
  std::unique_ptr<agent::LeaseKeeper> keeper_;
  std::string session_;
  bool starting_ = false;         // the process runs, not joined yet
  int64_t next_try_mono_ms_ = 0;  // of a join attempt
  int64_t next_round_mono_ms_ = 0;
  bool rebuild_due_ = false;
  agent::ShardEpochs loaded_;          // the leases the core was last built for
  bool rebuild_failed_ = false;        // the last rebuild or gain failed
  int64_t rebuild_done_mono_ms_ = -1;  // a rebuild under way ends then
  int64_t rebuilds_ = 0;
  bool paused_ = false;
  std::deque<Message> inbox_;  // delivered while paused
};

}  // namespace vend::sim
