// Repository: the write queue, the writer thread and group commit (the
// backend applies each group).
#include "repository/repository.hpp"

#include <algorithm>
#include <utility>

#include "cluster/shard_map.hpp"
#include "vend/thread_name.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "repository";

}  // namespace

Repository::Repository(std::unique_ptr<RepositoryBackend> backend, const RepositoryOptions& options,
                       Logger& log)
    : options_(options), log_(log), backend_(std::move(backend)) {
  if (!options_.manual_commit) writer_ = std::thread([this] { writer_loop(); });
}

Repository::~Repository() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
  apply_queued();  // manual_commit: what is still queued (nothing after abandon())
}

void Repository::abandon() {
  std::deque<Pending> dropped;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(queue_);
    queued_.store(0, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& p : dropped) p.done.set_value(make_error("abandoned", "the process died"));
  for (auto& p : dropped) run_after(p);
}

void Repository::run_after(Pending& pending) {
  for (auto& a : pending.after) a.fn(a.ticket.get());
}

void Repository::after_durable(const Ticket& ticket, std::function<void(Status)> fn) {
  if (ticket.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    fn(ticket.get());
    return;
  }
  {
    std::lock_guard lock(mu_);
    // Checked again under the lock: the writer fulfils a group before it
    // looks at the queue again, so a ticket still pending now is fulfilled
    // by a writer that will also see what is queued now.
    if (ticket.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      // Entries are fulfilled in queue order, so the callback rides on the
      // last one queued (the reservation's own write, usually): no entry of
      // its own. With nothing queued, the ticket's group is being applied: a
      // marker behind it runs as soon as the writer looks again.
      if (queue_.empty()) {
        queue_.push_back(Pending{Changeset{}, {}, nullptr, true, {}});
        queued_.store(queue_.size(), std::memory_order_release);
        wake_.notify_one();  // under the lock: the marker is the queue's only entry
      }
      queue_.back().after.push_back(After{ticket, std::move(fn)});
      return;
    }
  }
  fn(ticket.get());
}

Status Repository::wait(const Ticket& ticket) {
  if (options_.manual_commit) apply_queued();
  return ticket.get();
}

void Repository::apply_queued() {
  if (!options_.manual_commit) return;
  std::lock_guard apply(manual_mu_);
  while (true) {
    std::vector<Pending> ready, group;
    {
      std::lock_guard lock(mu_);
      if (queue_.empty()) return;
      take_group(ready, group);
    }
    run_ready(ready);
    if (!group.empty()) apply_group(group);
  }
}

// ---- submission -----------------------------------------------------------

Result<Ticket> Repository::enqueue(Changeset changes, bool bounded, bool barrier) {
  Pending pending{std::move(changes), {}, nullptr, false, {}, barrier};
  Ticket ticket = pending.done.get_future().share();
  {
    std::lock_guard lock(mu_);
    pending.fence = fence_;
    if (stopping_) {
      ++stats_.rejected_full;
      return make_error("unavailable", "repository is stopping");
    }
    if (bounded && queue_.size() >= options_.queue_max) {
      ++stats_.rejected_full;
      return make_error("unavailable",
                        "write queue full (" + std::to_string(queue_.size()) + " writes waiting)");
    }
    queue_.push_back(std::move(pending));
    queued_.store(queue_.size(), std::memory_order_release);
  }
  wake_.notify_one();
  return ticket;
}

Result<Ticket> Repository::submit(WriteFn write) {
  Changeset changes;
  changes.add(std::move(write));
  return enqueue(std::move(changes), true);
}

Result<Ticket> Repository::submit(Changeset changes) { return enqueue(std::move(changes), true); }

Result<std::vector<OrderEvent>> Repository::order_events(const std::string& order_id) {
  auto events = backend_->order_events(order_id);
  if (!events.ok()) return events.error();
  bool stored = !events->empty() && events->front().from_state.empty();
  if (stored) return events;
  auto order = backend_->find_order(order_id);
  if (!order.ok()) return order.error();
  if (!order->has_value()) return events;  // no such order
  const Order& o = **order;
  events->insert(events->begin(), OrderEvent{o.id, "", to_string(OrderState::kReserved),
                                             o.created_ms, kCreationDetail});
  return events;
}

void Repository::flush() {
  // Unbounded: a flush must not fail because the queue is full. An empty
  // changeset commits nothing, but is fulfilled in queue order.
  auto ticket = enqueue(Changeset{}, false, true);
  if (ticket.ok()) (void)wait(*ticket);
}

Status Repository::set_fence(std::shared_ptr<const WriteFence> fence) {
  if (fence) {
    if (!backend_->supports_fence()) {
      return make_error("config",
                        "this repository's backend (SQLite) cannot fence writes: "
                        "several agents need PostgreSQL");
    }
    if (fence->instance.empty() || fence->shard_count <= 0) {
      return make_error("config", "a write fence needs an instance id and a positive shard count");
    }
    if (auto s = backend_->check_fence(*fence); !s.ok()) return s;
  }
  std::lock_guard lock(mu_);
  fence_ = std::move(fence);
  return {};
}

bool Repository::accepting() const {
  return !stopping_.load(std::memory_order_acquire) &&
         queued_.load(std::memory_order_acquire) < options_.queue_max;
}

WriterStats Repository::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

// ---- the writer thread -----------------------------------------------------

void Repository::writer_loop() {
  name_this_thread("vend-writer");
  while (true) {
    std::vector<Pending> ready, group;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued is done
      take_group(ready, group);
    }
    run_ready(ready);
    if (!group.empty()) apply_group(group);
  }
}

// A marker at the queue's front was queued behind a write that has left the
// queue since, in a group this thread has applied and fulfilled: its
// callback runs now. Kept in the next group instead, it would wait for that
// group's commit too (its fsync) — what happened to every order whose write
// woke an idle writer just before its marker arrived.
void Repository::take_group(std::vector<Pending>& ready, std::vector<Pending>& group) {
  while (!queue_.empty() && queue_.front().marker) {
    ready.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  size_t n = std::min(queue_.size(), std::max<size_t>(1, options_.batch_max));
  group.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    group.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  queued_.store(queue_.size(), std::memory_order_release);
}

void Repository::run_ready(std::vector<Pending>& ready) {
  for (auto& p : ready) p.done.set_value(Status{});
  for (auto& p : ready) run_after(p);
}

Status Repository::claim_fence(Pending& pending) {
  const WriteFence* fence = pending.fence.get();
  const auto& devices = pending.changes.fenced_devices();
  if (!fence || devices.empty()) return {};
  std::vector<int> shards;
  shards.reserve(devices.size());
  for (const auto& device : devices) shards.push_back(shard_of(device, fence->shard_count));
  std::sort(shards.begin(), shards.end());
  shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  FenceClaim claim{fence->instance, {}};
  for (int shard : shards) {
    auto held = fence->epochs.find(shard);
    if (held == fence->epochs.end()) {
      return make_error("fenced", "write fenced: instance " + fence->instance +
                                      " does not hold shard " + std::to_string(shard) +
                                      " (refused before the database)");
    }
    claim.shards.emplace_back(shard, held->second);
  }
  pending.changes.claim_ = std::move(claim);
  return {};
}

void Repository::apply_group(std::vector<Pending>& group) {
  // A changeset whose shard is not held never reaches the backend.
  std::vector<std::optional<Status>> refused(group.size());
  std::vector<const Changeset*> writes;
  writes.reserve(group.size());
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i].marker) continue;
    if (auto s = claim_fence(group[i]); !s.ok()) {
      refused[i] = std::move(s);
      continue;
    }
    writes.push_back(&group[i].changes);
  }
  std::vector<Status> applied;
  if (!writes.empty()) {
    std::lock_guard apply(apply_mu_);  // recover() reconnects between groups
    applied = backend_->apply_group(writes);
  }
  applied.resize(writes.size(), make_error("unavailable", "the backend gave no outcome"));
  std::vector<Status> results;
  results.reserve(group.size());
  size_t next = 0;
  uint64_t failed = 0;
  int64_t fenced = 0;
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i].marker) {
      results.emplace_back();
    } else {
      results.push_back(refused[i] ? std::move(*refused[i]) : std::move(applied[next++]));
    }
    if (results.back().ok()) continue;
    // Fenced: expected while a shard moves (the owner rebuilds); not a failure.
    if (results.back().error().code == "fenced") {
      ++fenced;
      log_.warn(kLog, "write refused: " + results.back().error().message);
    } else {
      ++failed;
      log_.error(kLog, "write failed: " + results.back().error().to_string());
    }
  }
  {
    std::lock_guard lock(mu_);
    stats_.writes += group.size();
    stats_.failed_writes += failed;
    if (failed > 0) failed_any_.store(true, std::memory_order_release);
    stats_.fenced_writes += fenced;
    stats_.batches += 1;
    stats_.largest_batch = std::max<uint64_t>(stats_.largest_batch, group.size());
  }
  // Fulfil after the stats are updated, so a waiter sees them; then the
  // after_durable() callbacks, which may read any ticket of the group; a
  // flush() last, so that it returns after those callbacks.
  for (size_t i = 0; i < group.size(); ++i) {
    if (!group[i].barrier) group[i].done.set_value(std::move(results[i]));
  }
  for (auto& p : group) run_after(p);
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i].barrier) group[i].done.set_value(std::move(results[i]));
  }
}

Status Repository::recover() {
  {
    std::lock_guard apply(apply_mu_);
    if (Status s = backend_->reconnect(); !s.ok()) return s;
  }
  std::lock_guard lock(mu_);
  failed_any_.store(false, std::memory_order_release);
  log_.warn(kLog, "writes resumed after " + std::to_string(stats_.failed_writes) +
                      " failed write(s) in all");
  return {};
}

// A backend without the operators' tables (a decorator that does not
// forward them) says so.
namespace {
Error no_accounts() {
  return make_error("unsupported", "this repository backend keeps no operator accounts");
}
}  // namespace

Result<std::optional<StoredAccount>> RepositoryBackend::find_account(const std::string&) {
  return no_accounts();
}
Result<std::vector<StoredAccount>> RepositoryBackend::accounts() { return no_accounts(); }
Result<std::optional<StoredApiToken>> RepositoryBackend::find_api_token(const std::string&) {
  return no_accounts();
}
Result<std::vector<StoredApiToken>> RepositoryBackend::api_tokens(const std::string&) {
  return no_accounts();
}
Result<std::vector<AuditEntry>> RepositoryBackend::audit(const AuditQuery&) {
  return no_accounts();
}

}  // namespace vend::agent
