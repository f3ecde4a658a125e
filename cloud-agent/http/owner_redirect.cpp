#include "http/owner_redirect.hpp"

#include "http/http_json.hpp"
#include "http/path_pattern.hpp"

namespace vend::agent {

HttpReply OwnerRedirect::redirect(const HttpRequest& req, const std::string& key) const {
  std::optional<std::string> owner;
  if (options_.owner_url) owner = options_.owner_url(key);
  // The key is a machine, or the id of an order no instance has (its
  // payment belongs to the owner of the id's shard).
  const std::string what = (key.rfind("ord-", 0) == 0 ? "order " : "machine ") + key;
  if (!owner || *owner == options_.self_url) {
    HttpReply reply{503, http::error_body("unavailable", what + " is moving between agent "
                                                                "instances; retry in a second")};
    reply.headers.emplace_back("Retry-After", "1");
    return reply;
  }
  std::string location = *owner + req.target;
  HttpReply reply{307, http::error_body("moved", what + " is served by " + *owner)};
  reply.headers.emplace_back("Location", location);
  return reply;
}

std::optional<HttpReply> OwnerRedirect::elsewhere(const HttpRequest& req,
                                                  const std::string& device) const {
  if (!options_.owner_url) return std::nullopt;
  auto owner = options_.owner_url(device);
  if (owner && *owner == options_.self_url) return std::nullopt;
  return redirect(req, device);
}

std::optional<HttpReply> OwnerRedirect::not_served_here(const HttpRequest& req) const {
  if (!options_.owner_url) return std::nullopt;
  std::string device(http::path_segment(req.path, 2));
  if (!http::is_valid_id(device)) return std::nullopt;
  return elsewhere(req, device);
}

}  // namespace vend::agent
