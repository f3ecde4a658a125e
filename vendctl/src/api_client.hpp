// A small client of the agent's HTTP API over cpp-httplib: JSON bodies, the
// operator bearer token, and errors as values. Not thread-safe; one per
// command. Non-copyable.
#pragma once

#include <memory>
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
  Result<ApiAnswer> get(const std::string& path);
  Result<ApiAnswer> post(const std::string& path, const std::string& json_body);

 private:
  template <typename Send>
  Result<ApiAnswer> send(const std::string& path, Send send_request);

  std::string base_url_;
  std::string token_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace vend::ctl
