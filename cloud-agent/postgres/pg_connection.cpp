// libpq RAII and error mapping.
#include "postgres/pg_connection.hpp"

#include <cstdlib>
#include <utility>

namespace vend::agent::pg {

std::string PgResult::text(int row, int col) const {
  if (PQgetisnull(r_.get(), row, col)) return "";
  return std::string(PQgetvalue(r_.get(), row, col),
                     static_cast<size_t>(PQgetlength(r_.get(), row, col)));
}

int64_t PgResult::int64(int row, int col) const {
  if (PQgetisnull(r_.get(), row, col)) return 0;
  return std::strtoll(PQgetvalue(r_.get(), row, col), nullptr, 10);
}

Error result_error(PGconn* conn, const PGresult* r, std::string_view what) {
  if (PQstatus(conn) != CONNECTION_OK) {
    return make_error("unavailable", "the connection to PostgreSQL is lost (" + std::string(what) +
                                         "): " + PQerrorMessage(conn));
  }
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  std::string sqlstate = state ? state : "";
  if (sqlstate == "VD001" || sqlstate == "VD002") {
    const char* primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    const char* code = sqlstate == "VD001" ? "conflict" : "fenced";
    return make_error(code, primary ? primary : code);
  }
  std::string message = r ? PQresultErrorMessage(r) : PQerrorMessage(conn);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  std::string code = sqlstate.rfind("23", 0) == 0 ? "pg_constraint" : "pg_error";
  std::string prefix = what.empty() ? "" : std::string(what) + ": ";
  return make_error(code,
                    prefix + message + (sqlstate.empty() ? "" : " (SQLSTATE " + sqlstate + ")"));
}

std::string redact_url(std::string_view url) {
  std::string out(url);
  size_t scheme = out.find("://");
  size_t at = out.find('@');
  if (scheme != std::string::npos && at != std::string::npos && at > scheme) {
    size_t colon = out.find(':', scheme + 3);
    if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
  }
  size_t pw = out.find("password=");
  if (pw != std::string::npos) {
    size_t end = out.find('&', pw);
    out.replace(pw + 9, (end == std::string::npos ? out.size() : end) - pw - 9, "***");
  }
  return out;
}

std::vector<const char*> param_values(const Params& params) {
  std::vector<const char*> out;
  out.reserve(params.size());
  for (const auto& p : params) out.push_back(p ? p->c_str() : nullptr);
  return out;
}

Result<PgConnection> PgConnection::connect(const std::string& url, const std::string& application) {
  // The URL comes last: its own settings override these defaults.
  // Keepalives and a TCP user timeout: a server gone silent (partition)
  // fails the connection within seconds instead of hanging the writer. No
  // GSSAPI encryption attempt unless the URL asks for it (a Kerberos
  // credential look-up on every connect otherwise).
  const char* keys[] = {"connect_timeout",     "application_name", "keepalives_idle",
                        "keepalives_interval", "keepalives_count", "tcp_user_timeout",
                        "gssencmode",          "dbname",           nullptr};
  const char* values[] = {"10",    application.c_str(), "5",         "2",    "3",
                          "10000", "disable",           url.c_str(), nullptr};
  PgConnection conn(PQconnectdbParams(keys, values, 1));
  if (!conn.get()) return make_error("unavailable", "PostgreSQL: out of memory connecting");
  if (!conn.ok()) {
    std::string why = PQerrorMessage(conn.get());
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return make_error("unavailable",
                      "cannot connect to PostgreSQL at " + redact_url(url) + ": " + why);
  }
  // Server notices (e.g. "relation already exists, skipping" of the
  // migration's IF NOT EXISTS) would go to stderr; errors are results.
  PQsetNoticeProcessor(
      conn.get(), [](void*, const char*) {}, nullptr);
  return conn;
}

Result<PgResult> PgConnection::exec(const std::string& sql, const Params& params) {
  PgResult r(params.empty()
                 ? PQexec(get(), sql.c_str())
                 : PQexecParams(get(), sql.c_str(), static_cast<int>(params.size()), nullptr,
                                param_values(params).data(), nullptr, nullptr, 0));
  if (r.status() != PGRES_COMMAND_OK && r.status() != PGRES_TUPLES_OK) {
    return result_error(get(), r.get(), sql.substr(0, 60));
  }
  return r;
}

Status PgConnection::prepare(const std::string& name, const std::string& sql) {
  PgResult r(PQprepare(get(), name.c_str(), sql.c_str(), 0, nullptr));
  if (r.status() != PGRES_COMMAND_OK) return result_error(get(), r.get(), "prepare " + name);
  return {};
}

Result<PgResult> PgConnection::exec_prepared(const std::string& name, const Params& params) {
  PgResult r(PQexecPrepared(get(), name.c_str(), static_cast<int>(params.size()),
                            param_values(params).data(), nullptr, nullptr, 0));
  if (r.status() != PGRES_COMMAND_OK && r.status() != PGRES_TUPLES_OK) {
    return result_error(get(), r.get(), name);
  }
  return r;
}

}  // namespace vend::agent::pg
