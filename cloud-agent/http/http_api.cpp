#include "http/http_api.hpp"

#include <utility>

namespace vend::agent {

HttpApi::HttpApi(AgentCore& core, HttpApiOptions options, const Clock& clock, Logger& log)
    : options_(std::move(options)),
      owners_(options_),
      admission_(options_, clock, log),
      orders_(core, options_, admission_, owners_),
      payments_(core, options_, clock, log),
      catalog_(core),
      devices_(core, log),
      ops_(core, options_),
      probes_(core, options_,
              [this] { return admission_.rate_limit_metrics() + payments_.payment_metrics(); }),
      accounts_(options_, clock),
      router_(options_, owners_, log) {
  orders_.add_routes(router_);
  payments_.add_routes(router_);
  catalog_.add_routes(router_);
  devices_.add_routes(router_);
  ops_.add_routes(router_);
  probes_.add_routes(router_);
  accounts_.add_routes(router_);
}

HttpServer::Handler HttpApi::handler() {
  return [this](HttpRequest&& req, HttpResponder responder) {
    handle(std::move(req), std::move(responder));
  };
}

void HttpApi::handle(HttpRequest&& req, HttpResponder responder) {
  router_.handle(std::move(req), std::move(responder));
}

}  // namespace vend::agent
