// The WAL write buffer (common/src/sqlite_wal_buffer.hpp): what SQLite wrote
// is on disk and visible to other connections once COMMIT returns, whatever
// the transaction's size, across checkpoints and rollbacks, and after a
// kill -9 at any moment.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "test_support.hpp"
#include "vend/sqlite.hpp"

using namespace vend::sql;

namespace {

const std::vector<Migration> kSchema = {
    {1,
     "CREATE TABLE item(id INTEGER PRIMARY KEY, body BLOB NOT NULL);"
     "CREATE INDEX item_body ON item(body);"},
};

Database open_db(const std::string& path, Sync sync = Sync::kFull) {
  OpenOptions options;
  options.synchronous = sync;
  auto db = Database::open(path, options);
  REQUIRE(db.ok());
  return std::move(db).value();
}

std::string vfs_of(Database& db) {
  sqlite3_vfs* vfs = nullptr;
  REQUIRE(sqlite3_file_control(db.handle(), "main", SQLITE_FCNTL_VFS_POINTER, &vfs) == SQLITE_OK);
  return vfs->zName;
}

// Rows [first, first + n) with random `bytes`-byte bodies, so each lands on
// its own place in the index.
vend::Status insert_rows(Database& db, int64_t first, int n, int bytes) {
  auto st = db.prepare("INSERT INTO item(id, body) VALUES (?, randomblob(?))");
  if (!st.ok()) return st.error();
  for (int64_t id = first; id < first + n; ++id) {
    st->bind(1, id).bind(2, bytes);
    if (auto r = st->run(); !r.ok()) return r.error();
  }
  return {};
}

int64_t scalar(Database& db, const std::string& sql) {
  auto st = db.prepare(sql);
  REQUIRE(st.ok());
  REQUIRE(st->step().value());
  return st->column_int64(0);
}

std::string integrity(Database& db) {
  auto st = db.prepare("PRAGMA integrity_check");
  REQUIRE(st.ok());
  REQUIRE(st->step().value());
  return st->column_text(0);
}

}  // namespace

TEST_CASE("WAL databases at synchronous=FULL use the WAL buffer; NORMAL does not") {
  vend::test::TempDir dir;
  auto full = open_db(dir.file("full.db"));
  CHECK(vfs_of(full) == "vend-wal-buffer");
  auto normal = open_db(dir.file("normal.db"), Sync::kNormal);
  CHECK(vfs_of(normal) != "vend-wal-buffer");
  OpenOptions off;
  off.buffer_wal_writes = false;
  auto unbuffered = Database::open(dir.file("off.db"), off).value();
  CHECK(vfs_of(unbuffered) != "vend-wal-buffer");
}

TEST_CASE("a transaction of several MiB commits whole: the buffer's pieces and its size limit") {
  vend::test::TempDir dir;
  auto db = open_db(dir.file("a.db"));
  REQUIRE(db.migrate(kSchema).ok());
  auto tx = Transaction::begin(db).value();
  REQUIRE(insert_rows(db, 1, 3000, 2000).ok());  // ~12 MiB of WAL: table and index pages
  REQUIRE(tx.commit().ok());
  auto reader = open_db(dir.file("a.db"));
  CHECK(scalar(reader, "SELECT count(*) FROM item") == 3000);
  CHECK(scalar(reader, "SELECT sum(length(body)) FROM item") == 3000 * 2000);
  CHECK(integrity(reader) == "ok");
}

TEST_CASE("another connection sees each commit when COMMIT returns, across checkpoints") {
  vend::test::TempDir dir;
  auto writer = open_db(dir.file("a.db"));
  REQUIRE(writer.migrate(kSchema).ok());
  auto reader = open_db(dir.file("a.db"));
  for (int64_t round = 0; round < 200; ++round) {
    auto tx = Transaction::begin(writer).value();
    REQUIRE(insert_rows(writer, round * 10, 10, 600).ok());
    REQUIRE(tx.commit().ok());
    REQUIRE(scalar(reader, "SELECT max(id) FROM item") == round * 10 + 9);
    // The agent checkpoints from a connection of its own, and starts the
    // WAL over when it is checkpointed whole.
    if (round % 37 == 36) REQUIRE(reader.exec("PRAGMA wal_checkpoint(TRUNCATE)").ok());
  }
  CHECK(scalar(reader, "SELECT count(*) FROM item") == 2000);
  CHECK(integrity(reader) == "ok");
}

TEST_CASE("a rolled-back transaction that spilled to the WAL leaves nothing behind") {
  vend::test::TempDir dir;
  {
    auto db = open_db(dir.file("a.db"));
    REQUIRE(db.migrate(kSchema).ok());
    REQUIRE(db.exec("PRAGMA cache_size=10").ok());  // spills frames mid-transaction
    auto other = open_db(dir.file("a.db"));
    for (int round = 0; round < 3; ++round) {
      {
        auto doomed = Transaction::begin(db).value();
        REQUIRE(insert_rows(db, 100000 + round * 1000, 400, 1500).ok());
      }  // rolled back
      REQUIRE(other.exec("PRAGMA wal_checkpoint(TRUNCATE)").ok());
      auto tx = Transaction::begin(db).value();
      REQUIRE(insert_rows(db, round * 100, 100, 300).ok());
      REQUIRE(tx.commit().ok());
      CHECK(scalar(other, "SELECT count(*) FROM item") == (round + 1) * 100);
    }
  }
  auto db = open_db(dir.file("a.db"));
  CHECK(scalar(db, "SELECT count(*) FROM item") == 300);
  CHECK(scalar(db, "SELECT count(*) FROM item WHERE id >= 100000") == 0);
  CHECK(integrity(db) == "ok");
}

// A child commits transaction after transaction and reports each one once
// COMMIT has returned; the parent kills it with SIGKILL at a different moment
// each time. Every reported commit must be in the database after.
TEST_CASE("kill -9 at any moment loses no commit that COMMIT reported") {
  vend::test::TempDir dir;
  const std::string path = dir.file("a.db");
  { REQUIRE(open_db(path).migrate(kSchema).ok()); }
  int64_t next = 0;
  for (int kill_after : {1, 7, 30, 55, 90}) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      close(fds[0]);
      OpenOptions options;
      auto db = Database::open(path, options);
      if (!db.ok()) _exit(2);
      for (int64_t id = next;; id += 8) {
        auto tx = Transaction::begin(*db);
        if (!tx.ok() || !insert_rows(*db, id, 8, 900).ok() || !tx->commit().ok()) _exit(3);
        if (write(fds[1], &id, sizeof id) != sizeof id) _exit(4);
      }
    }
    close(fds[1]);
    int64_t reported = -1;
    for (int i = 0; i < kill_after; ++i) REQUIRE(read(fds[0], &reported, sizeof reported) == 8);
    usleep(static_cast<useconds_t>(kill_after * 37 % 500));  // somewhere inside the next ones
    REQUIRE(kill(child, SIGKILL) == 0);
    while (read(fds[0], &reported, sizeof reported) == 8) {
    }  // what it reported before it died
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFSIGNALED(status));
    close(fds[0]);
    auto db = open_db(path);
    INFO("killed after " << kill_after << " reports; last reported rows " << reported << "..");
    CHECK(scalar(db, "SELECT count(*) FROM item WHERE id BETWEEN " + std::to_string(reported) +
                         " AND " + std::to_string(reported + 7)) == 8);
    CHECK(integrity(db) == "ok");
    next = scalar(db, "SELECT max(id) FROM item") + 1;
  }
}
