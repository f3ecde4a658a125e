// Opening the PostgreSQL repository: connections, migration, statements.
#include "postgres/postgres_repository.hpp"

#include <utility>

#include "postgres/postgres_backend.hpp"
#include "postgres/postgres_schema.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "repository";

// Session settings of the writer: durable commits whatever the server's
// default, and no statement left hanging for ever.
Status configure_writer(pg::PgConnection& conn, const RepositoryOptions& options, Logger& log) {
  auto s = conn.exec("SET synchronous_commit = on");
  if (!s.ok()) return s.error();
  // A writer paused inside a transaction (SIGSTOP between two round trips
  // of a group) would keep its row locks for ever: the server ends such a
  // session past this timeout, and this writer then finds its connection
  // lost (fail-stop). The fence's lease locks never wait on this process at
  // all (postgres_group.cpp).
  if (options.pg_idle_in_transaction_timeout_ms > 0) {
    auto t = conn.exec("SET idle_in_transaction_session_timeout = " +
                       std::to_string(options.pg_idle_in_transaction_timeout_ms));
    if (!t.ok()) return t.error();
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
  auto write = pg::PgConnection::connect(url, "vend-agent writer");
  if (!write.ok()) return write.error();
  if (auto s = pg::migrate(*write); !s.ok()) return s.error();
  if (auto s = configure_writer(*write, options, log); !s.ok()) return s.error();
  if (auto s = pg::prepare_statements(*write); !s.ok()) return s.error();
  auto read = pg::PgConnection::connect(url, "vend-agent reader");
  if (!read.ok()) return read.error();
  log.info(kLog, "PostgreSQL log at " + pg::redact_url(url));
  auto backend = std::make_unique<pg::PostgresBackend>(std::move(write).value(),
                                                       std::move(read).value(), options, log);
  return std::make_unique<Repository>(std::move(backend), options, log);
}

namespace pg {

PostgresBackend::PostgresBackend(PgConnection write, PgConnection read,
                                 const RepositoryOptions& options, Logger& log)
    : options_(options), log_(log), write_(std::move(write)), read_(std::move(read)) {}

}  // namespace pg

}  // namespace vend::agent
