// OwnerRedirect: with several agents (docs/deployment.md, "Several agents")
// the answer to a request about a machine another instance serves: 307 to
// the same path and query at that instance's base URL, or 503 with
// Retry-After: 1 while nobody serves it (its shard is moving) or this
// instance is taking it over. Alone (no owner_url) every machine is served
// here.
#pragma once

#include <optional>
#include <string>

#include "http/http_api_options.hpp"
#include "http/http_request.hpp"
#include "http/http_server.hpp"

namespace vend::agent {

// Copyable; reads `options`, which must outlive it. Thread-safe when
// options.owner_url is.
class OwnerRedirect {
 public:
  explicit OwnerRedirect(const HttpApiOptions& options) : options_(options) {}

  // The answer to a core's not_owner about `key` (a machine, or an order id
  // no instance has): 307 to its owner, or 503.
  HttpReply redirect(const HttpRequest& req, const std::string& key) const;
  // The answer to a request about `device` when this instance does not
  // serve it (redirect()); nullopt when it does, or runs alone.
  std::optional<HttpReply> elsewhere(const HttpRequest& req, const std::string& device) const;
  // elsewhere() for the machine at path segment 2 (a per-machine route);
  // nullopt too when that id is malformed (the handler answers that).
  std::optional<HttpReply> not_served_here(const HttpRequest& req) const;

 private:
  const HttpApiOptions& options_;
};

}  // namespace vend::agent
