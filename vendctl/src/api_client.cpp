#include "api_client.hpp"

#include <httplib.h>

#include <exception>

namespace vend::ctl {

namespace {

std::string why(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection: return "connection refused (is vend-agent running there?)";
    case httplib::Error::ConnectionTimeout: return "connection timed out";
    case httplib::Error::Read: return "no answer (read timeout or connection closed)";
    default: return httplib::to_string(error);
  }
}

}  // namespace

ApiClient::ApiClient(std::string base_url, std::string token)
    : base_url_(std::move(base_url)), token_(std::move(token)) {
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
  try {
    client_ = std::make_unique<httplib::Client>(base_url_);
    client_->set_connection_timeout(5, 0);
    client_->set_read_timeout(30, 0);
    client_->set_write_timeout(10, 0);
  } catch (const std::exception&) {
    client_.reset();  // reported by send()
  }
}

ApiClient::~ApiClient() = default;

template <typename Send>
Result<ApiAnswer> ApiClient::send(const std::string& path, Send send_request) {
  if (!client_ || !client_->is_valid()) {
    return make_error("bad_usage", "--api '" + base_url_ + "' is not a usable http:// URL");
  }
  httplib::Headers headers;
  if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
  httplib::Result r = send_request(headers);
  if (!r)
    return make_error("unreachable", "cannot reach " + base_url_ + path + ": " + why(r.error()));
  return ApiAnswer{r->status, r->body};
}

Result<ApiAnswer> ApiClient::get(const std::string& path) {
  return send(path, [&](const httplib::Headers& h) { return client_->Get(path, h); });
}

Result<ApiAnswer> ApiClient::post(const std::string& path, const std::string& json_body) {
  return send(path, [&](const httplib::Headers& h) {
    return client_->Post(path, h, json_body, "application/json");
  });
}

}  // namespace vend::ctl
