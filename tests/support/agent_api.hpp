// An HTTP client of one vend-agent on 127.0.0.1 for the tests that drive
// the real binary (what curl does in docs/agent.md): GET and POST with JSON
// bodies, the operator's bearer token on request, answers checked with
// doctest (a response must come; its status must be the one expected) and
// parsed as JSON. Read timeout 10 s. Not thread-safe: one per thread.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

namespace vend::test {

class AgentApi {
 public:
  explicit AgentApi(int port);

  // Operator calls carry "Authorization: Bearer <token>" from now on.
  void set_operator_token(const std::string& token);
  // Follows 307 redirects (several agents: a machine's owner answers).
  void follow_redirects();

  // The raw answer of "GET" (any other method is a POST of a JSON `body`);
  // empty when no response came.
  httplib::Result send(const std::string& method, const std::string& path,
                       const std::string& body = "", httplib::Headers headers = {},
                       bool as_operator = false);

  // send(), then json_of(..., expect).
  nlohmann::json call(const std::string& method, const std::string& path, const std::string& body,
                      int expect, httplib::Headers headers = {}, bool as_operator = false);
  nlohmann::json get(const std::string& path, int expect = 200, bool as_operator = false) {
    return call("GET", path, "", expect, {}, as_operator);
  }
  nlohmann::json post(const std::string& path, const std::string& body, int expect,
                      httplib::Headers headers = {}, bool as_operator = false) {
    return call("POST", path, body, expect, std::move(headers), as_operator);
  }
  nlohmann::json as_operator(const std::string& method, const std::string& path,
                             const std::string& body, int expect) {
    return call(method, path, body, expect, {}, true);
  }

  // REQUIREs a response with status `expect` (0: any, for polling) and
  // returns its body parsed as JSON; the body is in the failure message.
  static nlohmann::json json_of(const httplib::Result& r, int expect);

 private:
  httplib::Client client_;
  std::string bearer_;
};

}  // namespace vend::test
