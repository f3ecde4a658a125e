// Private to vend_agent_postgres: RAII over libpq's connection and result,
// and the mapping of PostgreSQL errors to vend error codes.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vend/result.hpp"

namespace vend::agent::pg {

// Parameters in text format; nullopt is SQL NULL.
using Params = std::vector<std::optional<std::string>>;

// One PGresult. Non-copyable, movable. NULL columns read as "" and 0.
class PgResult {
 public:
  explicit PgResult(PGresult* r) : r_(r) {}
  PGresult* get() const { return r_.get(); }
  ExecStatusType status() const { return PQresultStatus(r_.get()); }
  int rows() const { return PQntuples(r_.get()); }
  std::string text(int row, int col) const;
  int64_t int64(int row, int col) const;
  int int32(int row, int col) const { return static_cast<int>(int64(row, col)); }

 private:
  struct Clear {
    void operator()(PGresult* r) const { PQclear(r); }
  };
  std::unique_ptr<PGresult, Clear> r_;
};

// A failed result as an Error: SQLSTATE VD001 (vend_expect_one()) is
// "conflict", VD002 (vend_fence()) "fenced", class 23 "pg_constraint", a broken connection
// "unavailable", anything else "pg_error". The message names `what` and PostgreSQL's text.
Error result_error(PGconn* conn, const PGresult* r, std::string_view what);

// The URL with its password replaced by "***" (for logs and errors).
std::string redact_url(std::string_view url);

// One connection. Non-copyable, movable.
class PgConnection {
 public:
  // Connects to `url` (postgresql://user:password@host:port/db?...), with a
  // 10 s connect timeout unless the URL sets one. The error names the
  // redacted URL and libpq's reason (bad host, refused, authentication).
  static Result<PgConnection> connect(const std::string& url, const std::string& application);

  PGconn* get() const { return c_.get(); }
  bool ok() const { return PQstatus(c_.get()) == CONNECTION_OK; }
  // Synchronous statement(s) with parameters (one statement) or without
  // (several, separated by ';'). Results other than OK/TUPLES are errors.
  Result<PgResult> exec(const std::string& sql, const Params& params = {});
  // Prepares `sql` as statement `name` for exec_prepared()/pipelines.
  Status prepare(const std::string& name, const std::string& sql);
  Result<PgResult> exec_prepared(const std::string& name, const Params& params);

 private:
  struct Finish {
    void operator()(PGconn* c) const { PQfinish(c); }
  };
  explicit PgConnection(PGconn* c) : c_(c) {}
  std::unique_ptr<PGconn, Finish> c_;
};

// libpq wants `const char*` arrays: views of `params` valid while it lives.
std::vector<const char*> param_values(const Params& params);

}  // namespace vend::agent::pg
