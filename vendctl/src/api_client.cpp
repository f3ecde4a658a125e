#include "api_client.hpp"

#include <httplib.h>

#include <exception>
#include <nlohmann/json.hpp>

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

std::string without_trailing_slash(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

}  // namespace

std::optional<std::pair<std::string, std::string>> split_url(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return std::nullopt;
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return std::nullopt;
  const size_t path = url.find_first_of("/?", scheme_end + 3);
  if (path == scheme_end + 3) return std::nullopt;  // no host
  if (path == std::string::npos) return std::make_pair(url, std::string("/"));
  std::string target = url.substr(path);
  if (target[0] == '?') target = "/" + target;
  return std::make_pair(url.substr(0, path), target);
}

ApiClient::ApiClient(std::string base_url, std::string token)
    : base_url_(without_trailing_slash(std::move(base_url))), token_(std::move(token)) {}

ApiClient::~ApiClient() = default;

httplib::Client* ApiClient::client_for(const std::string& origin) {
  auto it = clients_.find(origin);
  if (it != clients_.end()) return it->second.get();
  std::unique_ptr<httplib::Client> client;
  try {
    client = std::make_unique<httplib::Client>(origin);
    client->set_connection_timeout(5, 0);
    client->set_read_timeout(30, 0);
    client->set_write_timeout(10, 0);
  } catch (const std::exception&) {
    client.reset();  // reported by the caller
  }
  if (!client || !client->is_valid()) return nullptr;
  return clients_.emplace(origin, std::move(client)).first->second.get();
}

Result<ApiAnswer> ApiClient::send_once(const std::string& origin, const Request& request,
                                       std::optional<std::string>& location) {
  httplib::Client* client = client_for(origin);
  if (client == nullptr) {
    return make_error("bad_usage", "--api '" + origin + "' is not a usable http:// URL");
  }
  httplib::Headers headers;
  if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
  httplib::Result r = request.post
                          ? client->Post(request.target, headers, request.body, "application/json")
                          : client->Get(request.target, headers);
  if (!r) {
    return make_error("unreachable",
                      "cannot reach " + origin + request.target + ": " + why(r.error()));
  }
  location.reset();
  if ((r->status == 307 || r->status == 308) && r->has_header("Location")) {
    location = r->get_header_value("Location");
  }
  return ApiAnswer{r->status, r->body};
}

Status ApiClient::check_member(const std::string& origin) {
  if (origin == base_url_) return {};
  if (!members_) {
    std::optional<std::string> ignored;
    auto answer = send_once(base_url_, Request{false, "/v1/cluster", ""}, ignored);
    if (!answer.ok()) return answer.error();
    members_.emplace();
    nlohmann::json view = nlohmann::json::parse(answer->body, nullptr, false);
    if (answer->status == 200 && view.is_object() && view["members"].is_array()) {
      for (const auto& m : view["members"]) {
        if (m.is_object() && m["url"].is_string()) {
          members_->insert(without_trailing_slash(m["url"].get<std::string>()));
        }
      }
    }
  }
  if (members_->contains(origin)) return {};
  return make_error("redirect_refused", "the agent redirected to " + origin +
                                            ", which is not a member of its cluster "
                                            "(GET " +
                                            base_url_ + "/v1/cluster); not followed");
}

Result<ApiAnswer> ApiClient::send(Request request) {
  std::string origin = base_url_;
  for (int hop = 0;; ++hop) {
    std::optional<std::string> location;
    auto answer = send_once(origin, request, location);
    if (!answer.ok() || !location) return answer;
    if (hop == kMaxRedirects) {
      return make_error("redirect_refused", "more than " + std::to_string(kMaxRedirects) +
                                                " redirects, the last to " + *location);
    }
    std::pair<std::string, std::string> next{origin, *location};
    if (location->empty() || location->front() != '/') {
      auto split = split_url(*location);
      if (!split) {
        return make_error("bad_answer", "the agent redirected to '" + *location +
                                            "', which is not an http(s) URL");
      }
      next = *split;
    }
    if (Status s = check_member(without_trailing_slash(next.first)); !s.ok()) return s.error();
    origin = without_trailing_slash(next.first);
    request.target = next.second;
  }
}

Result<ApiAnswer> ApiClient::get(const std::string& path) { return send(Request{false, path, ""}); }

Result<ApiAnswer> ApiClient::post(const std::string& path, const std::string& json_body) {
  return send(Request{true, path, json_body});
}

}  // namespace vend::ctl
