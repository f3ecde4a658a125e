#include "http/probe_routes.hpp"

#include <utility>
#include <vector>

#include "http/http_json.hpp"
#include "http/ops_stream.hpp"

namespace vend::agent {

ProbeRoutes::ProbeRoutes(AgentCore& core, const HttpApiOptions& options,
                         std::function<std::string()> more_metrics)
    : core_(core), options_(options), more_metrics_(std::move(more_metrics)) {}

void ProbeRoutes::add_routes(Router& router) {
  router.add("GET", "/v1/cluster", Access::kOperator, route_to(this, &ProbeRoutes::cluster));
  router.add("GET", "/metrics", Access::kPublic, route_to(this, &ProbeRoutes::metrics));
  router.add("GET", "/healthz", Access::kPublic, route_to(this, &ProbeRoutes::healthz));
}

Result<HttpReply> ProbeRoutes::cluster(const HttpRequest&) {
  if (!options_.cluster_view) {
    return make_error("not_found", "this agent runs alone (no --instance-id)");
  }
  return HttpReply{200, options_.cluster_view()};
}

bool ProbeRoutes::mqtt_connected() const {
  return options_.mqtt_connected && options_.mqtt_connected();
}

AgentHealth ProbeRoutes::health() const {
  AgentHealth h;
  h.storage_failed = !core_.health().ok();
  h.mqtt_connected = mqtt_connected();
  h.mqtt_down_ms = options_.mqtt_down_ms ? options_.mqtt_down_ms() : 0;
  h.broker_down = !h.mqtt_connected && h.mqtt_down_ms > options_.broker_down_grace_ms;
  if (options_.inbound_fill) {
    HttpApiOptions::InboundFill f = options_.inbound_fill();
    h.inbound_messages = f.messages;
    h.inbound_max_messages = f.max_messages;
    h.inbound_dropped = f.dropped;
    h.inbound_dropped_machine_share = f.dropped_machine_share;
    h.inbound_saturated = (f.max_messages > 0 && f.messages * 10 >= f.max_messages * 9) ||
                          (f.max_bytes > 0 && f.bytes * 10 >= f.max_bytes * 9);
  }
  return h;
}

Result<HttpReply> ProbeRoutes::metrics(const HttpRequest&) {
  std::string text = metrics_.scrape(core_, health()) + more_metrics_();
  if (options_.server_stats) text += render_http_metrics(options_.server_stats());
  if (options_.ops_hub != nullptr) text += options_.ops_hub->render_metrics();
  if (options_.cluster_metrics) text += options_.cluster_metrics();
  return HttpReply{200, std::move(text), "text/plain; version=0.0.4; charset=utf-8"};
}

Result<HttpReply> ProbeRoutes::healthz(const HttpRequest&) {
  // 503 when it cannot do its job: nothing durable (storage), no devices
  // (broker past the grace), or input it cannot keep up with.
  AgentHealth h = health();
  std::vector<std::string> reasons = h.reasons();
  http::Json body = {{"status", reasons.empty() ? "ok" : "unavailable"},
                     {"mqtt_connected", h.mqtt_connected},
                     {"mqtt_down_ms", h.mqtt_down_ms},
                     {"inbound_messages", h.inbound_messages},
                     {"storage_failed", h.storage_failed}};
  if (!reasons.empty()) {
    body["reasons"] = reasons;
    body["reason"] = reasons.front();
  }
  return HttpReply{reasons.empty() ? 200 : 503, body.dump()};
}

}  // namespace vend::agent
