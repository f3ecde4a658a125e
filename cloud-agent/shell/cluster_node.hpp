// ClusterNode: this vend-agent in a cluster of several sharing one
// PostgreSQL (docs/deployment.md, "Several agents"). It joins the lease
// store and keeps the rest of the agent in step with the leases it holds,
// on two threads of its own:
//
//   - the lease thread ("vend-lease") runs the lease rounds (LeaseKeeper,
//     run_lease_round) every renew interval and nothing else: it never calls
//     the core, never waits for the writer, never waits for a rebuild, so a
//     saturated core or a rebuild of any length cannot make a lease lapse.
//     After each round it opens the shards won or renewed in the ShardGate
//     (their epoch and local validity end), and closes at once the shards
//     that leave (dropped to another member, lost, lapsed);
//   - the rebuild thread ("vend-cluster") brings the core in step whenever
//     the leases held differ from what the core was built for, or a write
//     was refused by the fence, and sets the repository's fence to the new
//     epochs in between: when shards were only gained it reads and adds
//     just their machines (AgentCore::gain: a failover costs the moved
//     machines), else it rebuilds the core from the database
//     (AgentCore::rebuild). Either reads the database on this thread, not
//     the core's;
//   - the core serves a device only when its shard is in the set it was
//     (re)built for AND the gate allows that shard at that epoch now: a
//     shard stops being served the moment its lease leaves or its local
//     validity ends (before the store's lease can lapse), with no step on
//     the core's queue; a shard gained is served once rebuilt. A write
//     submitted before a shard left and committed after its lease moved is
//     refused by the database's fence (answered "unavailable"), and the
//     core is rebuilt;
//   - routing: who serves a machine now (this instance, another one's
//     advertised URL, or nobody while its shard moves), from the latest
//     heartbeat;
//   - the cluster's metrics and GET /v1/cluster.
//
// One thing is fatal (replaced() turns true and the shell stops, exit 1): a
// heartbeat that finds this instance id taken by another process (this one
// was paused past its membership). A busy instance is never stopped: a full
// core queue only makes requests answer 503 and delays rebuilds; the leases
// are renewed all the same. Nor is a failed repository write (a lost
// database connection, a lock timeout): the core stops changing state
// (503), the rebuild thread connects the writer again (Repository::
// recover()) as soon as the database answers and rebuilds the core from
// what committed.
//
// Thread-safety: owns(), owner_url(), metrics(), view_json() and replaced()
// may be called from any thread; the rest from the shell's main thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "cluster/lease_keeper.hpp"
#include "cluster/lease_store.hpp"
#include "core/agent_core.hpp"
#include "repository/repository.hpp"
#include "shell/shard_gate.hpp"
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
  // repository's fence is set to the shards won, and the lease thread
  // starts (the leases are renewed while the core loads). Errors: "conflict" (the
  // instance id is held by a live process), "config" (shard count).
  Status join();
  // The core's ownership now (the shards won by join(), each while its
  // lease is valid: pass it to AgentCore::start()).
  AgentCore::Ownership ownership() const;
  // Starts the rebuild thread, which rebuilds `core` as the leases change.
  // `core` must outlive stop().
  void start(AgentCore& core);
  // Stops both threads (a rebuild under way finishes first) and leaves the
  // store (the leases are released, so the others take the shards at their
  // next round). Idempotent.
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
  using Epochs = std::map<int, uint64_t>;  // shard -> lease epoch
  struct Counters {
    int64_t rounds_failed = 0;
    int64_t shards_gained = 0;
    int64_t shards_lost = 0;
    int64_t rebuilds = 0;
    int64_t rebuild_failures = 0;
    double last_rebuild_s = 0;
    int64_t storage_recoveries = 0;
  };
  // The lease thread.
  void lease_loop();
  void lease_round();
  void record_round(const ClusterView& seen, const RoundResult& r);
  void close_shards(const std::vector<int>& leaving);
  void publish_leases();
  void fail_stop(const std::string& why, bool id_taken);
  // The rebuild thread.
  void rebuild_loop(AgentCore& core);
  bool wait_for_work();  // false: stopping
  bool recover_storage(AgentCore& core);
  bool rebuild_wanted(AgentCore& core);
  void rebuild(AgentCore& core);

  AgentCore::Ownership ownership_of(Epochs loaded) const;
  std::shared_ptr<const WriteFence> fence_of(const Epochs& epochs) const;
  // REQUIRES: mu_ held. Shards loaded in the core and still held at that epoch.
  bool served_here_locked(int shard) const;
  size_t served_count_locked() const;

  const ClusterNodeOptions options_;
  std::unique_ptr<LeaseStore> store_;
  Repository& repo_;
  const Clock& clock_;
  Logger& log_;
  std::string session_;
  LeaseKeeper keeper_;  // the lease thread's (join() before it starts)
  const std::shared_ptr<ShardGate> gate_ = std::make_shared<ShardGate>();

  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable wake_;
  ClusterView view_;
  Epochs granted_;               // leases held after the last round (the lease thread's)
  Epochs loaded_;                // what the core was last built for (the rebuild thread's)
  bool leases_changed_ = false;  // granted_ changed since the rebuild thread looked
  bool retry_rebuild_ = false;   // the last rebuild failed
  Counters counters_;
  bool stopping_ = false;

  std::atomic<bool> replaced_{false};  // fatal: the shell stops
  std::atomic<bool> id_taken_{false};  // by another process: do not leave()
  bool left_ = false;
  bool recovering_ = false;  // the rebuild thread's: storage failed, not back yet
  std::thread lease_thread_;
  std::thread rebuild_thread_;
};

}  // namespace vend::agent
