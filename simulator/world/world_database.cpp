#include "world/world_database.hpp"

namespace vend::sim {

void SharedDatabase::set_partitioned(const std::string& instance, bool partitioned) {
  if (partitioned) {
    partitioned_.insert(instance);
  } else {
    partitioned_.erase(instance);
  }
}

// ---- FencedBackend -------------------------------------------------------------

Error FencedBackend::unreachable() const {
  return make_error("unavailable", "instance " + instance_ + ": the database is unreachable");
}

Status FencedBackend::check_claim(const agent::Changeset& changes) {
  const agent::FenceClaim* claim = changes.fence_claim();
  if (claim == nullptr) {
    if (!changes.fenced_devices().empty()) {
      db_.record_bypass("instance " + instance_ + " wrote data of " + changes.fenced_devices()[0] +
                        " without a fence claim");
    }
    return {};
  }
  if (claim->instance != instance_) {
    db_.record_bypass("instance " + instance_ + " wrote under the fence of " + claim->instance);
  }
  for (const auto& [shard, epoch] : claim->shards) {
    if (db_.leases().fence_ok(shard, claim->instance, epoch)) continue;
    ++db_.fenced_writes;
    return make_error("fenced", "write fenced: shard " + std::to_string(shard) +
                                    " is not held by " + claim->instance + " at epoch " +
                                    std::to_string(epoch));
  }
  if (!claim->shards.empty()) ++db_.checked_writes;
  return {};
}

std::vector<Status> FencedBackend::apply_group(const std::vector<const agent::Changeset*>& group) {
  std::vector<Status> results(group.size());
  if (!db_.reachable(instance_)) {
    for (Status& s : results) s = unreachable();
    return results;
  }
  // The fence first, for every changeset (as vend_fence() runs inside each
  // one's savepoint), then the ones that passed, as one group.
  std::vector<const agent::Changeset*> passed;
  std::vector<size_t> where;
  for (size_t i = 0; i < group.size(); ++i) {
    results[i] = check_claim(*group[i]);
    if (!results[i].ok()) continue;
    passed.push_back(group[i]);
    where.push_back(i);
  }
  if (passed.empty()) return results;
  std::vector<Status> applied = inner_->apply_group(passed);
  for (size_t k = 0; k < applied.size(); ++k) results[where[k]] = applied[k];
  return results;
}

Result<agent::LoadedState> FencedBackend::load(size_t recent_orders_max,
                                               const agent::LoadFilter& only) {
  return read([&] { return inner_->load(recent_orders_max, only); });
}
Result<std::optional<agent::Order>> FencedBackend::find_order(const std::string& order_id) {
  return read([&] { return inner_->find_order(order_id); });
}
Result<std::optional<agent::Order>> FencedBackend::find_order_by_idempotency_key(
    const std::string& key) {
  return read([&] { return inner_->find_order_by_idempotency_key(key); });
}
Result<std::optional<agent::StoredPayment>> FencedBackend::find_payment(
    const std::string& payment_id) {
  return read([&] { return inner_->find_payment(payment_id); });
}
Result<std::optional<agent::StoredRestock>> FencedBackend::find_restock(
    const std::string& device, const std::string& restock_id) {
  return read([&] { return inner_->find_restock(device, restock_id); });
}
Result<std::vector<std::string>> FencedBackend::known_tokens(
    const std::vector<std::string>& tokens) {
  return read([&] { return inner_->known_tokens(tokens); });
}
Result<std::map<agent::TokenState, int64_t>> FencedBackend::token_counts(const std::string& device,
                                                                         int slot) {
  return read([&] { return inner_->token_counts(device, slot); });
}
Result<std::optional<agent::TokenState>> FencedBackend::token_state(const std::string& token) {
  return read([&] { return inner_->token_state(token); });
}
Result<std::vector<agent::OrderEvent>> FencedBackend::order_events(const std::string& order_id) {
  return read([&] { return inner_->order_events(order_id); });
}
Result<std::vector<agent::StoredPayment>> FencedBackend::payments_of(const std::string& order_id) {
  return read([&] { return inner_->payments_of(order_id); });
}
Result<std::vector<agent::StoredRefund>> FencedBackend::refunds_of(const std::string& order_id) {
  return read([&] { return inner_->refunds_of(order_id); });
}
Result<std::vector<agent::StoredRefund>> FencedBackend::refunds(
    std::optional<agent::RefundState> state, size_t limit) {
  return read([&] { return inner_->refunds(state, limit); });
}
Result<std::optional<agent::StoredSnapshot>> FencedBackend::snapshot(const std::string& device) {
  return read([&] { return inner_->snapshot(device); });
}
Result<std::optional<std::string>> FencedBackend::reconcile_report(const std::string& device) {
  return read([&] { return inner_->reconcile_report(device); });
}
Result<std::vector<agent::StoredFault>> FencedBackend::faults(const std::string& device,
                                                              size_t limit) {
  return read([&] { return inner_->faults(device, limit); });
}

// ---- PartitionedLeaseStore ------------------------------------------------------

Error PartitionedLeaseStore::unreachable() const {
  return make_error("unavailable", "instance " + instance_ + ": the lease store is unreachable");
}

Status PartitionedLeaseStore::join(const std::string& instance, const std::string& session,
                                   int shard_count) {
  if (!db_.reachable(instance_)) return unreachable();
  return db_.leases().join(instance, session, shard_count);
}
Status PartitionedLeaseStore::advertise(const std::string& instance, const std::string& url) {
  if (!db_.reachable(instance_)) return unreachable();
  return db_.leases().advertise(instance, url);
}
Result<agent::ClusterView> PartitionedLeaseStore::heartbeat(const std::string& instance,
                                                            const std::string& session,
                                                            int64_t member_ttl_ms) {
  if (!db_.reachable(instance_)) return unreachable();
  auto view = db_.leases().heartbeat(instance, session, member_ttl_ms);
  if (view.ok()) last_view_ = *view;
  return view;
}
Result<std::vector<agent::Grant>> PartitionedLeaseStore::acquire(const std::string& instance,
                                                                 const std::vector<int>& shards,
                                                                 int64_t lease_ms) {
  if (!db_.reachable(instance_)) return unreachable();
  return db_.leases().acquire(instance, shards, lease_ms);
}
Result<std::vector<int>> PartitionedLeaseStore::renew(const std::string& instance,
                                                      const std::vector<agent::Grant>& held,
                                                      int64_t lease_ms) {
  if (!db_.reachable(instance_)) return unreachable();
  return db_.leases().renew(instance, held, lease_ms);
}
Status PartitionedLeaseStore::release(const std::string& instance, const agent::Grant& grant) {
  if (!db_.reachable(instance_)) return unreachable();
  return db_.leases().release(instance, grant);
}
Status PartitionedLeaseStore::leave(const std::string& instance) {
  if (!db_.reachable(instance_)) return unreachable();
  return db_.leases().leave(instance);
}

}  // namespace vend::sim
