// CatalogRoutes: the public catalog, GET /v1/machines/{id}/catalog, what a
// customer's app shows of a machine: products, prices and what can be
// bought now. Never a token, and nothing an operator view has beyond that
// (reserved, sold, burned). Answered with a strong ETag; If-None-Match
// holding it is 304. Per-machine: with several agents another instance's
// machine is redirected to it.
#pragma once

#include "core/agent_core.hpp"
#include "http/router.hpp"

namespace vend::agent {

// Non-copyable. `core` must outlive it. Thread-safe (AgentCore is).
class CatalogRoutes {
 public:
  explicit CatalogRoutes(AgentCore& core) : core_(core) {}
  CatalogRoutes(const CatalogRoutes&) = delete;
  CatalogRoutes& operator=(const CatalogRoutes&) = delete;

  void add_routes(Router& router);

 private:
  Result<HttpReply> catalog(const HttpRequest& req);

  AgentCore& core_;
};

}  // namespace vend::agent
