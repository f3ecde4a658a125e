#include "agent_api.hpp"

#include <doctest/doctest.h>

#include <utility>

namespace vend::test {

AgentApi::AgentApi(int port) : client_("127.0.0.1", port) { client_.set_read_timeout(10, 0); }

void AgentApi::set_operator_token(const std::string& token) { bearer_ = "Bearer " + token; }

void AgentApi::follow_redirects() { client_.set_follow_location(true); }

httplib::Result AgentApi::send(const std::string& method, const std::string& path,
                               const std::string& body, httplib::Headers headers,
                               bool as_operator) {
  if (as_operator) headers.emplace("Authorization", bearer_);
  if (method == "GET") return client_.Get(path.c_str(), headers);
  return client_.Post(path.c_str(), headers, body, "application/json");
}

nlohmann::json AgentApi::call(const std::string& method, const std::string& path,
                              const std::string& body, int expect, httplib::Headers headers,
                              bool as_operator) {
  return json_of(send(method, path, body, std::move(headers), as_operator), expect);
}

nlohmann::json AgentApi::json_of(const httplib::Result& r, int expect) {
  REQUIRE_MESSAGE(r, "no HTTP response: " << httplib::to_string(r.error()));
  INFO(r->body);
  if (expect != 0) REQUIRE(r->status == expect);
  return nlohmann::json::parse(r->body);
}

}  // namespace vend::test
