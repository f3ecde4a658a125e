// Repository: SQLite reads of the operators' accounts, API tokens and audit
// trail, on the read connection.
#include <string>
#include <vector>

#include "repository/repository_sqlite.hpp"

namespace vend::agent::detail {

namespace {

constexpr const char* kAccountColumns =
    "name, role, machines, password_hash, created_ms, disabled_ms";
constexpr const char* kTokenColumns =
    "id, account, sha256_hex, label, created_ms, expires_ms, revoked_ms";

template <typename Bind, typename OnRow>
Status query(sql::Database& db, const std::string& sql, Bind&& bind, OnRow&& on_row) {
  auto stmt = db.prepare(sql);
  if (!stmt.ok()) return stmt.error();
  bind(*stmt);
  while (true) {
    auto row = stmt->step();
    if (!row.ok()) return row.error();
    if (!*row) return {};
    on_row(*stmt);
  }
}

StoredAccount read_account(const sql::Statement& s) {
  StoredAccount a;
  a.name = s.column_text(0);
  a.role = parse_role(s.column_text(1)).value_or(Role::kViewer);
  a.machines = split_machines(s.column_text(2));
  a.password_hash = s.column_text(3);
  a.created_ms = s.column_int64(4);
  a.disabled_ms = s.column_int64(5);
  return a;
}

StoredApiToken read_token(const sql::Statement& s) {
  return StoredApiToken{s.column_text(0),  s.column_text(1),  s.column_text(2), s.column_text(3),
                        s.column_int64(4), s.column_int64(5), s.column_int64(6)};
}

}  // namespace

Result<std::optional<StoredAccount>> SqliteBackend::find_account(const std::string& name) {
  std::lock_guard lock(read_mu_);
  std::optional<StoredAccount> out;
  auto s = query(
      read_db_, std::string("SELECT ") + kAccountColumns + " FROM accounts WHERE name = ?",
      [&](sql::Statement& st) { st.bind(1, name); },
      [&](const sql::Statement& st) { out = read_account(st); });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::vector<StoredAccount>> SqliteBackend::accounts() {
  std::lock_guard lock(read_mu_);
  std::vector<StoredAccount> out;
  auto s = query(
      read_db_, std::string("SELECT ") + kAccountColumns + " FROM accounts ORDER BY name",
      [](sql::Statement&) {}, [&](const sql::Statement& st) { out.push_back(read_account(st)); });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::optional<StoredApiToken>> SqliteBackend::find_api_token(const std::string& sha256_hex) {
  std::lock_guard lock(read_mu_);
  std::optional<StoredApiToken> out;
  auto s = query(
      read_db_, std::string("SELECT ") + kTokenColumns + " FROM api_tokens WHERE sha256_hex = ?",
      [&](sql::Statement& st) { st.bind(1, sha256_hex); },
      [&](const sql::Statement& st) { out = read_token(st); });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::vector<StoredApiToken>> SqliteBackend::api_tokens(const std::string& account) {
  std::lock_guard lock(read_mu_);
  std::vector<StoredApiToken> out;
  auto s = query(
      read_db_,
      std::string("SELECT ") + kTokenColumns +
          " FROM api_tokens WHERE (?1 = '' OR account = ?1) ORDER BY created_ms DESC, id",
      [&](sql::Statement& st) { st.bind(1, account); },
      [&](const sql::Statement& st) { out.push_back(read_token(st)); });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::vector<AuditEntry>> SqliteBackend::audit(const AuditQuery& q) {
  std::lock_guard lock(read_mu_);
  std::vector<AuditEntry> out;
  auto s = query(
      read_db_,
      "SELECT id, at_ms, account, action, device, order_id, detail, peer FROM audit "
      "WHERE id > ?1 AND at_ms >= ?2 AND (?3 = '' OR account = ?3) AND (?4 = '' OR device = ?4) "
      "ORDER BY id LIMIT ?5",
      [&](sql::Statement& st) {
        st.bind(1, q.after_id).bind(2, q.since_ms).bind(3, q.account).bind(4, q.device);
        st.bind(5, static_cast<int64_t>(q.limit));
      },
      [&](const sql::Statement& st) {
        out.push_back(AuditEntry{st.column_int64(0), st.column_int64(1), st.column_text(2),
                                 st.column_text(3), st.column_text(4), st.column_text(5),
                                 st.column_text(6), st.column_text(7)});
      });
  if (!s.ok()) return s.error();
  return out;
}

}  // namespace vend::agent::detail
