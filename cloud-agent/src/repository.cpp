// Repository: opening, the writer thread and group commit.
#include "vend/agent/repository.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include "repository_schema.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "repository";
constexpr int kBeginAttempts = 3;  // BEGIN IMMEDIATE retries (each waits busy_timeout_ms)

Status fail_unavailable(const std::string& why) { return make_error("unavailable", why); }

}  // namespace

Result<sql::Statement*> WriteContext::statement(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    auto stmt = db_.prepare(sql);
    if (!stmt.ok()) return stmt.error();
    it = cache_.emplace(sql, std::make_unique<sql::Statement>(std::move(stmt).value())).first;
  }
  it->second->reset();
  return it->second.get();
}

Result<std::unique_ptr<Repository>> Repository::open(const std::string& path,
                                                     const RepositoryOptions& options,
                                                     Logger& log) {
  sql::OpenOptions open_options;
  open_options.synchronous = options.synchronous;
  open_options.busy_timeout_ms = options.busy_timeout_ms;
  auto write_db = sql::Database::open(path, open_options);
  if (!write_db.ok()) return write_db.error();
  if (auto s = write_db->migrate(detail::migrations()); !s.ok()) return s.error();
  auto read_db = sql::Database::open(path, open_options);
  if (!read_db.ok()) return read_db.error();
  // Orders and tokens are keyed by random ids, so every write lands on a
  // different page: with SQLite's default 2 MiB cache the writer re-reads
  // pages it wrote moments ago (benchmark 3).
  std::string cache = "PRAGMA cache_size=-" + std::to_string(options.cache_kib);
  for (sql::Database* db : {&*write_db, &*read_db}) {
    if (auto s = db->exec(cache); !s.ok()) return s.error();
  }
  return std::unique_ptr<Repository>(
      new Repository(std::move(write_db).value(), std::move(read_db).value(), options, log));
}

Repository::Repository(sql::Database write_db, sql::Database read_db,
                       const RepositoryOptions& options, Logger& log)
    : options_(options),
      log_(log),
      write_db_(std::move(write_db)),
      write_ctx_(write_db_, options_),
      read_db_(std::move(read_db)) {
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
  }
  wake_.notify_all();
  for (auto& p : dropped) p.done.set_value(make_error("abandoned", "the process died"));
  for (auto& p : dropped) {
    if (p.after) p.after();
  }
}

void Repository::after_durable(const Ticket& ticket, std::function<void(Status)> fn) {
  if (ticket.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    fn(ticket.get());
    return;
  }
  // A marker behind every write queued so far: writes are fulfilled in queue
  // order, so when the marker's group is, `ticket` is too.
  Pending marker{[](WriteContext&) { return Status{}; }, {}, true, nullptr};
  marker.after = [ticket, fn = std::move(fn)] { fn(ticket.get()); };
  std::function<void()> run_now;
  {
    std::lock_guard lock(mu_);
    // Checked again under the lock: the writer fulfils a group before it
    // looks at the queue again, so a ticket still pending now is fulfilled
    // by a writer that will also see the marker.
    if (ticket.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      run_now = std::move(marker.after);
    } else {
      queue_.push_back(std::move(marker));
    }
  }
  if (run_now) {
    run_now();
    return;
  }
  wake_.notify_one();
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

Result<Ticket> Repository::enqueue(WriteFn write, bool bounded) {
  Pending pending{std::move(write), {}, false, nullptr};
  Ticket ticket = pending.done.get_future().share();
  {
    std::lock_guard lock(mu_);
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
  }
  wake_.notify_one();
  return ticket;
}

Result<Ticket> Repository::submit(WriteFn write) { return enqueue(std::move(write), true); }

Result<Ticket> Repository::submit(Changeset changes) {
  auto writes = std::make_shared<std::vector<WriteFn>>(std::move(changes.writes_));
  return enqueue(
      [writes](WriteContext& ctx) -> Status {
        for (auto& w : *writes) {
          if (auto s = w(ctx); !s.ok()) return s;
        }
        return {};
      },
      true);
}

void Repository::flush() {
  // Unbounded: a flush must not fail because the queue is full.
  auto ticket = enqueue([](WriteContext&) { return Status{}; }, false);
  if (ticket.ok()) (void)wait(*ticket);
}

bool Repository::accepting() const {
  std::lock_guard lock(mu_);
  return !stopping_ && queue_.size() < options_.queue_max;
}

WriterStats Repository::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

// ---- the writer thread -----------------------------------------------------

void Repository::writer_loop() {
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
}

void Repository::run_ready(std::vector<Pending>& ready) {
  for (auto& p : ready) p.done.set_value(Status{});
  for (auto& p : ready) {
    if (p.after) p.after();
  }
}

void Repository::apply_group(std::vector<Pending>& group) {
  std::vector<Status> results;
  if (!apply_together(group, results)) {
    // The group's transaction could not begin or commit: nothing of it is
    // in the database. Give every write its own chance.
    results.clear();
    for (auto& p : group) results.push_back(apply_alone(p));
  }
  uint64_t failed = 0;
  for (size_t i = 0; i < group.size(); ++i) {
    if (!results[i].ok()) {
      ++failed;
      log_.error(kLog, "write failed: " + results[i].error().to_string());
    }
  }
  {
    std::lock_guard lock(mu_);
    stats_.writes += group.size();
    stats_.failed_writes += failed;
    stats_.batches += 1;
    stats_.largest_batch = std::max<uint64_t>(stats_.largest_batch, group.size());
  }
  // Fulfil after the stats are updated, so a waiter sees them; then the
  // after_durable() callbacks, which may read any ticket of the group.
  for (size_t i = 0; i < group.size(); ++i) group[i].done.set_value(std::move(results[i]));
  for (auto& p : group) {
    if (p.after) p.after();
  }
}

// One transaction for the whole group, a savepoint per write. Returns false
// when the transaction itself failed (begin or commit); `results` then
// means nothing.
bool Repository::apply_together(std::vector<Pending>& group, std::vector<Status>& results) {
  std::optional<sql::Transaction> tx;
  for (int attempt = 0; attempt < kBeginAttempts && !tx; ++attempt) {
    auto begun = sql::Transaction::begin(write_db_);
    if (begun.ok()) {
      tx.emplace(std::move(begun).value());
    } else {
      log_.warn(kLog, "BEGIN failed: " + begun.error().to_string());
    }
  }
  if (!tx) return false;
  for (auto& p : group) {
    results.push_back(run_in_savepoint(p));
    // SQLite rolled the whole transaction back on its own (disk full, I/O
    // error): nothing of the group is in the database, and running on would
    // commit each later statement by itself. Every write gets its own
    // transaction instead.
    if (!write_db_.in_transaction()) {
      log_.error(kLog, "the group's transaction was rolled back by SQLite (" +
                           results.back().error().to_string() + "); retrying each write alone");
      return false;
    }
  }
  if (auto s = tx->commit(); !s.ok()) {
    log_.error(kLog, "group commit of " + std::to_string(group.size()) +
                         " writes failed: " + s.error().to_string());
    return false;
  }
  return true;
}

Status Repository::run_in_savepoint(Pending& pending) {
  if (pending.marker) return {};
  if (auto s = write_db_.exec("SAVEPOINT w"); !s.ok()) return s;
  Status result = pending.write(write_ctx_);
  if (!write_db_.in_transaction())
    return result.ok() ? fail_unavailable("transaction lost") : result;
  if (!result.ok()) (void)write_db_.exec("ROLLBACK TO w");
  if (auto s = write_db_.exec("RELEASE w"); !s.ok() && result.ok()) return s;
  return result;
}

Status Repository::apply_alone(Pending& pending) {
  if (pending.marker) return {};
  auto tx = sql::Transaction::begin(write_db_);
  if (!tx.ok()) return fail_unavailable("cannot begin: " + tx.error().to_string());
  Status result = pending.write(write_ctx_);
  if (!result.ok()) return result;  // the transaction rolls back
  return tx->commit();
}

}  // namespace vend::agent
