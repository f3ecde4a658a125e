#include <algorithm>

#include "cluster/lease_store.hpp"

namespace vend::agent {

Status MemoryLeaseStore::join(const std::string& instance, const std::string& session,
                              int shard_count) {
  if (shard_count <= 0) return make_error("config", "shard count must be positive");
  if (shard_count_ != 0 && shard_count != shard_count_) {
    return make_error("config", "shard count " + std::to_string(shard_count) +
                                    " differs from the store's " + std::to_string(shard_count_));
  }
  int64_t now = clock_.monotonic_ms();
  auto it = members_.find(instance);
  if (it != members_.end() && it->second.session != session && now < it->second.expires_ms) {
    return make_error("conflict", "instance id " + instance + " is in use by a live process");
  }
  if (shard_count_ == 0) {
    shard_count_ = shard_count;
    leases_.assign(static_cast<size_t>(shard_count), Lease{});
  }
  members_[instance] = Member{session, now, ""};  // a member once it heartbeats
  return {};
}

Status MemoryLeaseStore::advertise(const std::string& instance, const std::string& url) {
  auto it = members_.find(instance);
  if (it == members_.end()) return make_error("conflict", "instance " + instance + " never joined");
  it->second.url = url;
  return {};
}

Result<ClusterView> MemoryLeaseStore::heartbeat(const std::string& instance,
                                                const std::string& session, int64_t member_ttl_ms) {
  auto it = members_.find(instance);
  if (it == members_.end() || it->second.session != session) {
    return make_error("conflict", "instance id " + instance + " was taken by another process");
  }
  int64_t now = clock_.monotonic_ms();
  it->second.expires_ms = now + member_ttl_ms;
  ClusterView view;
  for (const auto& [id, member] : members_) {
    if (now >= member.expires_ms) continue;
    view.members.push_back(id);  // std::map: sorted
    if (!member.url.empty()) view.urls[id] = member.url;
  }
  for (size_t shard = 0; shard < leases_.size(); ++shard) {
    const Lease& lease = leases_[shard];
    view.leases.push_back(
        LeaseRow{static_cast<int>(shard), lease.owner, lease.epoch, live(lease, now)});
  }
  return view;
}

Result<std::vector<Grant>> MemoryLeaseStore::acquire(const std::string& instance,
                                                     const std::vector<int>& shards,
                                                     int64_t lease_ms) {
  int64_t now = clock_.monotonic_ms();
  std::vector<Grant> won;
  for (int shard : shards) {
    if (shard < 0 || shard >= shard_count_) continue;
    Lease& lease = leases_[static_cast<size_t>(shard)];
    if (live(lease, now)) continue;
    lease = Lease{instance, lease.epoch + 1, now + lease_ms};
    won.push_back(Grant{shard, lease.epoch});
  }
  return won;
}

Result<std::vector<int>> MemoryLeaseStore::renew(const std::string& instance,
                                                 const std::vector<Grant>& held, int64_t lease_ms) {
  int64_t now = clock_.monotonic_ms();
  std::vector<int> renewed;
  for (const Grant& grant : held) {
    if (grant.shard < 0 || grant.shard >= shard_count_) continue;
    Lease& lease = leases_[static_cast<size_t>(grant.shard)];
    if (!live(lease, now) || lease.owner != instance || lease.epoch != grant.epoch) continue;
    lease.expires_ms = now + lease_ms;
    renewed.push_back(grant.shard);
  }
  return renewed;
}

Status MemoryLeaseStore::release(const std::string& instance, const Grant& grant) {
  if (grant.shard < 0 || grant.shard >= shard_count_) return {};
  Lease& lease = leases_[static_cast<size_t>(grant.shard)];
  if (lease.owner == instance && lease.epoch == grant.epoch) {
    lease.expires_ms = clock_.monotonic_ms();
  }
  return {};
}

Status MemoryLeaseStore::leave(const std::string& instance) {
  int64_t now = clock_.monotonic_ms();
  for (Lease& lease : leases_) {
    if (lease.owner == instance && live(lease, now)) lease.expires_ms = now;
  }
  members_.erase(instance);
  return {};
}

bool MemoryLeaseStore::fence_ok(int shard, const std::string& instance, uint64_t epoch) {
  bool ok = shard >= 0 && shard < shard_count_;
  if (ok) {
    const Lease& lease = leases_[static_cast<size_t>(shard)];
    ok = lease.owner == instance && lease.epoch == epoch && live(lease, clock_.monotonic_ms());
  }
  if (!ok) ++fence_refusals_;
  return ok;
}

}  // namespace vend::agent
