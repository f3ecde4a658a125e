// HttpRequest: one request as HttpServer hands it to its handler and as the
// route handlers read it. A plain value of our own (the server is
// libmicrohttpd; cpp-httplib is only the agent's HTTP client library).
//
// Header names compare case-insensitively (RFC 9110 5.1) and keep every
// repetition, in the order received within one name; query parameters keep
// every repetition too, sorted by name (then in the order received).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "contracts/accounts.hpp"

namespace vend::agent {

// Orders header names by their ASCII lower case.
struct CaseInsensitiveLess {
  bool operator()(std::string_view a, std::string_view b) const;
  // The name std::map's heterogeneous lookup looks for.
  using is_transparent = void;  // NOLINT(readability-identifier-naming)
};

struct HttpRequest {
  using Headers = std::multimap<std::string, std::string, CaseInsensitiveLess>;
  using Params = std::multimap<std::string, std::string, std::less<>>;

  std::string method;   // as received: "GET", "POST", "HEAD", ...
  std::string path;     // percent-decoded, without the query
  std::string target;   // path, then "?name=value&..." of `params` in their order
  std::string version;  // "HTTP/1.1"
  Headers headers;
  Params params;  // the query's parameters, percent-decoded
  std::string body;
  std::string remote_addr;  // the TCP peer's address
  // Who is calling an operator route, set by the Router once authorized;
  // empty on public routes.
  std::optional<Caller> caller;

  bool has_header(std::string_view name) const { return headers.count(name) > 0; }
  size_t header_count(std::string_view name) const { return headers.count(name); }
  // The `i`th value of header `name`; empty when it has fewer.
  std::string header(std::string_view name, size_t i = 0) const;
  size_t param_count(std::string_view name) const { return params.count(name); }
};

}  // namespace vend::agent
