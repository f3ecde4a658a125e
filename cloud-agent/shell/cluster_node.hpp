// ClusterNode: this vend-agent in a cluster of several sharing one
// PostgreSQL (docs/deployment.md, "Several agents"). It joins the lease
// store, runs the lease rounds on a thread of its own (LeaseKeeper,
// run_lease_round), and keeps the rest of the agent in step with the leases
// it holds:
//
//   - the core serves exactly the machines of its shards: before a shard is
//     released the core stops serving it (AgentCore::restrict) and its writes
//     are flushed; after shards are gained or lost, and after a write was
//     refused by the fence, the core is rebuilt from the database
//     (AgentCore::rebuild) and the repository's fence set to the new epochs
//     in between;
//   - routing: who serves a machine now (this instance, another one's
//     advertised URL, or nobody while its shard moves), from the latest
//     heartbeat;
//   - the cluster's metrics and GET /v1/cluster.
//
// Two things are fatal (replaced() turns true and the shell stops, exit 1):
// a heartbeat that finds this instance id taken by another process (this
// one was paused past its membership), and a failed repository (a lost
// database connection: the log is fail-stop, and leases it cannot write
// under would leave its machines unserved).
//
// Thread-safety: owns(), owner_url(), metrics(), view_json() and replaced()
// may be called from any thread; the rest from the shell's main thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "core/agent_core.hpp"
#include "cluster/lease_keeper.hpp"
#include "cluster/lease_store.hpp"
#include "repository/repository.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"
#include "vend/random.hpp"

namespace vend::agent {

struct ClusterNodeOptions {
  LeaseOptions lease;         // instance id, shard count, lease length, renew interval
  std::string advertise_url;  // this instance's HTTP base URL, for the others' redirects
  // A restarted instance waits this long at most for its dead predecessor's
  // membership (same instance id) to expire before it gives up.
  int64_t join_timeout_ms = 10'000;
};

class ClusterNode {
 public:
  // `store`, `repo`, `clock` and `log` must outlive the node.
  ClusterNode(ClusterNodeOptions options, std::unique_ptr<LeaseStore> store, Repository& repo,
              const Clock& clock, Random& random, Logger& log);
  ~ClusterNode();
  ClusterNode(const ClusterNode&) = delete;
  ClusterNode& operator=(const ClusterNode&) = delete;

  // Joins the store and runs the first round, before the core starts: the
  // repository's fence is set to the shards won. Errors: "conflict" (the
  // instance id is held by a live process), "config" (shard count).
  Status join();
  // The core's ownership now (a fixed set of shards: pass it to start()).
  AgentCore::Ownership ownership() const;
  // Starts the rounds' thread, which restricts and rebuilds `core`.
  void start(AgentCore& core);
  // Stops the rounds and leaves the store (the leases are released, so the
  // others take the shards at their next round). Idempotent.
  void stop();

  // Routing: the base URL of the instance serving `device` now (this one's
  // included), or nullopt while nobody holds its shard.
  std::optional<std::string> owner_url(const std::string& device) const;
  const std::string& self_url() const { return options_.advertise_url; }
  bool replaced() const { return replaced_.load(); }
  // Prometheus text (vend_cluster_*).
  std::string metrics() const;
  // GET /v1/cluster: this instance, the members and every shard's lease.
  std::string view_json() const;

 private:
  struct Counters {
    int64_t rounds_failed = 0;
    int64_t shards_gained = 0;
    int64_t shards_lost = 0;
    int64_t rebuilds = 0;
    int64_t rebuild_failures = 0;
    double last_rebuild_s = 0;
  };
  void loop(AgentCore& core);
  void round(AgentCore& core);
  void rebuild(AgentCore& core);
  std::shared_ptr<const WriteFence> fence_of_held() const;
  static AgentCore::Ownership ownership_of(std::set<int> shards, int shard_count);

  const ClusterNodeOptions options_;
  std::unique_ptr<LeaseStore> store_;
  Repository& repo_;
  const Clock& clock_;
  Logger& log_;
  std::string session_;
  LeaseKeeper keeper_;  // the rounds' thread's (join() before it starts)
  bool rebuild_due_ = false;

  mutable std::mutex mu_;  // guards view_, held_, counters_
  ClusterView view_;
  std::set<int> held_;
  Counters counters_;

  std::atomic<bool> replaced_{false};  // fatal: the shell stops
  bool id_taken_ = false;              // by another process: do not leave()
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  bool left_ = false;
  std::thread thread_;
};

}  // namespace vend::agent
