// LeaseKeeper: one agent instance's view of the shards it owns, and what it
// asks its LeaseStore each round to keep exactly the shards rendezvous
// hashing gives it (shard_map.hpp). Pure: no I/O, no clock reads; the shell
// runs one round every renew_every_ms:
//
//   t0   = monotonic now
//   keeper.expire(t0) when the heartbeat fails (then no plan this round)
//   view = store.heartbeat(...)          // live members + leases
//   plan = keeper.plan(view, t0)         // stop plan.dropping in the core,
//                                        // flush its writes, then
//   store.release(each of plan.release)
//   won  = store.acquire(plan.acquire);  renewed = store.renew(plan.renew)
//   changes = keeper.settle(plan, won, renewed, t0)
//                                        // rebuild each changes.gained shard
//                                        // from the database, stop each lost one
//   and between rounds: keeper.expire(now) (leases whose renewals failed).
//
// Local validity. A lease granted or renewed in a round that started at t0
// is used until t0 + lease_ms - safety_ms on this instance's monotonic
// clock. The store set its expiry to (store now when it ran the request) +
// lease_ms, and it ran the request after t0, so the local end comes first as
// long as the two clocks' rates differ by less than safety_ms per lease_ms.
// The store's fence (lease_store.hpp) is what makes a late write harmless;
// local validity keeps a paused instance from acting (dispatching, answering)
// on a shard after it woke up.
//
// An epoch change means the shard's state must be rebuilt from the database:
// a lease lost and won again (even by this instance) comes back with a new
// epoch, so memory never carries over a gap in ownership.
//
// Not thread-safe: it belongs to the thread running the rounds.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster/lease_store.hpp"

namespace vend::agent {

struct LeaseOptions {
  std::string instance_id;
  int shard_count = 64;
  int64_t lease_ms = 3000;        // a lease lasts this long past its last renewal
  int64_t renew_every_ms = 1000;  // one round per interval
  int64_t safety_ms = 500;        // stop using a lease this long before the store's expiry
};

// "" when the options are usable, else what is wrong (names the option).
std::string check_lease_options(const LeaseOptions& options);

class LeaseKeeper {
 public:
  // REQUIRES: check_lease_options(options) is "".
  explicit LeaseKeeper(LeaseOptions options);

  // One round's requests, from what the heartbeat saw.
  struct Plan {
    std::vector<int> lapsed;      // local validity ended (renewals failed): drop from memory
    std::vector<Grant> dropping;  // held, now rendezvous-owned by another: stop, flush, release
    std::vector<Grant> renew;     // held and still ours
    std::vector<int> acquire;     // ours by rendezvous, not held, free in the store
  };
  // The shards held and not wanted any more, and those whose validity
  // lapsed, leave this keeper here (plan.dropping, plan.lapsed).
  Plan plan(const ClusterView& view, int64_t now_mono_ms);

  struct Changes {
    std::vector<Grant> gained;  // newly owned: rebuild from the database
    std::vector<int> lost;      // no longer owned: drop from memory
  };
  // The store's answers to `plan` (shards won with their epochs, shards
  // renewed) for a round that started at round_start_mono_ms.
  Changes settle(const Plan& plan, const std::vector<Grant>& won, const std::vector<int>& renewed,
                 int64_t round_start_mono_ms);
  // Leases whose local validity ended before now (failed renewals).
  Changes expire(int64_t now_mono_ms);
  // Every lease held (a failed round: the shell reports nothing else).
  std::vector<Grant> held() const;

  // The epoch of `shard` when this instance owns it at now_mono_ms.
  std::optional<uint64_t> epoch_of(int shard, int64_t now_mono_ms) const;
  // The end of the local validity of the lease held on `shard` (monotonic
  // ms); nullopt when none is held.
  std::optional<int64_t> valid_until(int shard) const;
  size_t owned_count() const { return held_.size(); }
  const LeaseOptions& options() const { return options_; }

 private:
  struct Held {
    uint64_t epoch = 0;
    int64_t valid_until_mono_ms = 0;
  };

  LeaseOptions options_;
  std::map<int, Held> held_;
};

// One round, as the shell (or the simulation) runs it, started at
// round_start_mono_ms: heartbeat, plan, `stop` called with every shard
// leaving this instance (lapsed or dropping; it must stop the core using
// them before returning: the agent closes its gate without waiting, and a
// write of theirs still queued commits only while the lease holds, by the
// store's fence), releases, acquire and
// renew, settle. A failed heartbeat expires what lapsed and returns its
// error ("conflict": this process was replaced and must stop); failed
// acquire/renew calls count as nothing won and nothing renewed. Returns the
// round's changes (gained, and lost after the plan).
struct RoundResult {
  Status status;
  LeaseKeeper::Changes changes;
};
RoundResult run_lease_round(LeaseKeeper& keeper, LeaseStore& store, const std::string& session,
                            int64_t round_start_mono_ms,
                            const std::function<void(const std::vector<int>&)>& stop);

}  // namespace vend::agent
