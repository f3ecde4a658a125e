// The operators' accounts, their API tokens and the audit trail as the log
// stores them (Repository; docs/agent.md "Accounts, roles and tokens").
// Backend-neutral plain data: SQLite and PostgreSQL store the same things.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vend::agent {

// What an account may do (docs/agent.md, the roles table). Each role holds
// the one before's reads; restocker's writes are limited to its machines.
enum class Role { kViewer, kRestocker, kSupport, kAdmin };
inline constexpr Role kAllRoles[] = {Role::kViewer, Role::kRestocker, Role::kSupport, Role::kAdmin};

inline const char* to_string(Role role) {
  switch (role) {
    case Role::kViewer: return "viewer";
    case Role::kRestocker: return "restocker";
    case Role::kSupport: return "support";
    case Role::kAdmin: return "admin";
  }
  return "viewer";
}

inline std::optional<Role> parse_role(std::string_view text) {
  for (Role r : kAllRoles) {
    if (text == to_string(r)) return r;
  }
  return std::nullopt;
}

struct StoredAccount {
  std::string name;  // 1..64 of [A-Za-z0-9._-]
  Role role = Role::kViewer;
  // A restocker's machines (device ids); empty for the other roles.
  std::vector<std::string> machines;
  std::string password_hash;  // password.hpp's encoding; "" = no password login
  int64_t created_ms = 0;
  int64_t disabled_ms = 0;  // 0 = active; a disabled account's tokens are refused
};

// One API token. The token itself is shown once, at creation; the log keeps
// its SHA-256 only.
struct StoredApiToken {
  std::string id;  // "tok-<hex>": names it in lists and revocation
  std::string account;
  std::string sha256_hex;  // of the token's text
  std::string label;
  int64_t created_ms = 0;
  int64_t expires_ms = 0;
  int64_t revoked_ms = 0;  // 0 = live
};

// One operator action: who, what, about which machine or order, with what
// (JSON: the request's fields, before/after where cheap), when, from where.
struct AuditEntry {
  int64_t id = 0;  // assigned by the log, increasing
  int64_t at_ms = 0;
  std::string account;
  std::string action;  // "restock", "resolve_review", "account_add", ...
  std::string device;  // "" = none
  std::string order_id;
  std::string detail;  // a JSON object ("" = none)
  std::string peer;    // the client's address
};

// GET /v1/audit: oldest first, ids above `after_id`, at most `limit`.
struct AuditQuery {
  std::string account;  // "" = any
  std::string device;   // "" = any
  int64_t since_ms = 0;
  int64_t after_id = 0;
  size_t limit = 100;
};

// Who is calling, once authenticated.
struct Caller {
  std::string account;
  Role role = Role::kViewer;
  std::vector<std::string> machines;  // a restocker's machines

  // A restocker's writes are limited to its machines; other roles (those
  // the route admits) are not limited.
  bool covers(const std::string& device) const {
    if (role != Role::kRestocker) return true;
    for (const std::string& m : machines) {
      if (m == device) return true;
    }
    return false;
  }
};

// Who does an operator action and from where: stamped on its audit row.
struct Actor {
  std::string account;
  std::string peer;
};

// "a,b,c" <-> {"a","b","c"} (how machines are stored; ids hold no comma).
inline std::string join_machines(const std::vector<std::string>& machines) {
  std::string out;
  for (const std::string& m : machines) {
    if (!out.empty()) out += ',';
    out += m;
  }
  return out;
}

inline std::vector<std::string> split_machines(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    if (!part.empty()) out.emplace_back(part);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace vend::agent
