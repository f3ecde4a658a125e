// Accounts: the operators as people (docs/agent.md, "Accounts, roles and
// tokens"). Named accounts with a role, their passwords (scrypt,
// password.hpp) and API tokens, all kept in the agent's log (Repository,
// both backends), so they survive restarts and are shared by every agent on
// one PostgreSQL. Every change here is written with its audit row in one
// changeset: both commit or neither, and nothing is answered before the
// commit.
//
// Tokens: "vend_" + 64 hex characters (256 random bits from the kernel),
// shown once; the log keeps their SHA-256. A fast hash is enough for a
// high-entropy random secret: nobody can guess 2^256 inputs, and a slow KDF
// would cost every request. A token is refused once expired, revoked, or
// its account disabled; each request reads the log (no cache), so a
// revocation holds at once on every agent.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "contracts/accounts.hpp"
#include "repository/repository.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"
#include "vend/result.hpp"

namespace vend::agent {

// The actor of `vend-agent account add` and `token add` on the agent host.
inline constexpr const char* kHostActor = "(agent host)";

// Non-copyable. `repo`, `clock` and `log` must outlive it. Thread-safe
// (the repository is; scrypt runs one hash at a time, password.hpp).
class Accounts {
 public:
  // Default and longest lifetime of an API token.
  static constexpr int64_t kDefaultTokenTtlMs = 90LL * 24 * 3600 * 1000;
  static constexpr int64_t kMaxTokenTtlMs = 366LL * 24 * 3600 * 1000;

  Accounts(Repository& repo, const Clock& clock, Logger& log)
      : repo_(repo), clock_(clock), log_(log) {}
  Accounts(const Accounts&) = delete;
  Accounts& operator=(const Accounts&) = delete;

  struct NewAccount {
    std::string name;
    Role role = Role::kViewer;
    std::vector<std::string> machines;  // restocker only (at least one)
    std::string password;               // "" = tokens only, no password login
  };
  // bad_request (name, role/machines, weak password), conflict (exists).
  Result<StoredAccount> add_account(const NewAccount& account, const Actor& by);
  // Its tokens are refused from now on. not_found, conflict (already).
  Result<StoredAccount> disable_account(const std::string& name, const Actor& by);
  Result<std::vector<StoredAccount>> list_accounts() { return repo_.accounts(); }

  struct IssuedToken {
    std::string token;  // shown once
    StoredApiToken stored;
  };
  // A new token of `account` (active), living `ttl_ms` (0: the default;
  // 1 min .. kMaxTokenTtlMs). not_found, conflict (disabled), bad_request.
  Result<IssuedToken> issue_token(const std::string& account, const std::string& label,
                                  int64_t ttl_ms, const Actor& by);
  // not_found (no such id), conflict (revoked already). Answers the token
  // as it was before.
  Result<StoredApiToken> find_token(const std::string& id);
  Result<StoredApiToken> revoke_token(const std::string& id, const Actor& by);
  // "" = every account's; newest first.
  Result<std::vector<StoredApiToken>> list_tokens(const std::string& account) {
    return repo_.api_tokens(account);
  }

  // The caller a bearer token stands for; "unauthorized" with the reason
  // (unknown, expired, revoked, account disabled), "unavailable" when the
  // log cannot be read.
  Result<Caller> authenticate(std::string_view token);
  // The account's password checked; "unauthorized" (one message for an
  // unknown name and a wrong password).
  Result<Caller> check_password(const std::string& name, std::string_view password);

  // An action whose change is not in the log (a reconcile request goes to
  // the machine): its audit row alone, durable before the action.
  Status record(const AuditEntry& entry);
  Result<std::vector<AuditEntry>> audit(const AuditQuery& query) { return repo_.audit(query); }

  // An audit row of `by` for `action`, stamped now.
  AuditEntry entry(const Actor& by, std::string action) const;

 private:
  Status commit(Changeset changes, const std::string& what);

  Repository& repo_;
  const Clock& clock_;
  Logger& log_;
  std::mutex scrypt_mu_;  // one password hash at a time (64 MiB each)
};

// Whether `name` can name an account: 1..64 of [A-Za-z0-9._-].
bool is_valid_account_name(std::string_view name);

}  // namespace vend::agent
