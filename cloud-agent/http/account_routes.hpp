// AccountRoutes: the operators as people over HTTP (docs/agent.md,
// "Accounts, roles and tokens"), over Accounts (HttpApiOptions::accounts).
//
//   GET  /v1/me                         who the bearer token stands for (any role)
//   GET  /v1/accounts                   every account (admin)
//   POST /v1/accounts                   a new account (admin)
//   POST /v1/accounts/{name}/disable    refuse its tokens from now on (admin)
//   POST /v1/tokens                     a new API token, shown once (own; admin: any)
//   GET  /v1/tokens                     tokens, never their text (own; admin: any)
//   POST /v1/tokens/{id}/revoke         (own; admin: any)
//   POST /v1/login                      name + password -> a short-lived token (public)
//   GET  /v1/audit                      the audit trail, filtered and paged (admin)
//   GET  /v1/audit/export               the same as JSON lines (admin)
//
// Every change is written with its audit row (Accounts). Without accounts
// (--insecure-no-auth) these routes answer 404, /v1/me aside.
//
// Login backoff: after 5 failed logins of one account name, or from one
// peer address, within 15 minutes, further attempts of that name or peer
// are refused with 429 rate_limited (Retry-After) for 2^(n-5) seconds,
// at most 15 minutes, without checking the password; a success clears the
// name's count. Counts live in this agent's memory.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "http/router.hpp"
#include "vend/clock.hpp"

namespace vend::agent {

class Accounts;

// Non-copyable. `options` and `clock` must outlive it. Thread-safe.
class AccountRoutes {
 public:
  AccountRoutes(const HttpApiOptions& options, const Clock& clock)
      : options_(options), clock_(clock) {}
  AccountRoutes(const AccountRoutes&) = delete;
  AccountRoutes& operator=(const AccountRoutes&) = delete;

  void add_routes(Router& router);

 private:
  Result<HttpReply> me(const HttpRequest& req);
  Result<HttpReply> list_accounts(const HttpRequest& req);
  Result<HttpReply> add_account(const HttpRequest& req);
  Result<HttpReply> disable_account(const HttpRequest& req);
  Result<HttpReply> add_token(const HttpRequest& req);
  Result<HttpReply> list_tokens(const HttpRequest& req);
  Result<HttpReply> revoke_token(const HttpRequest& req);
  Result<HttpReply> login(const HttpRequest& req);
  Result<HttpReply> audit(const HttpRequest& req);
  Result<HttpReply> audit_export(const HttpRequest& req);
  Result<Accounts*> accounts() const;

  // Login backoff (see above): failures of one key ("name:<n>", "peer:<a>").
  struct Failures {
    int count = 0;
    int64_t first_ms = 0;
    int64_t blocked_until_ms = 0;
  };
  // Seconds to wait before `key` may try again; 0: it may now.
  int64_t login_wait_s(const std::string& key);
  void login_failed(const std::string& key);

  const HttpApiOptions& options_;
  const Clock& clock_;
  std::mutex mu_;  // guards failures_
  std::map<std::string, Failures> failures_;
};

}  // namespace vend::agent
