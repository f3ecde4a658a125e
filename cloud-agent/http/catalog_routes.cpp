#include "http/catalog_routes.hpp"

#include <string_view>

#include "http/http_json.hpp"
#include "vend/crypto.hpp"

namespace vend::agent {

namespace {

// The body's strong validator: a quoted SHA-256 prefix (128 bits) of it.
std::string etag_of(const std::string& body) {
  return "\"" + crypto::sha256_hex(body).substr(0, 32) + "\"";
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// If-None-Match: "*" or a comma-separated list of entity tags, compared
// weakly (RFC 9110 13.1.2: a W/ prefix is ignored).
bool none_match_fails(const HttpRequest& req, const std::string& etag) {
  for (size_t i = 0; i < req.header_count("If-None-Match"); ++i) {
    std::string header = req.header("If-None-Match", i);
    std::string_view rest = header;
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string_view tag = trim(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (tag.substr(0, 2) == "W/") tag.remove_prefix(2);
      if (tag == "*" || tag == etag) return true;
    }
  }
  return false;
}

}  // namespace

void CatalogRoutes::add_routes(Router& router) {
  router.add("GET", "/v1/machines/{id}/catalog", Access::kPublic,
             route_to(this, &CatalogRoutes::catalog), /*per_machine=*/true);
}

// Public: products, prices and what can be bought now. Never a token, and
// nothing an operator view has beyond that (reserved, sold, burned).
Result<HttpReply> CatalogRoutes::catalog(const HttpRequest& req) {
  std::string id(http::path_segment(req.path, 2));  // /v1/machines/{id}/catalog
  if (!http::is_valid_id(id)) return make_error("not_found", "no machine '" + id + "'");
  auto view = core_.catalog(id);
  if (!view.ok()) {
    if (view.error().code == "not_found") return make_error("not_found", "no machine '" + id + "'");
    return view.error();
  }
  http::Json slots = http::Json::array();
  for (const SlotView& s : view->slots) {
    slots.push_back({{"slot", s.slot},
                     {"product", s.product},
                     {"price_cents", s.price_cents},
                     {"available", s.pool},
                     {"sellable", view->online && s.pool > 0}});
  }
  http::Json body = {{"machine", view->device}, {"online", view->online}, {"slots", slots}};
  HttpReply reply{200, body.dump()};
  std::string etag = etag_of(reply.body);
  reply.headers = {{"ETag", etag}, {"Cache-Control", "no-cache"}};
  if (none_match_fails(req, etag)) {
    reply.status = 304;  // the app's copy is current
    reply.body.clear();
  }
  return reply;
}

}  // namespace vend::agent
