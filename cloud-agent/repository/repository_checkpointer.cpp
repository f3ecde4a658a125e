// The SQLite backend's WAL checkpoints, off the writer thread.
#include "repository/repository_checkpointer.hpp"

#include <algorithm>
#include <utility>

#include "vend/thread_name.hpp"

namespace vend::agent::detail {

namespace {

constexpr const char* kLog = "repository";

struct Checkpointed {
  int rc = SQLITE_OK;
  int64_t wal_pages = 0;  // frames in the WAL
  int64_t copied = 0;     // of them, in the database file now
};

Checkpointed passive_checkpoint(sql::Database& db) {
  int log = 0, copied = 0;
  int rc =
      sqlite3_wal_checkpoint_v2(db.handle(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
  return {rc, log, copied};
}

}  // namespace

Result<std::unique_ptr<SqliteCheckpointer>> SqliteCheckpointer::start(
    const std::string& path, const sql::OpenOptions& options, CheckpointLimits limits,
    Logger& log) {
  auto db = sql::Database::open(path, options);
  if (!db.ok()) return db.error();
  return std::make_unique<SqliteCheckpointer>(std::move(db).value(), limits, log);
}

SqliteCheckpointer::SqliteCheckpointer(sql::Database db, CheckpointLimits limits, Logger& log)
    : db_(std::move(db)), limits_(limits), log_(log), thread_([this] { run(); }) {}

SqliteCheckpointer::~SqliteCheckpointer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void SqliteCheckpointer::attach(sql::Database& writer) {
  sqlite3_wal_hook(writer.handle(), &SqliteCheckpointer::on_commit, this);
}

void SqliteCheckpointer::detach(sql::Database& writer) {
  sqlite3_wal_autocheckpoint(writer.handle(), static_cast<int>(limits_.passive_pages));
}

// Runs on the writer thread at the end of every COMMIT: as cheap as a lock.
int SqliteCheckpointer::on_commit(void* self, sqlite3* /*db*/, const char* /*schema*/,
                                  int wal_pages) {
  auto* me = static_cast<SqliteCheckpointer*>(self);
  bool due = false;
  {
    std::lock_guard lock(me->mu_);
    // A WAL smaller than at the last checkpoint was started over.
    if (wal_pages < me->copied_pages_) me->copied_pages_ = 0;
    me->wal_pages_ = wal_pages;
    due = me->passive_due();
  }
  if (due) me->wake_.notify_one();
  return SQLITE_OK;
}

// Past restart_pages the writer checkpoints (finish_on): one here then would
// only make the writer's fail, or keep the WAL from starting over.
bool SqliteCheckpointer::passive_due() const {
  return wal_pages_ - copied_pages_ >= limits_.passive_pages && wal_pages_ < limits_.restart_pages;
}

void SqliteCheckpointer::run() {
  name_this_thread("vend-checkpoint");
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || passive_due(); });
    if (stopping_) return;
    lock.unlock();
    Checkpointed done = passive_checkpoint(db_);
    lock.lock();
    if (done.rc != SQLITE_OK && done.rc != SQLITE_BUSY) {
      log_.warn(kLog, "WAL checkpoint failed: " +
                          sql::make_sqlite_error(db_.handle(), done.rc, "").to_string());
    }
    ++counts_.passive;
    // What the WAL held when this checkpoint began: the next one is due
    // once the writer has added passive_pages more.
    copied_pages_ = std::max<int64_t>(done.wal_pages, copied_pages_ + 1);
  }
}

bool SqliteCheckpointer::finish_due() const {
  std::lock_guard lock(mu_);
  return wal_pages_ >= limits_.restart_pages;
}

void SqliteCheckpointer::finish_on(sql::Database& writer) {
  Checkpointed done = passive_checkpoint(writer);
  bool whole = done.rc == SQLITE_OK && done.copied == done.wal_pages;
  // wal_pages_ stays: the next commit reports the WAL started over, or (a
  // checkpoint or reader held a read lock when the writer began) not yet,
  // and then this runs again before the group after it.
  std::lock_guard lock(mu_);
  ++(whole ? counts_.finished : counts_.deferred);
}

SqliteCheckpointer::Counts SqliteCheckpointer::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

}  // namespace vend::agent::detail
