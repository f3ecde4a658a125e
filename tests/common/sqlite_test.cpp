#include "vend/sqlite.hpp"

#include <doctest/doctest.h>

#include <stdexcept>

#include "test_support.hpp"

using namespace vend::sql;

namespace {
const std::vector<Migration> kMigrations = {
    {1, "CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"},
    {2, "ALTER TABLE item ADD COLUMN qty INTEGER NOT NULL DEFAULT 0;"},
};

int64_t count_items(Database& db) {
  auto st = db.prepare("SELECT count(*) FROM item").value();
  REQUIRE(st.step().value());
  return st.column_int64(0);
}
}  // namespace

TEST_CASE("migrations run once, in order, and record user_version") {
  vend::test::TempDir dir;
  {
    auto db = Database::open(dir.file("a.db")).value();
    REQUIRE(db.migrate(kMigrations).ok());
    CHECK(db.user_version().value() == 2);
    REQUIRE(db.exec("INSERT INTO item(name, qty) VALUES ('cola', 3)").ok());
  }
  auto db = Database::open(dir.file("a.db")).value();
  REQUIRE(db.migrate(kMigrations).ok());  // idempotent
  CHECK(count_items(db) == 1);
  auto mode = db.prepare("PRAGMA journal_mode").value();
  REQUIRE(mode.step().value());
  CHECK(mode.column_text(0) == "wal");
}

TEST_CASE("a failing migration rolls back its step and names it") {
  vend::test::TempDir dir;
  auto db = Database::open(dir.file("b.db")).value();
  std::vector<Migration> bad = {kMigrations[0], {2, "ALTER TABLE nope ADD COLUMN x INTEGER;"}};
  auto s = db.migrate(bad);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message.find("migration 2") != std::string::npos);
  CHECK(s.error().message.find("nope") != std::string::npos);
  CHECK(db.user_version().value() == 1);
}

TEST_CASE("a database newer than the code is refused") {
  vend::test::TempDir dir;
  auto db = Database::open(dir.file("c.db")).value();
  REQUIRE(db.exec("PRAGMA user_version=9").ok());
  auto s = db.migrate(kMigrations);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "schema_too_new");
}

TEST_CASE("a transaction rolls back when left without commit, e.g. by an exception") {
  vend::test::TempDir dir;
  auto db = Database::open(dir.file("d.db")).value();
  REQUIRE(db.migrate(kMigrations).ok());
  try {
    auto tx = Transaction::begin(db).value();
    REQUIRE(db.exec("INSERT INTO item(name) VALUES ('water')").ok());
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  CHECK(count_items(db) == 0);
  {
    auto tx = Transaction::begin(db).value();
    REQUIRE(db.exec("INSERT INTO item(name) VALUES ('water')").ok());
    REQUIRE(tx.commit().ok());
  }
  CHECK(count_items(db) == 1);
}

TEST_CASE("errors carry the SQL and SQLite's message") {
  vend::test::TempDir dir;
  auto db = Database::open(dir.file("e.db")).value();
  REQUIRE(db.migrate(kMigrations).ok());
  auto bad = db.prepare("SELEC nonsense");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("SELEC nonsense") != std::string::npos);
  CHECK(bad.error().message.find("syntax error") != std::string::npos);

  auto ins = db.prepare("INSERT INTO item(name) VALUES (?)").value();
  CHECK(ins.bind(1, "tea").run().value() == 1);
  auto dup = ins.bind(1, "tea").run();
  REQUIRE_FALSE(dup.ok());
  CHECK(dup.error().code == "sqlite_constraint");
  CHECK(dup.error().message.find("UNIQUE") != std::string::npos);
}

TEST_CASE("statements bind and read every column type") {
  vend::test::TempDir dir;
  auto db = Database::open(dir.file("f.db")).value();
  REQUIRE(db.exec("CREATE TABLE t(i INTEGER, s TEXT, d REAL, n TEXT)").ok());
  auto ins = db.prepare("INSERT INTO t VALUES (?,?,?,?)").value();
  REQUIRE(ins.bind(1, int64_t{1} << 40)
              .bind(2, std::string("x\0y", 3))
              .bind(3, 2.5)
              .bind_null(4)
              .run()
              .ok());
  auto sel = db.prepare("SELECT i, s, d, n FROM t").value();
  REQUIRE(sel.step().value());
  CHECK(sel.column_int64(0) == (int64_t{1} << 40));
  CHECK(sel.column_text(1) == std::string("x\0y", 3));
  CHECK(sel.column_double(2) == 2.5);
  CHECK(sel.column_is_null(3));
  CHECK_FALSE(sel.step().value());
}

TEST_CASE("a file that is not a database gives a clear error naming the path") {
  vend::test::TempDir dir;
  vend::test::write_file(dir.file("junk.db"), std::string(4096, 'x'));
  auto db = Database::open(dir.file("junk.db"));
  REQUIRE_FALSE(db.ok());
  CHECK(db.error().code == "sqlite_corrupt");
  CHECK(db.error().message.find("junk.db") != std::string::npos);
}

TEST_CASE("SQLite keeps no allocation statistics: no process-wide mutex per allocation") {
  // Database::open configures SQLite before its first initialisation; the
  // statistics are then never counted (sqlite3_memory_used() stays 0).
  vend::test::TempDir dir;
  auto db = Database::open(dir.file("m.db")).value();
  REQUIRE(db.migrate(kMigrations).ok());
  REQUIRE(db.exec("INSERT INTO item(name) VALUES ('water')").ok());
  CHECK(count_items(db) == 1);
  CHECK(sqlite3_memory_used() == 0);
}
