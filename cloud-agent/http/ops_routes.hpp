// OpsRoutes: what the operators' console reads (operator token), and the
// console itself (public: every API call the page makes sends the token).
//
//   GET /v1/ops/stream     the ops events as Server-Sent Events (OpsHub)
//   GET /v1/ops/series     per-minute plots of the last hour (OpsSeries)
//   GET /v1/fleet          fleet summary counts and one page of the fleet
//                          table, filtered server-side, for 1,000+ machines
//   GET /v1/fleet/summary  the counts alone
//   GET /v1/alerts         the active alerts, one per device, slot and code
//   GET /console/          the console's embedded static files
//                          (embedded_files.hpp); GET /console redirects here
//
// Without an OpsHub (OpsSeries) the stream (the plots) are 404.
#pragma once

#include "core/agent_core.hpp"
#include "http/http_api_options.hpp"
#include "http/router.hpp"

namespace vend::agent {

// Non-copyable. `core` and `options` (and its ops_hub, ops_series) must
// outlive it. Thread-safe (AgentCore, OpsHub and OpsSeries are).
class OpsRoutes {
 public:
  OpsRoutes(AgentCore& core, const HttpApiOptions& options) : core_(core), options_(options) {}
  OpsRoutes(const OpsRoutes&) = delete;
  OpsRoutes& operator=(const OpsRoutes&) = delete;

  void add_routes(Router& router);

 private:
  Result<HttpReply> ops_stream(const HttpRequest& req);
  Result<HttpReply> ops_series(const HttpRequest& req);
  Result<HttpReply> fleet(const HttpRequest& req);
  Result<HttpReply> fleet_counts(const HttpRequest& req);
  Result<HttpReply> list_alerts(const HttpRequest& req);
  // The files are public, change only with the binary, and are
  // revalidated (no-cache) by their ETag.
  Result<HttpReply> console(const HttpRequest& req);

  AgentCore& core_;
  const HttpApiOptions& options_;
};

}  // namespace vend::agent
