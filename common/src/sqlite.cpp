#include "vend/sqlite.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "sqlite_wal_buffer.hpp"

namespace vend::sql {

Error make_sqlite_error(sqlite3* db, int rc, std::string_view sql) {
  int primary = rc & 0xff;
  std::string code = "sqlite_error";
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) code = "sqlite_busy";
  if (primary == SQLITE_CONSTRAINT) code = "sqlite_constraint";
  if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) code = "sqlite_corrupt";
  if (primary == SQLITE_FULL) code = "sqlite_full";
  std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  message += " (rc=" + std::to_string(rc) + ")";
  if (!sql.empty()) message += " in: " + std::string(sql.substr(0, 200));
  return Error{code, message};
}

// ---- Statement ----------------------------------------------------------

Statement::Statement(Database* db, sqlite3_stmt* stmt, std::string sql)
    : db_(db), stmt_(stmt), sql_(std::move(sql)) {}

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)),
      sql_(std::move(other.sql_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    sql_ = std::move(other.sql_);
  }
  return *this;
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}

Statement& Statement::bind_null(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

Error Statement::error_here(int rc) const {
  return make_sqlite_error(db_ != nullptr ? db_->handle() : nullptr, rc, sql_);
}

Result<bool> Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Error err = error_here(rc);
  sqlite3_reset(stmt_);
  return err;
}

Result<int> Statement::run() {
  while (true) {
    auto r = step();
    if (!r.ok()) return r.error();
    if (!*r) break;
  }
  int changes = sqlite3_changes(db_->handle());
  reset();
  return changes;
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::column_int64(int col) const { return sqlite3_column_int64(stmt_, col); }
double Statement::column_double(int col) const { return sqlite3_column_double(stmt_, col); }

std::string Statement::column_text(int col) const {
  const auto* text = sqlite3_column_text(stmt_, col);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

bool Statement::column_is_null(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}

// ---- Database -----------------------------------------------------------

namespace {
const char* sync_pragma(Sync s) {
  switch (s) {
    case Sync::kOff: return "PRAGMA synchronous=OFF";
    case Sync::kNormal: return "PRAGMA synchronous=NORMAL";
    case Sync::kFull: return "PRAGMA synchronous=FULL";
  }
  return "PRAGMA synchronous=FULL";
}
}  // namespace

namespace {
// Creates `path` empty with mode 0600 when it does not exist (SQLite takes
// an empty file as an empty database). Errors: "io_error" naming the path.
Status create_private(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) return {};
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return {};
    return make_error("io_error", "cannot create database '" + path + "': " + std::strerror(errno));
  }
  ::close(fd);
  return {};
}
}  // namespace

Result<Database> Database::open(const std::string& path, const OpenOptions& options) {
  // Before SQLite initialises (the first open): no allocation statistics.
  // With them on (the library's default), every sqlite3_malloc and
  // sqlite3_free takes a process-wide mutex, which was 4 % of the agent's
  // writer thread; nothing here reads them. SQLITE_MISUSE when SQLite was
  // already initialised (a test that opened it directly first): harmless.
  [[maybe_unused]] static const int kMemstatusOff = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  sqlite3* handle = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (options.create) flags |= SQLITE_OPEN_CREATE;
  if (options.create && options.private_file) {
    if (Status s = create_private(path); !s.ok()) return s.error();
  }
  bool buffered = options.buffer_wal_writes && options.wal && options.synchronous == Sync::kFull;
  const char* vfs = buffered ? detail::wal_buffer_vfs_name() : nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &handle, flags, vfs);
  if (rc != SQLITE_OK) {
    Error err = make_sqlite_error(handle, rc, "");
    sqlite3_close_v2(handle);
    return Error{err.code, "cannot open database '" + path + "': " + err.message};
  }
  sqlite3_extended_result_codes(handle, 1);
  Database db(handle, path);
  sqlite3_busy_timeout(handle, options.busy_timeout_ms);
  // Reading the schema first turns "file is not a database" into an error
  // here, with the path, rather than at the first query.
  if (auto s = db.exec("SELECT count(*) FROM sqlite_master"); !s.ok()) {
    return Error{s.error().code, "database '" + path + "': " + s.error().message};
  }
  if (options.wal) {
    if (auto s = db.exec("PRAGMA journal_mode=WAL"); !s.ok()) return s.error();
  }
  if (auto s = db.exec(sync_pragma(options.synchronous)); !s.ok()) return s.error();
  if (auto s = db.exec("PRAGMA foreign_keys=ON"); !s.ok()) return s.error();
  return db;
}

Database::Database(Database&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

Database::~Database() { sqlite3_close_v2(db_); }

Status Database::exec(std::string_view sql) {
  std::string text(sql);
  char* msg = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &msg);
  if (rc != SQLITE_OK) {
    Error err = make_sqlite_error(db_, rc, sql);
    sqlite3_free(msg);
    return err;
  }
  return {};
}

Result<Statement> Database::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return make_sqlite_error(db_, rc, sql);
  return Statement(this, stmt, std::string(sql));
}

Result<int> Database::user_version() {
  auto stmt = prepare("PRAGMA user_version");
  if (!stmt.ok()) return stmt.error();
  auto row = stmt->step();
  if (!row.ok()) return row.error();
  return stmt->column_int(0);
}

Status Database::migrate(const std::vector<Migration>& migrations) {
  auto current = user_version();
  if (!current.ok()) return current.error();
  int latest = migrations.empty() ? 0 : migrations.back().version;
  if (*current > latest) {
    return make_error("schema_too_new", "database '" + path_ + "' has schema version " +
                                            std::to_string(*current) + " but this build knows " +
                                            std::to_string(latest));
  }
  for (const auto& m : migrations) {
    if (m.version <= *current) continue;
    auto tx = Transaction::begin(*this);
    if (!tx.ok()) return tx.error();
    Status s = exec(m.sql);
    if (s.ok() && m.apply) s = m.apply(*this);
    if (!s.ok()) {
      return Error{s.error().code,
                   "migration " + std::to_string(m.version) + " failed: " + s.error().message};
    }
    if (auto s = exec("PRAGMA user_version=" + std::to_string(m.version)); !s.ok()) return s;
    if (auto s = tx->commit(); !s.ok()) return s;
  }
  return {};
}

bool Database::in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }

int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
int Database::changes() const { return sqlite3_changes(db_); }

// ---- Transaction --------------------------------------------------------

Result<Transaction> Transaction::begin(Database& db) {
  if (auto s = db.exec("BEGIN IMMEDIATE"); !s.ok()) return s.error();
  return Transaction(&db);
}

Transaction::Transaction(Transaction&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), done_(std::exchange(other.done_, true)) {}

Transaction::~Transaction() {
  if (db_ != nullptr && !done_) {
    (void)db_->exec("ROLLBACK");
  }
}

Status Transaction::commit() {
  if (done_) return make_error("sqlite_error", "transaction already finished");
  auto s = db_->exec("COMMIT");
  if (s.ok()) done_ = true;
  return s;
}

}  // namespace vend::sql
