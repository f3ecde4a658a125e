// PostgreSQL reads of the operators' accounts, API tokens and audit trail,
// on the read connection.
#include <optional>
#include <string>
#include <vector>

#include "postgres/postgres_backend.hpp"

namespace vend::agent::pg {

namespace {

constexpr const char* kAccountColumns =
    "name, role, machines, password_hash, created_ms, disabled_ms";
constexpr const char* kTokenColumns =
    "id, account, sha256_hex, label, created_ms, expires_ms, revoked_ms";

std::optional<std::string> num(int64_t v) { return std::to_string(v); }

StoredAccount read_account(const PgResult& r, int row) {
  StoredAccount a;
  a.name = r.text(row, 0);
  a.role = parse_role(r.text(row, 1)).value_or(Role::kViewer);
  a.machines = split_machines(r.text(row, 2));
  a.password_hash = r.text(row, 3);
  a.created_ms = r.int64(row, 4);
  a.disabled_ms = r.int64(row, 5);
  return a;
}

StoredApiToken read_token(const PgResult& r, int row) {
  return StoredApiToken{r.text(row, 0),  r.text(row, 1),  r.text(row, 2), r.text(row, 3),
                        r.int64(row, 4), r.int64(row, 5), r.int64(row, 6)};
}

}  // namespace

Result<std::optional<StoredAccount>> PostgresBackend::find_account(const std::string& name) {
  std::lock_guard lock(read_mu_);
  auto r =
      read(std::string("SELECT ") + kAccountColumns + " FROM accounts WHERE name = $1", {name});
  if (!r.ok()) return r.error();
  if (r->rows() == 0) return std::optional<StoredAccount>{};
  return std::optional<StoredAccount>{read_account(*r, 0)};
}

Result<std::vector<StoredAccount>> PostgresBackend::accounts() {
  std::lock_guard lock(read_mu_);
  auto r = read(std::string("SELECT ") + kAccountColumns + " FROM accounts ORDER BY name", {});
  if (!r.ok()) return r.error();
  std::vector<StoredAccount> out;
  out.reserve(static_cast<size_t>(r->rows()));
  for (int i = 0; i < r->rows(); ++i) out.push_back(read_account(*r, i));
  return out;
}

Result<std::optional<StoredApiToken>> PostgresBackend::find_api_token(
    const std::string& sha256_hex) {
  std::lock_guard lock(read_mu_);
  auto r = read(std::string("SELECT ") + kTokenColumns + " FROM api_tokens WHERE sha256_hex = $1",
                {sha256_hex});
  if (!r.ok()) return r.error();
  if (r->rows() == 0) return std::optional<StoredApiToken>{};
  return std::optional<StoredApiToken>{read_token(*r, 0)};
}

Result<std::vector<StoredApiToken>> PostgresBackend::api_tokens(const std::string& account) {
  std::lock_guard lock(read_mu_);
  auto r = read(std::string("SELECT ") + kTokenColumns +
                    " FROM api_tokens WHERE ($1 = '' OR account = $1) "
                    "ORDER BY created_ms DESC, id",
                {account});
  if (!r.ok()) return r.error();
  std::vector<StoredApiToken> out;
  out.reserve(static_cast<size_t>(r->rows()));
  for (int i = 0; i < r->rows(); ++i) out.push_back(read_token(*r, i));
  return out;
}

Result<std::vector<AuditEntry>> PostgresBackend::audit(const AuditQuery& q) {
  std::lock_guard lock(read_mu_);
  auto r = read(
      "SELECT id, at_ms, account, action, device, order_id, detail, peer FROM audit "
      "WHERE id > $1 AND at_ms >= $2 AND ($3 = '' OR account = $3) AND ($4 = '' OR device = $4) "
      "ORDER BY id LIMIT $5",
      {num(q.after_id), num(q.since_ms), q.account, q.device, num(static_cast<int64_t>(q.limit))});
  if (!r.ok()) return r.error();
  std::vector<AuditEntry> out;
  out.reserve(static_cast<size_t>(r->rows()));
  for (int i = 0; i < r->rows(); ++i) {
    out.push_back(AuditEntry{r->int64(i, 0), r->int64(i, 1), r->text(i, 2), r->text(i, 3),
                             r->text(i, 4), r->text(i, 5), r->text(i, 6), r->text(i, 7)});
  }
  return out;
}

}  // namespace vend::agent::pg
