// The audit row and actor of an operator request: the account the Router
// authorized (HttpRequest::caller) and the TCP peer's address. Handlers
// hand them to AgentCore's operator methods and to Accounts, which write
// the row with the action's change.
#pragma once

#include <string>
#include <utility>

#include "contracts/accounts.hpp"
#include "http/http_request.hpp"

namespace vend::agent {

inline Actor actor_of(const HttpRequest& req) {
  return Actor{req.caller ? req.caller->account : std::string(), req.remote_addr};
}

// `detail`: a JSON object ("" = none).
inline AuditEntry audit_of(const HttpRequest& req, std::string action, std::string device = {},
                           std::string order_id = {}, std::string detail = {}) {
  AuditEntry e;
  e.account = req.caller ? req.caller->account : std::string();
  e.peer = req.remote_addr;
  e.action = std::move(action);
  e.device = std::move(device);
  e.order_id = std::move(order_id);
  e.detail = std::move(detail);
  return e;
}

}  // namespace vend::agent
