// The one database several agents of the deterministic world share: an
// SQLite file that each instance's Repository opens through FencedBackend,
// and the lease table (MemoryLeaseStore) on the world's clock, which is the
// store's clock, the truth every instance's skewed clock is measured by.
//
// FencedBackend refuses what PostgreSQL's vend_fence() would: a changeset
// with a fence claim commits only if, when it is applied, every claimed
// shard's lease is held by the claim's instance at that epoch and
// unexpired (MemoryLeaseStore::fence_ok); otherwise it fails "fenced" alone
// and the rest of the group commits. Everything runs on the world's thread
// and the clock does not move during an apply, so "when it is applied" is
// "when it commits".
//
// A partition between one instance and the database: its lease-store calls
// (PartitionedLeaseStore), its applies and its reads fail "unavailable" for
// as long as it lasts, as a lost PostgreSQL connection would.
//
// Not thread-safe. Non-copyable.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/lease_store.hpp"
#include "repository/repository.hpp"

namespace vend::sim {

class SharedDatabase {
 public:
  // `store_clock` must outlive this object.
  SharedDatabase(std::string path, const Clock& store_clock)
      : path_(std::move(path)), store_(store_clock) {}
  SharedDatabase(const SharedDatabase&) = delete;
  SharedDatabase& operator=(const SharedDatabase&) = delete;

  const std::string& path() const { return path_; }
  agent::MemoryLeaseStore& leases() { return store_; }
  void set_partitioned(const std::string& instance, bool partitioned);
  bool reachable(const std::string& instance) const { return partitioned_.count(instance) == 0; }

  // The fence's bookkeeping, for the invariants: a changeset that names
  // devices but carries no claim, or claims for another instance than the
  // one applying it, bypassed the fence (each is one line of evidence).
  void record_bypass(std::string evidence) { bypasses_.push_back(std::move(evidence)); }
  const std::vector<std::string>& bypasses() const { return bypasses_; }
  int64_t fenced_writes = 0;   // changesets refused by the fence
  int64_t checked_writes = 0;  // claimed changesets that passed it

 private:
  std::string path_;
  agent::MemoryLeaseStore store_;
  std::set<std::string> partitioned_;
  std::vector<std::string> bypasses_;
};

// An instance's Repository backend over the shared SQLite file.
class FencedBackend final : public agent::RepositoryBackend {
 public:
  FencedBackend(std::unique_ptr<agent::RepositoryBackend> sqlite, SharedDatabase& db,
                std::string instance)
      : inner_(std::move(sqlite)), db_(db), instance_(std::move(instance)) {}

  std::vector<Status> apply_group(const std::vector<const agent::Changeset*>& group) override;
  bool supports_fence() const override { return true; }

  Result<agent::LoadedState> load(size_t recent_orders_max, const agent::LoadFilter& only) override;
  Result<std::optional<agent::Order>> find_order(const std::string& order_id) override;
  Result<std::optional<agent::Order>> find_order_by_idempotency_key(
      const std::string& key) override;
  Result<std::optional<agent::StoredPayment>> find_payment(const std::string& payment_id) override;
  Result<std::optional<agent::StoredRestock>> find_restock(const std::string& device,
                                                           const std::string& restock_id) override;
  Result<std::vector<std::string>> known_tokens(const std::vector<std::string>& tokens) override;
  Result<std::map<agent::TokenState, int64_t>> token_counts(const std::string& device,
                                                            int slot) override;
  Result<std::optional<agent::TokenState>> token_state(const std::string& token) override;
  Result<std::vector<agent::OrderEvent>> order_events(const std::string& order_id) override;
  Result<std::vector<agent::StoredPayment>> payments_of(const std::string& order_id) override;
  Result<std::vector<agent::StoredRefund>> refunds_of(const std::string& order_id) override;
  Result<std::vector<agent::StoredRefund>> refunds(std::optional<agent::RefundState> state,
                                                   size_t limit) override;
  Result<std::optional<agent::StoredSnapshot>> snapshot(const std::string& device) override;
  Result<std::optional<std::string>> reconcile_report(const std::string& device) override;
  Result<std::vector<agent::StoredFault>> faults(const std::string& device, size_t limit) override;

 private:
  // The fence's verdict on one changeset: ok, or "fenced" naming the shard.
  Status check_claim(const agent::Changeset& changes);
  // A read, unless the database is out of reach.
  template <typename Read>
  auto read(Read fn) -> decltype(fn()) {
    if (!db_.reachable(instance_)) return unreachable();
    return fn();
  }
  Error unreachable() const;

  std::unique_ptr<agent::RepositoryBackend> inner_;
  SharedDatabase& db_;
  std::string instance_;
};

// An instance's connection to the lease table: MemoryLeaseStore, failing
// "unavailable" while the instance is partitioned from the database. Keeps
// what the latest heartbeat saw (the instance's routing table).
class PartitionedLeaseStore final : public agent::LeaseStore {
 public:
  PartitionedLeaseStore(SharedDatabase& db, std::string instance)
      : db_(db), instance_(std::move(instance)) {}

  Status join(const std::string& instance, const std::string& session, int shard_count) override;
  Status advertise(const std::string& instance, const std::string& url) override;
  Result<agent::ClusterView> heartbeat(const std::string& instance, const std::string& session,
                                       int64_t member_ttl_ms) override;
  Result<std::vector<agent::Grant>> acquire(const std::string& instance,
                                            const std::vector<int>& shards,
                                            int64_t lease_ms) override;
  Result<std::vector<int>> renew(const std::string& instance, const std::vector<agent::Grant>& held,
                                 int64_t lease_ms) override;
  Status release(const std::string& instance, const agent::Grant& grant) override;
  Status leave(const std::string& instance) override;
  const std::optional<agent::ClusterView>& last_view() const { return last_view_; }

 private:
  Error unreachable() const;

  std::optional<agent::ClusterView> last_view_;

  SharedDatabase& db_;
  std::string instance_;
};

}  // namespace vend::sim
