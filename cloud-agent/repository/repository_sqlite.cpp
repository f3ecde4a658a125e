// Repository: the SQLite backend's opening and group commit.
#include "repository/repository_sqlite.hpp"

#include <optional>
#include <utility>

#include "repository/repository_checkpointer.hpp"
#include "repository/repository_schema.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "repository";
constexpr int kBeginAttempts = 3;  // BEGIN IMMEDIATE retries (each waits busy_timeout_ms)

Status fail_unavailable(const std::string& why) { return make_error("unavailable", why); }

}  // namespace

Result<std::unique_ptr<RepositoryBackend>> Repository::open_sqlite_backend(
    const std::string& path, const RepositoryOptions& options, Logger& log) {
  sql::OpenOptions open_options;
  open_options.synchronous = options.synchronous;
  open_options.busy_timeout_ms = options.busy_timeout_ms;
  open_options.private_file = true;  // every device's key
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
  // Each write of a group runs in a savepoint, whose journal (the original
  // of every page it touches) SQLite keeps in memory only up to 64 KiB and
  // then in a temporary file for the connection's life: two pwrite() calls
  // per page, about 30 per paid order (benchmark 3). In memory it is dropped
  // at each RELEASE, and it never needed to survive a crash.
  if (auto s = write_db->exec("PRAGMA temp_store=MEMORY"); !s.ok()) return s.error();
  // With a writer thread, WAL checkpoints run on a thread of their own
  // (repository_checkpointer.hpp); manual_commit keeps SQLite's own, so the
  // deterministic simulation starts no thread.
  std::unique_ptr<detail::SqliteCheckpointer> checkpointer;
  if (!options.manual_commit) {
    auto started = detail::SqliteCheckpointer::start(path, open_options, {}, log);
    if (!started.ok()) return started.error();
    checkpointer = std::move(started).value();
  }
  return std::unique_ptr<RepositoryBackend>(std::make_unique<detail::SqliteBackend>(
      std::move(write_db).value(), std::move(read_db).value(), std::move(checkpointer), options,
      log));
}

Result<std::unique_ptr<Repository>> Repository::open(const std::string& path,
                                                     const RepositoryOptions& options,
                                                     Logger& log) {
  auto backend = open_sqlite_backend(path, options, log);
  if (!backend.ok()) return backend.error();
  return std::make_unique<Repository>(std::move(backend).value(), options, log);
}

namespace detail {

Result<sql::Statement*> SqliteWriter::statement(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    auto stmt = db_.prepare(sql);
    if (!stmt.ok()) return stmt.error();
    it = cache_.emplace(sql, std::make_unique<sql::Statement>(std::move(stmt).value())).first;
  }
  it->second->reset();
  return it->second.get();
}

SqliteBackend::SqliteBackend(sql::Database write_db, sql::Database read_db,
                             std::unique_ptr<SqliteCheckpointer> checkpointer,
                             const RepositoryOptions& options, Logger& log)
    : options_(options),
      log_(log),
      checkpointer_(std::move(checkpointer)),
      writer_(std::move(write_db), options_),
      read_db_(std::move(read_db)) {
  if (checkpointer_) checkpointer_->attach(writer_.db());
}

SqliteBackend::~SqliteBackend() {
  if (checkpointer_) checkpointer_->detach(writer_.db());
}

std::vector<Status> SqliteBackend::apply_group(const std::vector<const Changeset*>& group) {
  std::vector<Status> results;
  if (!apply_together(group, results)) {
    // The group's transaction could not begin or commit: nothing of it is
    // in the database. Give every write its own chance.
    results.clear();
    for (const Changeset* c : group) results.push_back(apply_alone(*c));
  }
  return results;
}

// One transaction for the whole group, a savepoint per write. Returns false
// when the transaction itself failed (begin or commit); `results` then
// means nothing.
bool SqliteBackend::apply_together(const std::vector<const Changeset*>& group,
                                   std::vector<Status>& results) {
  sql::Database& db = writer_.db();
  // Between two groups, outside a transaction: the WAL is started over once
  // it is checkpointed whole (repository_checkpointer.hpp).
  if (checkpointer_ && checkpointer_->finish_due()) checkpointer_->finish_on(db);
  std::optional<sql::Transaction> tx;
  for (int attempt = 0; attempt < kBeginAttempts && !tx; ++attempt) {
    auto begun = sql::Transaction::begin(db);
    if (begun.ok()) {
      tx.emplace(std::move(begun).value());
    } else {
      log_.warn(kLog, "BEGIN failed: " + begun.error().to_string());
    }
  }
  if (!tx) return false;
  for (const Changeset* c : group) {
    results.push_back(run_in_savepoint(*c));
    // SQLite rolled the whole transaction back on its own (disk full, I/O
    // error): nothing of the group is in the database, and running on would
    // commit each later statement by itself. Every write gets its own
    // transaction instead.
    if (!db.in_transaction()) {
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

Status SqliteBackend::apply_changes(const Changeset& changes) {
  for (const Change& change : changes.changes()) {
    if (auto s = apply_change(writer_, change); !s.ok()) return s;
  }
  return {};
}

// SAVEPOINT and RELEASE run twice per write: prepared once (sqlite3_exec
// would parse them every time).
Status SqliteBackend::run_savepoint_statement(const std::string& sql) {
  auto stmt = writer_.statement(sql);
  if (!stmt.ok()) return stmt.error();
  auto ran = (*stmt)->run();
  if (!ran.ok()) return ran.error();
  return {};
}

Status SqliteBackend::run_in_savepoint(const Changeset& changes) {
  static const std::string kSavepoint = "SAVEPOINT w", kRelease = "RELEASE w";
  sql::Database& db = writer_.db();
  if (auto s = run_savepoint_statement(kSavepoint); !s.ok()) return s;
  Status result = apply_changes(changes);
  if (!db.in_transaction()) return result.ok() ? fail_unavailable("transaction lost") : result;
  if (!result.ok()) (void)db.exec("ROLLBACK TO w");
  if (auto s = run_savepoint_statement(kRelease); !s.ok() && result.ok()) return s;
  return result;
}

Status SqliteBackend::apply_alone(const Changeset& changes) {
  auto tx = sql::Transaction::begin(writer_.db());
  if (!tx.ok()) return fail_unavailable("cannot begin: " + tx.error().to_string());
  Status result = apply_changes(changes);
  if (!result.ok()) return result;  // the transaction rolls back
  return tx->commit();
}

}  // namespace detail

}  // namespace vend::agent
