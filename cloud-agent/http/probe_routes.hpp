// ProbeRoutes: what monitoring reads.
//
//   GET /metrics     Prometheus text: the core's figures, the HTTP server's,
//                    and every other part's (`more_metrics`)
//   GET /healthz     200 {"status":"ok",...}; 503 with the reasons when the
//                    repository fail-stopped, the broker is down past
//                    broker_down_grace_ms or the inbound queue is saturated
//   GET /v1/cluster  several agents: the cluster's view (operator token);
//                    404 when this agent runs alone
#pragma once

#include <functional>
#include <string>

#include "core/agent_core.hpp"
#include "http/http_api_options.hpp"
#include "http/metrics.hpp"
#include "http/router.hpp"

namespace vend::agent {

// Non-copyable. `core` and `options` must outlive it. Thread-safe.
class ProbeRoutes {
 public:
  // `more_metrics`: the API's own counters (rate limits, payments), in
  // Prometheus text, appended after the core's.
  ProbeRoutes(AgentCore& core, const HttpApiOptions& options,
              std::function<std::string()> more_metrics);
  ProbeRoutes(const ProbeRoutes&) = delete;
  ProbeRoutes& operator=(const ProbeRoutes&) = delete;

  void add_routes(Router& router);

 private:
  Result<HttpReply> metrics(const HttpRequest& req);
  Result<HttpReply> healthz(const HttpRequest& req);
  Result<HttpReply> cluster(const HttpRequest& req);
  bool mqtt_connected() const;
  AgentHealth health() const;

  AgentCore& core_;
  const HttpApiOptions& options_;
  std::function<std::string()> more_metrics_;
  MetricsExporter metrics_;
};

}  // namespace vend::agent
