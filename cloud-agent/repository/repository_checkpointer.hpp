// Private to the repository: checkpoints of the SQLite write-ahead log, off
// the writer thread (docs/design-decisions.md, "WAL checkpoints off the
// writer"). Non-copyable.
//
// SQLite's own auto-checkpoint runs on the connection that commits, inside
// the COMMIT that every order in the group waits for: every ~1,000 pages it
// copies the WAL into the database file and syncs both. Here the writer's
// connection only reports the WAL's size after each commit (a WAL hook,
// which also turns the auto-checkpoint off), and a thread of its own, on a
// connection of its own, runs a PASSIVE checkpoint each time the WAL has
// grown by `passive_pages`: it copies what is committed without blocking
// the writer or the readers.
//
// Under steady load that alone lets the WAL grow forever: SQLite starts the
// WAL over only when a write transaction begins with all of it copied, and
// the writer begins its next group right after each commit, before a
// checkpoint on another thread can copy that commit's pages. So once the WAL
// passes `restart_pages`, the writer finishes the job itself between two
// groups (finish_due / finish_on): a PASSIVE checkpoint on its own
// connection, outside any transaction, copies the little the thread left,
// and its next transaction starts the WAL over. (A RESTART checkpoint from
// the thread would have to catch the writer lock free between two groups by
// polling, and starves under load.) Past restart_pages the thread starts no
// checkpoint: one under way would make the writer's fail and keep the WAL
// from starting over. The writer pays that short copy once
// every restart_pages / pages-per-commit commits instead of a whole
// checkpoint every passive_pages.
//
// Checkpoints do not change what is durable: a commit is durable when its
// WAL frames are synced (synchronous=FULL); a crash mid-checkpoint is
// recovered by SQLite from the WAL.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "vend/log.hpp"
#include "vend/result.hpp"
#include "vend/sqlite.hpp"

namespace vend::agent::detail {

struct CheckpointLimits {
  int64_t passive_pages = 1000;  // SQLite's default auto-checkpoint size
  int64_t restart_pages = 8000;  // 32 MiB of 4 KiB pages
};

class SqliteCheckpointer {
 public:
  // Opens the checkpointer's own connection to `path` (WAL, `options`'
  // synchronous and busy timeout) and starts its thread.
  static Result<std::unique_ptr<SqliteCheckpointer>> start(const std::string& path,
                                                           const sql::OpenOptions& options,
                                                           CheckpointLimits limits, Logger& log);
  SqliteCheckpointer(const SqliteCheckpointer&) = delete;
  SqliteCheckpointer& operator=(const SqliteCheckpointer&) = delete;
  // Stops the thread (a checkpoint under way finishes first).
  ~SqliteCheckpointer();

  // Makes `writer`'s commits report the WAL's size here instead of running
  // SQLite's auto-checkpoint. REQUIRES: called once, before the writer's
  // first commit; `writer` outlives this object or is detached first.
  void attach(sql::Database& writer);
  // Restores SQLite's auto-checkpoint on `writer`.
  void detach(sql::Database& writer);

  // True when the WAL has passed restart_pages: the writer should call
  // finish_on() before its next transaction. Writer thread.
  bool finish_due() const;
  // A PASSIVE checkpoint on `writer` (outside a transaction). When it copies
  // the whole WAL, the writer's next transaction starts the WAL over. Fails
  // quietly (tried again before the next group) while the thread is
  // checkpointing or a reader holds an old snapshot. Writer thread.
  void finish_on(sql::Database& writer);

  struct Counts {
    int64_t passive = 0;   // PASSIVE checkpoints by the thread
    int64_t finished = 0;  // checkpoints by the writer that copied the whole WAL
    int64_t deferred = 0;  // ... that could not (busy, or a reader behind)
  };
  Counts counts() const;

  // Private, for make_unique in start().
  SqliteCheckpointer(sql::Database db, CheckpointLimits limits, Logger& log);

 private:
  static int on_commit(void* self, sqlite3* db, const char* schema, int wal_pages);
  void run();
  bool passive_due() const;  // REQUIRES: mu_ held

  sql::Database db_;  // the checkpointer thread's connection
  CheckpointLimits limits_;
  Logger& log_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  int64_t wal_pages_ = 0;     // as the last commit reported it
  int64_t copied_pages_ = 0;  // the WAL's size at the thread's last checkpoint
  bool stopping_ = false;
  Counts counts_;

  std::thread thread_;  // last: started once the rest is built
};

}  // namespace vend::agent::detail
