// Opening the PostgreSQL repository: connections, migration, statements.
#include "postgres/postgres_repository.hpp"

#include <utility>

#include "postgres/postgres_backend.hpp"
#include "postgres/postgres_schema.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "repository";

// A session setting of the writer, in milliseconds; 0: the server's default.
Status set_ms(pg::PgConnection& conn, const char* name, int64_t ms) {
  if (ms <= 0) return {};
  auto r = conn.exec(std::string("SET ") + name + " = " + std::to_string(ms));
  if (!r.ok()) return r.error();
  return {};
}

// Session settings of the writer: durable commits whatever the server's
// default, and no statement or lock wait left hanging for ever.
Status configure_writer(pg::PgConnection& conn, const RepositoryOptions& options, Logger& log) {
  auto s = conn.exec("SET synchronous_commit = on");
  if (!s.ok()) return s.error();
  // A writer paused inside a transaction (SIGSTOP between two round trips
  // of a group) would keep its row locks for ever: the server ends such a
  // session past this timeout, and this writer then finds its connection
  // lost. The fence's lease locks never wait on this process at all
  // (postgres_group.cpp). lock_timeout bounds the other side: a writer
  // waiting for rows a paused agent still holds.
  if (auto t = set_ms(conn, "idle_in_transaction_session_timeout",
                      options.pg_idle_in_transaction_timeout_ms);
      !t.ok()) {
    return t;
  }
  if (auto t = set_ms(conn, "lock_timeout", options.pg_lock_timeout_ms); !t.ok()) return t;
  if (auto t = set_ms(conn, "statement_timeout", options.pg_statement_timeout_ms); !t.ok()) {
    return t;
  }
  auto fsync = conn.exec("SHOW fsync");
  if (fsync.ok() && fsync->rows() == 1 && fsync->text(0, 0) != "on") {
    log.warn(kLog, "the PostgreSQL server runs with fsync = " + fsync->text(0, 0) +
                       ": commits are not durable through a power loss");
  }
  return {};
}

}  // namespace

bool is_postgres_url(std::string_view db) {
  return db.rfind("postgresql://", 0) == 0 || db.rfind("postgres://", 0) == 0;
}

Result<std::unique_ptr<Repository>> open_postgres_repository(const std::string& url,
                                                             const RepositoryOptions& options,
                                                             Logger& log) {
  auto write = pg::open_writer(url, options, log, true);
  if (!write.ok()) return write.error();
  auto read = pg::PgConnection::connect(url, "vend-agent reader");
  if (!read.ok()) return read.error();
  log.info(kLog, "PostgreSQL log at " + pg::redact_url(url));
  auto backend = std::make_unique<pg::PostgresBackend>(url, std::move(write).value(),
                                                       std::move(read).value(), options, log);
  return std::make_unique<Repository>(std::move(backend), options, log);
}

namespace pg {

Result<PgConnection> open_writer(const std::string& url, const RepositoryOptions& options,
                                 Logger& log, bool migrate_schema) {
  auto write = PgConnection::connect(url, "vend-agent writer");
  if (!write.ok()) return write.error();
  if (migrate_schema) {
    if (auto s = migrate(*write); !s.ok()) return s.error();
  }
  if (auto s = configure_writer(*write, options, log); !s.ok()) return s.error();
  if (auto s = prepare_statements(*write); !s.ok()) return s.error();
  return write;
}

PostgresBackend::PostgresBackend(std::string url, PgConnection write, PgConnection read,
                                 const RepositoryOptions& options, Logger& log)
    : url_(std::move(url)),
      options_(options),
      log_(log),
      write_(std::move(write)),
      read_(std::move(read)) {}

Status PostgresBackend::reconnect() {
  if (!write_lost_ && write_.ok()) return {};
  auto write = open_writer(url_, options_, log_, false);
  if (!write.ok()) return write.error();
  write_ = std::move(write).value();
  write_lost_ = false;
  log_.warn(kLog, "the writer is connected to PostgreSQL again");
  return {};
}

}  // namespace pg

}  // namespace vend::agent
