#include "http/account_routes.hpp"

#include <algorithm>

#include "accounts/accounts.hpp"
#include "http/http_json.hpp"
#include "http/operator_audit.hpp"

namespace vend::agent {

namespace {

constexpr size_t kMaxPassword = 1024;
constexpr size_t kMaxLabel = 128;
constexpr int64_t kMaxAuditPage = 1000;
constexpr int64_t kMaxAuditExport = 10'000;
constexpr int kFreeLoginFailures = 5;
constexpr int64_t kLoginWindowMs = 15 * 60 * 1000;
constexpr int64_t kMaxLoginBlockS = 15 * 60;
constexpr int64_t kLoginTokenTtlMs = 12 * 3600 * 1000;
constexpr int64_t kDayMs = 24 * 3600 * 1000;

http::Json account_json(const StoredAccount& a) {
  return {{"name", a.name},
          {"role", to_string(a.role)},
          {"machines", a.machines},
          {"created_ms", a.created_ms},
          {"disabled_ms", a.disabled_ms},
          {"password", !a.password_hash.empty()}};
}

http::Json token_json(const StoredApiToken& t) {
  return {{"id", t.id},
          {"account", t.account},
          {"label", t.label},
          {"created_ms", t.created_ms},
          {"expires_ms", t.expires_ms},
          {"revoked_ms", t.revoked_ms}};
}

http::Json audit_json(const AuditEntry& e) {
  http::Json detail = nullptr;
  if (!e.detail.empty()) {
    detail = http::Json::parse(e.detail, nullptr, /*allow_exceptions=*/false);
    if (detail.is_discarded()) detail = e.detail;
  }
  return {{"id", e.id},         {"at_ms", e.at_ms},   {"account", e.account},
          {"action", e.action}, {"device", e.device}, {"order_id", e.order_id},
          {"detail", detail},   {"peer", e.peer}};
}

bool is_admin(const HttpRequest& req) { return req.caller && req.caller->role == Role::kAdmin; }

std::string self(const HttpRequest& req) { return req.caller ? req.caller->account : ""; }

Error forbidden_other(const HttpRequest& req, const std::string& whose) {
  return make_error("forbidden", "account '" + self(req) + "' (" +
                                     to_string(req.caller ? req.caller->role : Role::kViewer) +
                                     ") may only use its own tokens, not " + whose + "'s");
}

// ?account=&device=&since_ms=&after=&limit= of the audit routes.
Result<AuditQuery> audit_query(const HttpRequest& req, int64_t max_limit) {
  AuditQuery q;
  q.limit = static_cast<size_t>(std::min<int64_t>(100, max_limit));
  if (max_limit == kMaxAuditExport) q.limit = kMaxAuditExport;
  for (const auto& [name, value] : req.params) {
    if (req.param_count(name) > 1) {
      return http::bad_request("query parameter '" + name + "' given more than once");
    }
    if (name == "account" || name == "device") {
      if (!http::is_valid_id(value)) {
        return http::bad_request("query parameter '" + name +
                                 "' must be an id (1..64 of [A-Za-z0-9._-])");
      }
      (name == "account" ? q.account : q.device) = value;
    } else if (name == "since_ms" || name == "after") {
      auto n = http::integer_param(name, value, 0, INT64_MAX / 2);
      if (!n.ok()) return n.error();
      (name == "since_ms" ? q.since_ms : q.after_id) = *n;
    } else if (name == "limit") {
      auto n = http::integer_param(name, value, 1, max_limit);
      if (!n.ok()) return n.error();
      q.limit = static_cast<size_t>(*n);
    } else {
      return http::bad_request("unknown query parameter '" + name + "'");
    }
  }
  return q;
}

}  // namespace

void AccountRoutes::add_routes(Router& router) {
  auto add = [&](const char* method, const char* pattern, Access access,
                 Result<HttpReply> (AccountRoutes::*handler)(const HttpRequest&)) {
    router.add(method, pattern, access, route_to(this, handler));
  };
  add("GET", "/v1/me", Access::kOperator, &AccountRoutes::me);
  add("GET", "/v1/accounts", Access::kAdmin, &AccountRoutes::list_accounts);
  add("POST", "/v1/accounts", Access::kAdmin, &AccountRoutes::add_account);
  add("POST", "/v1/accounts/{id}/disable", Access::kAdmin, &AccountRoutes::disable_account);
  add("POST", "/v1/tokens", Access::kOperator, &AccountRoutes::add_token);
  add("GET", "/v1/tokens", Access::kOperator, &AccountRoutes::list_tokens);
  add("POST", "/v1/tokens/{id}/revoke", Access::kOperator, &AccountRoutes::revoke_token);
  add("POST", "/v1/login", Access::kPublic, &AccountRoutes::login);
  add("GET", "/v1/audit", Access::kAdmin, &AccountRoutes::audit);
  add("GET", "/v1/audit/export", Access::kAdmin, &AccountRoutes::audit_export);
}

Result<Accounts*> AccountRoutes::accounts() const {
  if (options_.accounts == nullptr) {
    return make_error("not_found", "this agent keeps no accounts (--insecure-no-auth)");
  }
  return options_.accounts;
}

Result<HttpReply> AccountRoutes::me(const HttpRequest& req) {
  if (!req.params.empty()) return http::bad_request("GET /v1/me takes no parameters");
  const Caller& c = *req.caller;
  http::Json body = {{"account", c.account}, {"role", to_string(c.role)}, {"machines", c.machines}};
  return HttpReply{200, body.dump()};
}

Result<HttpReply> AccountRoutes::list_accounts(const HttpRequest& req) {
  auto store = accounts();
  if (!store.ok()) return store.error();
  if (!req.params.empty()) return http::bad_request("GET /v1/accounts takes no parameters");
  auto list = (*store)->list_accounts();
  if (!list.ok()) return list.error();
  http::Json out = http::Json::array();
  for (const StoredAccount& a : *list) out.push_back(account_json(a));
  return HttpReply{200, http::Json{{"accounts", std::move(out)}}.dump()};
}

Result<HttpReply> AccountRoutes::add_account(const HttpRequest& req) {
  auto store = accounts();
  if (!store.ok()) return store.error();
  auto body = http::parse_object(req.body);
  if (!body.ok()) return body.error();
  http::BodyReader fields(*body);
  if (Status s = fields.only({"name", "role", "machines", "password"}); !s.ok()) return s.error();
  Accounts::NewAccount a;
  auto name = fields.id("name");
  if (!name.ok()) return name.error();
  a.name = *name;
  auto role_text = fields.text("role", 16);
  if (!role_text.ok()) return role_text.error();
  auto role = parse_role(*role_text);
  if (!role) return http::bad_request("field 'role' must be viewer, restocker, support or admin");
  a.role = *role;
  if (fields.has("machines")) {
    auto machines = fields.array("machines", 1, 1000);
    if (!machines.ok()) return machines.error();
    for (const http::Json& m : **machines) {
      if (!m.is_string() || !http::is_valid_id(m.get<std::string>())) {
        return http::bad_request("field 'machines' must hold device ids");
      }
      a.machines.push_back(m.get<std::string>());
    }
  }
  if (fields.has("password")) {
    auto pw = fields.text("password", kMaxPassword);
    if (!pw.ok()) return pw.error();
    a.password = *pw;
  }
  auto added = (*store)->add_account(a, actor_of(req));
  if (!added.ok()) return added.error();
  return HttpReply{201, account_json(*added).dump()};
}

Result<HttpReply> AccountRoutes::disable_account(const HttpRequest& req) {
  auto store = accounts();
  if (!store.ok()) return store.error();
  std::string name(http::path_segment(req.path, 2));
  if (name == self(req)) return http::bad_request("an admin cannot disable its own account");
  auto done = (*store)->disable_account(name, actor_of(req));
  if (!done.ok()) return done.error();
  return HttpReply{200, account_json(*done).dump()};
}

Result<HttpReply> AccountRoutes::add_token(const HttpRequest& req) {
  auto store = accounts();
  if (!store.ok()) return store.error();
  std::string account = self(req);
  std::string label;
  int64_t ttl_ms = 0;
  if (!req.body.empty()) {
    auto body = http::parse_object(req.body);
    if (!body.ok()) return body.error();
    http::BodyReader fields(*body);
    if (Status s = fields.only({"account", "label", "ttl_days"}); !s.ok()) return s.error();
    if (fields.has("account")) {
      auto a = fields.id("account");
      if (!a.ok()) return a.error();
      account = *a;
    }
    if (fields.has("label")) {
      auto l = fields.text("label", kMaxLabel);
      if (!l.ok()) return l.error();
      label = *l;
    }
    if (fields.has("ttl_days")) {
      auto d = fields.integer("ttl_days", 1, 366);
      if (!d.ok()) return d.error();
      ttl_ms = *d * kDayMs;
    }
  }
  if (account != self(req) && !is_admin(req)) return forbidden_other(req, account);
  auto issued = (*store)->issue_token(account, label, ttl_ms, actor_of(req));
  if (!issued.ok()) return issued.error();
  http::Json out = token_json(issued->stored);
  out["token"] = issued->token;
  return HttpReply{201, out.dump()};
}

Result<HttpReply> AccountRoutes::list_tokens(const HttpRequest& req) {
  auto store = accounts();
  if (!store.ok()) return store.error();
  std::string account = is_admin(req) ? "" : self(req);
  for (const auto& [name, value] : req.params) {
    if (name != "account" || req.param_count(name) > 1 || !http::is_valid_id(value)) {
      return http::bad_request("GET /v1/tokens takes one query parameter, 'account' (an id)");
    }
    if (value != self(req) && !is_admin(req)) return forbidden_other(req, value);
    account = value;
  }
  auto list = (*store)->list_tokens(account);
  if (!list.ok()) return list.error();
  http::Json out = http::Json::array();
  for (const StoredApiToken& t : *list) out.push_back(token_json(t));
  return HttpReply{200, http::Json{{"tokens", std::move(out)}}.dump()};
}

Result<HttpReply> AccountRoutes::revoke_token(const HttpRequest& req) {
  auto store = accounts();
  if (!store.ok()) return store.error();
  std::string id(http::path_segment(req.path, 2));
  auto token = (*store)->find_token(id);
  if (!token.ok()) return token.error();
  if (token->account != self(req) && !is_admin(req)) return forbidden_other(req, token->account);
  auto revoked = (*store)->revoke_token(id, actor_of(req));
  if (!revoked.ok()) return revoked.error();
  revoked->revoked_ms = clock_.wall_ms();
  return HttpReply{200, token_json(*revoked).dump()};
}

int64_t AccountRoutes::login_wait_s(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = failures_.find(key);
  if (it == failures_.end()) return 0;
  int64_t now = clock_.wall_ms();
  if (now - it->second.first_ms > kLoginWindowMs && now >= it->second.blocked_until_ms) {
    failures_.erase(it);
    return 0;
  }
  return std::max<int64_t>(0, (it->second.blocked_until_ms - now + 999) / 1000);
}

void AccountRoutes::login_failed(const std::string& key) {
  std::lock_guard lock(mu_);
  int64_t now = clock_.wall_ms();
  Failures& f = failures_[key];
  if (f.count == 0 || now - f.first_ms > kLoginWindowMs) f = Failures{0, now, 0};
  ++f.count;
  if (f.count >= kFreeLoginFailures) {
    int shift = std::min(f.count - kFreeLoginFailures, 10);
    f.blocked_until_ms = now + std::min<int64_t>(int64_t{1} << shift, kMaxLoginBlockS) * 1000;
  }
  // Bounded: a flood of distinct names cannot grow the map without end.
  if (failures_.size() > 100'000) failures_.erase(failures_.begin());
}

Result<HttpReply> AccountRoutes::login(const HttpRequest& req) {
  auto store = accounts();
  if (!store.ok()) return store.error();
  auto body = http::parse_object(req.body);
  if (!body.ok()) return body.error();
  http::BodyReader fields(*body);
  if (Status s = fields.only({"name", "password"}); !s.ok()) return s.error();
  auto name = fields.id("name");
  if (!name.ok()) return name.error();
  auto password = fields.text("password", kMaxPassword);
  if (!password.ok()) return password.error();
  const std::string by_name = "name:" + *name, by_peer = "peer:" + req.remote_addr;
  int64_t wait_s = std::max(login_wait_s(by_name), login_wait_s(by_peer));
  if (wait_s > 0) {
    HttpReply busy{429, http::error_body("rate_limited", "too many failed logins; try again in " +
                                                             std::to_string(wait_s) + " s")};
    busy.headers.emplace_back("Retry-After", std::to_string(wait_s));
    return busy;
  }
  auto caller = (*store)->check_password(*name, *password);
  if (!caller.ok()) {
    if (caller.error().code == "unauthorized") {
      login_failed(by_name);
      login_failed(by_peer);
    }
    return caller.error();
  }
  {
    std::lock_guard lock(mu_);
    failures_.erase(by_name);
  }
  auto issued =
      (*store)->issue_token(*name, "login", kLoginTokenTtlMs, Actor{*name, req.remote_addr});
  if (!issued.ok()) return issued.error();
  http::Json out = token_json(issued->stored);
  out["token"] = issued->token;
  out["role"] = to_string(caller->role);
  return HttpReply{201, out.dump()};
}

Result<HttpReply> AccountRoutes::audit(const HttpRequest& req) {
  auto store = accounts();
  if (!store.ok()) return store.error();
  auto query = audit_query(req, kMaxAuditPage);
  if (!query.ok()) return query.error();
  auto rows = (*store)->audit(*query);
  if (!rows.ok()) return rows.error();
  http::Json out = http::Json::array();
  for (const AuditEntry& e : *rows) out.push_back(audit_json(e));
  http::Json next = nullptr;
  if (rows->size() == query->limit) next = rows->back().id;
  return HttpReply{200, http::Json{{"entries", std::move(out)}, {"next_after", next}}.dump()};
}

// One JSON object a line (application/x-ndjson), oldest first; at most
// 10,000 a call: the next call passes after=<the last line's id>.
Result<HttpReply> AccountRoutes::audit_export(const HttpRequest& req) {
  auto store = accounts();
  if (!store.ok()) return store.error();
  auto query = audit_query(req, kMaxAuditExport);
  if (!query.ok()) return query.error();
  auto rows = (*store)->audit(*query);
  if (!rows.ok()) return rows.error();
  std::string lines;
  for (const AuditEntry& e : *rows) lines += audit_json(e).dump() + "\n";
  return HttpReply{200, std::move(lines), "application/x-ndjson"};
}

}  // namespace vend::agent
