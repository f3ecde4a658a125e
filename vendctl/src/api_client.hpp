// A small client of the agent's HTTP API over cpp-httplib: JSON bodies, the
// operator bearer token, errors as values, and the redirects of several
// agents followed to a machine's owner. Not thread-safe; one per command.
// Non-copyable.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "vend/result.hpp"

namespace httplib {
class Client;
}

namespace vend::ctl {

struct ApiAnswer {
  int status = 0;
  std::string body;
};

class ApiClient {
 public:
  // `base_url` like "http://127.0.0.1:8080"; `token` "" sends no
  // Authorization header.
  ApiClient(std::string base_url, std::string token);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // Any HTTP answer is a value (check status); errors: "unreachable" naming
  // the URL and why (connection refused, timeout), "bad_usage" for a URL
  // httplib cannot use.
  //
  // A 307 or 308 (several agents: the machine is another instance's) is
  // followed, at most kMaxRedirects times, re-sending the method, body and
  // token -- only to a member of the cluster of `base_url`: the Location's
  // origin must be one of the member URLs that GET /v1/cluster of
  // `base_url` lists (asked once, with the token). Anywhere else is the
  // error "redirect_refused" naming the URL, and the token is not sent.
  Result<ApiAnswer> get(const std::string& path);
  Result<ApiAnswer> post(const std::string& path, const std::string& json_body);

  static constexpr int kMaxRedirects = 3;

 private:
  struct Request {
    bool post = false;
    std::string target;  // path and query
    std::string body;
  };
  // One request to `origin` (scheme://host[:port]), no redirect followed.
  Result<ApiAnswer> send_once(const std::string& origin, const Request& request,
                              std::optional<std::string>& location);
  Result<ApiAnswer> send(Request request);
  // OK when `origin` is a member of base_url_'s cluster (or base_url_ itself).
  Status check_member(const std::string& origin);
  httplib::Client* client_for(const std::string& origin);

  std::string base_url_;
  std::string token_;
  std::map<std::string, std::unique_ptr<httplib::Client>> clients_;  // by origin
  std::optional<std::set<std::string>> members_;                     // origins, once asked
};

// Splits an absolute http(s) URL into its origin (scheme://host[:port]) and
// its target (path and query, "/" when none); nullopt when it is not one.
std::optional<std::pair<std::string, std::string>> split_url(const std::string& url);

}  // namespace vend::ctl
