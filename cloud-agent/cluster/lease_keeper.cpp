#include "cluster/lease_keeper.hpp"

#include <algorithm>
#include <cassert>
#include <set>

#include "cluster/shard_map.hpp"

namespace vend::agent {

std::string check_lease_options(const LeaseOptions& o) {
  if (o.instance_id.empty()) return "instance id must not be empty";
  if (o.shard_count <= 0 || o.shard_count > 4096) return "shard count must be in 1..4096";
  if (o.renew_every_ms <= 0) return "lease renew interval must be positive";
  if (o.safety_ms < 0) return "lease safety margin must not be negative";
  // Two renewals fit in a lease, with the margin: one failed round is survived.
  if (o.lease_ms < 2 * o.renew_every_ms + o.safety_ms) {
    return "lease (" + std::to_string(o.lease_ms) +
           " ms) must be at least twice the renew interval plus the safety margin (" +
           std::to_string(2 * o.renew_every_ms + o.safety_ms) + " ms)";
  }
  return "";
}

LeaseKeeper::LeaseKeeper(LeaseOptions options) : options_(std::move(options)) {
  assert(check_lease_options(options_).empty());
}

LeaseKeeper::Plan LeaseKeeper::plan(const ClusterView& view, int64_t now_mono_ms) {
  Plan plan;
  // A lapsed lease is not renewed: it is won again, with a new epoch.
  plan.lapsed = expire(now_mono_ms).lost;
  std::vector<int> won = shards_won(options_.instance_id, view.members, options_.shard_count);
  std::set<int> wanted(won.begin(), won.end());
  for (auto it = held_.begin(); it != held_.end();) {
    Grant grant{it->first, it->second.epoch};
    if (wanted.count(it->first)) {
      plan.renew.push_back(grant);
      ++it;
    } else {
      plan.dropping.push_back(grant);
      it = held_.erase(it);
    }
  }
  for (const LeaseRow& row : view.leases) {
    if (wanted.count(row.shard) && !held_.count(row.shard) && !row.live) {
      plan.acquire.push_back(row.shard);
    }
  }
  return plan;
}

LeaseKeeper::Changes LeaseKeeper::settle(const Plan& plan, const std::vector<Grant>& won,
                                         const std::vector<int>& renewed,
                                         int64_t round_start_mono_ms) {
  int64_t valid_until = round_start_mono_ms + options_.lease_ms - options_.safety_ms;
  Changes changes;
  std::set<int> renewed_set(renewed.begin(), renewed.end());
  for (const Grant& grant : plan.renew) {
    auto it = held_.find(grant.shard);
    if (it == held_.end() || it->second.epoch != grant.epoch) continue;
    if (renewed_set.count(grant.shard)) {
      it->second.valid_until_mono_ms = std::max(it->second.valid_until_mono_ms, valid_until);
    } else {  // the store says it is not ours any more
      changes.lost.push_back(grant.shard);
      held_.erase(it);
    }
  }
  for (const Grant& grant : won) {
    auto it = held_.find(grant.shard);
    if (it != held_.end()) {  // cannot happen with a correct store: an epoch moved under us
      changes.lost.push_back(grant.shard);
      held_.erase(it);
    }
    held_[grant.shard] = Held{grant.epoch, valid_until};
    changes.gained.push_back(grant);
  }
  return changes;
}

LeaseKeeper::Changes LeaseKeeper::expire(int64_t now_mono_ms) {
  Changes changes;
  for (auto it = held_.begin(); it != held_.end();) {
    if (now_mono_ms >= it->second.valid_until_mono_ms) {
      changes.lost.push_back(it->first);
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  return changes;
}

std::vector<Grant> LeaseKeeper::held() const {
  std::vector<Grant> out;
  for (const auto& [shard, held] : held_) out.push_back(Grant{shard, held.epoch});
  return out;
}

std::optional<uint64_t> LeaseKeeper::epoch_of(int shard, int64_t now_mono_ms) const {
  auto it = held_.find(shard);
  if (it == held_.end() || now_mono_ms >= it->second.valid_until_mono_ms) return std::nullopt;
  return it->second.epoch;
}

std::optional<int64_t> LeaseKeeper::valid_until(int shard) const {
  auto it = held_.find(shard);
  if (it == held_.end()) return std::nullopt;
  return it->second.valid_until_mono_ms;
}

RoundResult run_lease_round(LeaseKeeper& keeper, LeaseStore& store, const std::string& session,
                            int64_t round_start_mono_ms,
                            const std::function<void(const std::vector<int>&)>& stop) {
  const LeaseOptions& o = keeper.options();
  RoundResult result;
  auto view = store.heartbeat(o.instance_id, session, o.lease_ms);
  if (!view) {
    result.status = view.error();
    result.changes = keeper.expire(round_start_mono_ms);
    if (!result.changes.lost.empty()) stop(result.changes.lost);
    return result;
  }
  LeaseKeeper::Plan plan = keeper.plan(*view, round_start_mono_ms);
  std::vector<int> leaving = plan.lapsed;
  for (const Grant& g : plan.dropping) leaving.push_back(g.shard);
  if (!leaving.empty()) stop(leaving);
  for (const Grant& g : plan.dropping) {
    (void)store.release(o.instance_id, g);  // if it fails, the lease simply runs out
  }
  auto won = store.acquire(o.instance_id, plan.acquire, o.lease_ms);
  auto renewed = store.renew(o.instance_id, plan.renew, o.lease_ms);
  result.changes = keeper.settle(plan, won ? *won : std::vector<Grant>{},
                                 renewed ? *renewed : std::vector<int>{}, round_start_mono_ms);
  if (!result.changes.lost.empty()) stop(result.changes.lost);
  result.changes.lost.insert(result.changes.lost.begin(), leaving.begin(), leaving.end());
  if (!won) result.status = won.error();
  if (!renewed) result.status = renewed.error();
  return result;
}

}  // namespace vend::agent
