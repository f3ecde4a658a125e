#include "accounts/accounts.hpp"

#include <algorithm>
#include <utility>

#include "accounts/password.hpp"
#include "vend/crypto.hpp"
#include "vend/json_writer.hpp"
#include "vend/protocol.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "accounts";
constexpr const char* kTokenPrefix = "vend_";
constexpr size_t kTokenHexChars = 64;
constexpr size_t kMaxLabel = 128;
constexpr int64_t kMinTokenTtlMs = 60'000;

// {"k":"v",...} of string fields, in the order given.
std::string json_object(std::initializer_list<std::pair<const char*, std::string>> fields) {
  std::string out = "{";
  for (const auto& [k, v] : fields) {
    if (out.size() > 1) out += ',';
    json::append_string(out, k);
    out += ':';
    json::append_string(out, v);
  }
  return out + "}";
}

bool printable(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; });
}

}  // namespace

bool is_valid_account_name(std::string_view name) { return proto::is_valid_id(name); }

AuditEntry Accounts::entry(const Actor& by, std::string action) const {
  AuditEntry e;
  e.at_ms = clock_.wall_ms();
  e.account = by.account;
  e.peer = by.peer;
  e.action = std::move(action);
  return e;
}

Status Accounts::commit(Changeset changes, const std::string& what) {
  auto ticket = repo_.submit(std::move(changes));
  if (!ticket.ok()) return ticket.error();
  if (Status s = repo_.wait(*ticket); !s.ok()) {
    if (s.error().code == "conflict") return s;
    log_.error(kLog, what + ": " + s.error().to_string());
    return make_error("unavailable", what + " was not written: " + s.error().message);
  }
  return {};
}

Result<StoredAccount> Accounts::add_account(const NewAccount& a, const Actor& by) {
  if (!is_valid_account_name(a.name)) {
    return make_error("bad_request", "account name must be 1..64 of [A-Za-z0-9._-]");
  }
  if (a.role == Role::kRestocker && a.machines.empty()) {
    return make_error("bad_request", "a restocker needs its machines (at least one device id)");
  }
  if (a.role != Role::kRestocker && !a.machines.empty()) {
    return make_error("bad_request", "only a restocker is limited to machines");
  }
  for (const std::string& m : a.machines) {
    if (!proto::is_valid_id(m)) return make_error("bad_request", "machine '" + m + "' is no id");
  }
  if (!a.password.empty()) {
    if (std::string why = password::weakness(a.password); !why.empty()) {
      return make_error("bad_request", why);
    }
  }
  auto existing = repo_.find_account(a.name);
  if (!existing.ok()) return existing.error();
  if (*existing) return make_error("conflict", "account '" + a.name + "' exists");
  StoredAccount stored{a.name, a.role, a.machines, "", clock_.wall_ms(), 0};
  if (!a.password.empty()) {
    std::lock_guard lock(scrypt_mu_);
    auto hashed = password::hash(a.password);
    if (!hashed.ok()) return hashed.error();
    stored.password_hash = *hashed;
  }
  AuditEntry e = entry(by, "account_add");
  e.detail = json_object(
      {{"account", a.name}, {"role", to_string(a.role)}, {"machines", join_machines(a.machines)}});
  Changeset changes;
  changes.put_account(stored);
  changes.insert_audit(e);
  if (Status s = commit(std::move(changes), "account " + a.name); !s.ok()) return s.error();
  log_.info(kLog, "account '" + a.name + "' (" + to_string(a.role) + ") added by " + by.account);
  return stored;
}

Result<StoredAccount> Accounts::disable_account(const std::string& name, const Actor& by) {
  auto found = repo_.find_account(name);
  if (!found.ok()) return found.error();
  if (!*found) return make_error("not_found", "no account '" + name + "'");
  StoredAccount a = **found;
  if (a.disabled_ms != 0) return make_error("conflict", "account '" + name + "' is disabled");
  a.disabled_ms = clock_.wall_ms();
  AuditEntry e = entry(by, "account_disable");
  e.detail = json_object({{"account", name}});
  Changeset changes;
  changes.put_account(a);
  changes.insert_audit(e);
  if (Status s = commit(std::move(changes), "account " + name); !s.ok()) return s.error();
  log_.info(kLog, "account '" + name + "' disabled by " + by.account);
  return a;
}

Result<Accounts::IssuedToken> Accounts::issue_token(const std::string& account,
                                                    const std::string& label, int64_t ttl_ms,
                                                    const Actor& by) {
  if (ttl_ms == 0) ttl_ms = kDefaultTokenTtlMs;
  if (ttl_ms < kMinTokenTtlMs || ttl_ms > kMaxTokenTtlMs) {
    return make_error("bad_request", "a token lives 1 minute .. 366 days");
  }
  if (label.size() > kMaxLabel || !printable(label)) {
    return make_error("bad_request", "label: at most 128 bytes, no control characters");
  }
  auto found = repo_.find_account(account);
  if (!found.ok()) return found.error();
  if (!*found) return make_error("not_found", "no account '" + account + "'");
  if ((*found)->disabled_ms != 0) return make_error("conflict", "account is disabled");
  uint8_t secret[kTokenHexChars / 2];
  crypto::random_bytes(secret, sizeof secret);
  IssuedToken out;
  out.token = kTokenPrefix + crypto::to_hex(secret, sizeof secret);
  int64_t now = clock_.wall_ms();
  out.stored = StoredApiToken{"tok-" + crypto::random_id128().substr(0, 16),
                              account,
                              crypto::sha256_hex(out.token),
                              label,
                              now,
                              now + ttl_ms,
                              0};
  AuditEntry e = entry(by, "token_add");
  e.detail = json_object({{"account", account},
                          {"id", out.stored.id},
                          {"label", label},
                          {"expires_ms", std::to_string(out.stored.expires_ms)}});
  Changeset changes;
  changes.insert_api_token(out.stored);
  changes.insert_audit(e);
  if (Status s = commit(std::move(changes), "token of " + account); !s.ok()) return s.error();
  log_.info(kLog, "token " + out.stored.id + " of '" + account + "' issued by " + by.account);
  return out;
}

Result<StoredApiToken> Accounts::find_token(const std::string& id) {
  auto all = repo_.api_tokens("");
  if (!all.ok()) return all.error();
  for (const StoredApiToken& t : *all) {
    if (t.id == id) return t;
  }
  return make_error("not_found", "no token '" + id + "'");
}

Result<StoredApiToken> Accounts::revoke_token(const std::string& id, const Actor& by) {
  auto token = find_token(id);
  if (!token.ok()) return token.error();
  if (token->revoked_ms != 0) return make_error("conflict", "token " + id + " is revoked");
  AuditEntry e = entry(by, "token_revoke");
  e.detail = json_object({{"account", token->account}, {"id", id}});
  Changeset changes;
  changes.revoke_api_token(id, e.at_ms);
  changes.insert_audit(e);
  if (Status s = commit(std::move(changes), "revocation of " + id); !s.ok()) return s.error();
  log_.info(kLog, "token " + id + " of '" + token->account + "' revoked by " + by.account);
  return token;
}

Result<Caller> Accounts::authenticate(std::string_view token) {
  bool shaped = token.size() == 5 + kTokenHexChars && token.substr(0, 5) == kTokenPrefix;
  if (!shaped)
    return make_error("unauthorized", "operator endpoint: wrong bearer token (no such token)");
  auto found = repo_.find_api_token(crypto::sha256_hex(token));
  if (!found.ok()) return make_error("unavailable", "tokens cannot be read now; try again");
  if (!*found)
    return make_error("unauthorized", "operator endpoint: wrong bearer token (no such token)");
  const StoredApiToken& t = **found;
  if (t.revoked_ms != 0) return make_error("unauthorized", "token " + t.id + " is revoked");
  if (clock_.wall_ms() >= t.expires_ms) {
    return make_error("unauthorized", "token " + t.id + " has expired");
  }
  auto account = repo_.find_account(t.account);
  if (!account.ok()) return make_error("unavailable", "accounts cannot be read now; try again");
  if (!*account || (*account)->disabled_ms != 0) {
    return make_error("unauthorized", "account '" + t.account + "' is disabled");
  }
  return Caller{t.account, (*account)->role, (*account)->machines};
}

Result<Caller> Accounts::check_password(const std::string& name, std::string_view given) {
  auto account = repo_.find_account(name);
  if (!account.ok()) return make_error("unavailable", "accounts cannot be read now; try again");
  bool ok = false;
  if (*account && (*account)->disabled_ms == 0 && !(*account)->password_hash.empty()) {
    std::lock_guard lock(scrypt_mu_);
    ok = password::verify(given, (*account)->password_hash);
  }
  if (!ok) return make_error("unauthorized", "wrong account name or password");
  return Caller{name, (*account)->role, (*account)->machines};
}

Status Accounts::record(const AuditEntry& entry) {
  Changeset changes;
  if (!entry.device.empty()) changes.fence_device(entry.device);
  changes.insert_audit(entry);
  return commit(std::move(changes), "audit of " + entry.action);
}

}  // namespace vend::agent
