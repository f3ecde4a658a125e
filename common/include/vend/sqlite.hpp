// SQLite adapter: RAII database, statement and transaction; WAL; busy
// timeout; user_version migrations. Errors carry the SQL and SQLite's message.
// A Database is not thread-safe: one owner thread (SQLite is built
// serialized, but our statements are cached per Database).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vend/result.hpp"

namespace vend::sql {

enum class Sync { kOff, kNormal, kFull };

struct OpenOptions {
  bool wal = true;
  Sync synchronous = Sync::kFull;
  int busy_timeout_ms = 5000;
  bool create = true;
  // With wal and kFull: a transaction's WAL writes reach the file in writes
  // of up to 124 KiB at its commit's sync, not two per page (sqlite_wal_buffer.hpp).
  // Ignored otherwise. false: the default VFS, as before the buffer.
  bool buffer_wal_writes = true;
  // The database holds secrets (the agent's: every device's key): a file
  // that does not exist yet is created mode 0600 whatever the umask, and
  // SQLite gives its -wal and -shm files the same mode. An existing file
  // keeps its mode.
  bool private_file = false;
};

class Database;

// A prepared statement. Non-copyable, movable. Bind indexes start at 1.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Statement& bind(int index, int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  Statement& bind(int index, std::string_view value);
  Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  Statement& bind(int index, const std::string& value) {
    return bind(index, std::string_view(value));
  }
  Statement& bind(int index, double value);
  Statement& bind_null(int index);

  // Advances: true with a row, false when done, Error otherwise.
  Result<bool> step();
  // Steps to completion (INSERT/UPDATE/DELETE). Returns changes().
  Result<int> run();
  // Resets for reuse and clears bindings.
  void reset();

  int64_t column_int64(int col) const;
  int column_int(int col) const { return static_cast<int>(column_int64(col)); }
  double column_double(int col) const;
  std::string column_text(int col) const;
  bool column_is_null(int col) const;

  const std::string& sql() const { return sql_; }

 private:
  friend class Database;
  Statement(Database* db, sqlite3_stmt* stmt, std::string sql);
  Error error_here(int rc) const;

  Database* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

// One schema step: migration N takes user_version from N-1 to N, in one
// transaction: `sql`, then `apply` (if set) for what SQL text alone cannot
// say.
struct Migration {
  int version;
  std::string sql;  // may hold several statements
  std::function<Status(Database&)> apply = nullptr;
};

// An open database. Non-copyable, movable.
class Database {
 public:
  static Result<Database> open(const std::string& path, const OpenOptions& options = {});
  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  // Runs one or more statements without results.
  Status exec(std::string_view sql);
  Result<Statement> prepare(std::string_view sql);

  // Applies every migration above the current user_version, each in its own
  // transaction together with the user_version bump. Fails (and rolls back
  // that step) on the first error; refuses a database newer than the code.
  Status migrate(const std::vector<Migration>& migrations);
  Result<int> user_version();

  // False in autocommit mode: no transaction is open. After SQLITE_FULL,
  // IOERR, BUSY or NOMEM inside a transaction, SQLite may have rolled the
  // whole transaction back on its own; this tells.
  bool in_transaction() const;
  int64_t last_insert_rowid() const;
  int changes() const;
  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_ = nullptr;
  std::string path_;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless commit()
// succeeded — so an exception or early return leaves nothing half-written.
class Transaction {
 public:
  static Result<Transaction> begin(Database& db);
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  Status commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_ = nullptr;
  bool done_ = false;
};

// Error codes: "sqlite_busy" for SQLITE_BUSY/LOCKED, "sqlite_constraint",
// "sqlite_corrupt" (also SQLITE_NOTADB), "sqlite_full", "sqlite_error" otherwise.
Error make_sqlite_error(sqlite3* db, int rc, std::string_view sql);

}  // namespace vend::sql
