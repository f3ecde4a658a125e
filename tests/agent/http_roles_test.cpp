// Operators as people over HTTP: every operator route of docs/openapi.yaml
// (its x-vend-role) is the router's table, and each refuses the roles
// below it (403 forbidden naming the role), a request without a token
// (401) and a restocker outside its machines (403), and admits the roles
// it names; the audit trail records who did what, in the change's commit.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <tuple>

#include "http_api_rig.hpp"

namespace vend::agent {
namespace {

struct DocRoute {
  std::string method;  // "GET"
  std::string path;    // /v1/devices/{}/restock
  std::string role;    // x-vend-role: viewer | restocker | support | admin
  bool operator<(const DocRoute& o) const {
    return std::tie(method, path, role) < std::tie(o.method, o.path, o.role);
  }
  bool operator==(const DocRoute& o) const {
    return std::tie(method, path, role) == std::tie(o.method, o.path, o.role);
  }
};

std::string generic(const std::string& path) {
  return std::regex_replace(path, std::regex("\\{[^}]*\\}"), "{}");
}

// The operations of docs/openapi.yaml with `security: - operatorBearer`,
// each with its x-vend-role (read line by line: the file's own layout).
std::set<DocRoute> openapi_operator_routes() {
  const char* root = std::getenv("VEND_SOURCE_DIR");
  REQUIRE_MESSAGE(root != nullptr, "run through ctest (VEND_SOURCE_DIR unset)");
  std::ifstream file(std::string(root) + "/docs/openapi.yaml");
  REQUIRE(file);
  std::regex path_re("^  (/[^:]*):\\s*$"), method_re("^    (get|post|put|delete):\\s*$");
  std::regex role_re("^      x-vend-role: (\\w+)\\s*$");
  std::set<DocRoute> out;
  std::string line, path, method, role;
  bool bearer = false;
  auto flush = [&] {
    if (!method.empty() && bearer) {
      INFO(method << " " << path);
      CHECK_MESSAGE(!role.empty(), "an operator operation without x-vend-role");
      out.insert({method, generic(path), role});
    }
    method.clear();
    role.clear();
    bearer = false;
  };
  std::smatch m;
  while (std::getline(file, line)) {
    if (line.rfind("components:", 0) == 0) break;
    if (std::regex_match(line, m, path_re)) {
      flush();
      path = m[1];
    } else if (std::regex_match(line, m, method_re)) {
      flush();
      method = m[1];
      for (char& c : method) c = static_cast<char>(std::toupper(c));
    } else if (std::regex_match(line, m, role_re)) {
      role = m[1];
    } else if (line.find("- operatorBearer: []") != std::string::npos) {
      bearer = true;
    }
  }
  flush();
  return out;
}

const char* role_of(Access access) {
  switch (access) {
    case Access::kRestock: return "restocker";
    case Access::kSupport: return "support";
    case Access::kAdmin: return "admin";
    default: return "viewer";
  }
}

std::set<DocRoute> router_operator_routes(const HttpApi& api) {
  std::set<DocRoute> out;
  for (const RouteInfo& r : api.routes()) {
    if (r.access != Access::kPublic) out.insert({r.method, generic(r.pattern), role_of(r.access)});
  }
  return out;
}

// A generic() path filled: the first {} with `device` (every operator
// route's first parameter names a machine, an order, an account or a
// token), any later one with 1 (a slot).
std::string fill(const std::string& path, const std::string& device) {
  std::string out = std::regex_replace(path, std::regex("\\{\\}"), device,
                                       std::regex_constants::format_first_only);
  return std::regex_replace(out, std::regex("\\{\\}"), "1");
}

httplib::Result call(Agent& agent, const std::string& method, const std::string& path,
                     const httplib::Headers& headers) {
  auto c = agent.client();
  // A body no route accepts: an admitted POST or PUT is 400 (or 404) and
  // changes nothing.
  const std::string junk = R"({"field_no_route_takes":1})";
  if (method == "GET") return c.Get(path, headers);
  if (method == "PUT") return c.Put(path, headers, junk, "application/json");
  return c.Post(path, headers, junk, "application/json");
}

}  // namespace

TEST_CASE("every operator route of docs/openapi.yaml checks its role and machine scope") {
  Agent agent;
  Machine machine;
  stock_machine(agent, machine);
  std::set<DocRoute> documented = openapi_operator_routes();
  std::set<DocRoute> routed = router_operator_routes(agent.api());
  CHECK(documented.size() > 25);
  for (const DocRoute& r : routed) {
    CHECK_MESSAGE(documented.count(r) == 1, "not in docs/openapi.yaml as routed: ", r.method, " ",
                  r.path, " ", r.role);
  }
  for (const DocRoute& r : documented) {
    CHECK_MESSAGE(routed.count(r) == 1, "documented, not routed so: ", r.method, " ", r.path, " ",
                  r.role);
  }

  const std::vector<std::pair<Role, httplib::Headers>> callers = {
      {Role::kViewer, agent.bearer_of("vera", Role::kViewer)},
      {Role::kRestocker, agent.bearer_of("rex", Role::kRestocker, {kDevice})},
      {Role::kSupport, agent.bearer_of("sue", Role::kSupport)},
      {Role::kAdmin, agent.bearer_of("ada", Role::kAdmin)}};
  for (const DocRoute& r : documented) {
    std::string path = fill(r.path, kDevice);
    INFO(r.method << " " << path << " (" << r.role << ")");
    expect_error(call(agent, r.method, path, {}), 401, "unauthorized");
    expect_error(
        call(agent, r.method, path, {{"Authorization", "Bearer vend_" + std::string(64, 'f')}}),
        401, "unauthorized");
    for (const auto& [role, headers] : callers) {
      INFO("as " << to_string(role));
      bool admitted = r.role == "viewer" || r.role == to_string(role) || role == Role::kAdmin;
      if (!admitted) {
        expect_error(call(agent, r.method, path, headers), 403, "forbidden", r.role);
        continue;
      }
      if (r.path == "/v1/ops/stream") continue;  // admitted: it streams until closed
      auto reply = call(agent, r.method, path, headers);
      REQUIRE(reply);
      CHECK_MESSAGE(reply->status != 401, reply->body);
      CHECK_MESSAGE(reply->status != 403, reply->body);
    }
    if (r.role == "restocker") {  // another machine than rex's
      expect_error(call(agent, r.method, fill(r.path, "vm-other"), callers[1].second), 403,
                   "forbidden", "not machine 'vm-other'");
    }
  }
}

TEST_CASE("operator actions land in the audit trail with their change, by account") {
  Agent agent;
  Machine machine;
  stock_machine(agent, machine);
  auto rex = agent.bearer_of("rex", Role::kRestocker, {kDevice});
  auto ada = agent.bearer_of("ada", Role::kAdmin);
  auto r = agent.client().Post("/v1/devices/vm-http-1/restock", rex, R"({"slot":1,"count":4})",
                               "application/json");
  REQUIRE(r);
  REQUIRE_MESSAGE(r->status == 202, r->body);
  Json restock = Json::parse(r->body);
  r = agent.client().Put("/v1/devices/vm-http-1/slots/1", ada,
                         R"({"product":"lemonade","price_cents":250})", "application/json");
  REQUIRE_MESSAGE(r->status == 200, r->body);
  // A refused action leaves no row.
  expect_error(agent.client().Post("/v1/devices/vm-http-1/restock", rex, R"({"slot":9,"count":1})",
                                   "application/json"),
               404, "unknown_slot");

  auto audit = agent.client().Get("/v1/audit?device=vm-http-1", ada);
  Json rows = body_of(audit)["entries"];
  std::vector<std::string> actions;
  for (const Json& e : rows) {
    if (e["account"] != "operator-token") actions.push_back(e["action"]);
  }
  CHECK(actions == std::vector<std::string>{"restock", "set_slot"});
  Json restocked = rows[rows.size() - 2];
  CHECK(restocked["account"] == "rex");
  CHECK(restocked["peer"] == "127.0.0.1");
  CHECK(restocked["detail"] == Json{{"slot", 1}, {"count", 4}});
  Json slot = rows.back();
  CHECK(slot["detail"]["before"]["product"] == "cola");
  CHECK(slot["detail"]["after"]["product"] == "lemonade");
  // Viewers and the others may not read it; filters and paging; JSON lines.
  expect_error(agent.client().Get("/v1/audit", rex), 403, "forbidden", "admin");
  Json by_rex = body_of(agent.client().Get("/v1/audit?account=rex", ada));
  REQUIRE(by_rex["entries"].size() == 1);
  Json page = body_of(agent.client().Get("/v1/audit?limit=1", ada));
  REQUIRE(page["entries"].size() == 1);
  CHECK(page["next_after"] == page["entries"][0]["id"]);
  auto lines = agent.client().Get("/v1/audit/export?account=ada", ada);
  REQUIRE(lines);
  CHECK(lines->get_header_value("Content-Type") == "application/x-ndjson");
  size_t n = 0;
  std::istringstream in(lines->body);
  for (std::string line; std::getline(in, line); ++n) CHECK(Json::parse(line)["account"] == "ada");
  CHECK(n == 1);
  expect_error(agent.client().Get("/v1/audit?limit=0", ada), 400, "bad_request", "limit");
  expect_error(agent.client().Get("/v1/audit?who=x", ada), 400, "bad_request", "who");
}

TEST_CASE("tokens over HTTP: own or admin's, shown once, revocable; login with backoff") {
  Agent agent;
  auto vera = agent.bearer_of("vera", Role::kViewer);
  auto ada = agent.bearer_of("ada", Role::kAdmin);
  Json me = body_of(agent.client().Get("/v1/me", vera));
  CHECK(me == Json{{"account", "vera"}, {"role", "viewer"}, {"machines", Json::array()}});
  // Her own token; not one of ada's.
  auto r = agent.client().Post("/v1/tokens", vera, R"({"label":"laptop","ttl_days":7})",
                               "application/json");
  REQUIRE_MESSAGE(r->status == 201, r->body);
  Json issued = Json::parse(r->body);
  CHECK(issued["token"].get<std::string>().rfind("vend_", 0) == 0);
  expect_error(agent.client().Post("/v1/tokens", vera, R"({"account":"ada"})", "application/json"),
               403, "forbidden", "own tokens");
  Json listed = body_of(agent.client().Get("/v1/tokens", vera));
  CHECK(listed["tokens"].size() == 2);
  CHECK(listed.dump().find(issued["token"].get<std::string>()) == std::string::npos);
  httplib::Headers laptop = {{"Authorization", "Bearer " + issued["token"].get<std::string>()}};
  CHECK(body_of(agent.client().Get("/v1/me", laptop))["account"] == "vera");
  r = agent.client().Post("/v1/tokens/" + issued["id"].get<std::string>() + "/revoke", ada);
  REQUIRE_MESSAGE(r->status == 200, r->body);
  expect_error(agent.client().Get("/v1/me", laptop), 401, "unauthorized", "revoked");
  // Accounts are admin's.
  r = agent.client().Post("/v1/accounts", ada,
                          R"({"name":"sam","role":"support","password":"correct horse battery"})",
                          "application/json");
  REQUIRE_MESSAGE(r->status == 201, r->body);
  expect_error(agent.client().Post("/v1/accounts", vera, R"({"name":"x","role":"admin"})",
                                   "application/json"),
               403, "forbidden", "admin");
  // Login: a password gives a token; five failures block the name.
  r = agent.client().Post("/v1/login", R"({"name":"sam","password":"correct horse battery"})",
                          "application/json");
  REQUIRE_MESSAGE(r->status == 201, r->body);
  CHECK(Json::parse(r->body)["role"] == "support");
  for (int i = 0; i < 5; ++i) {
    expect_error(agent.client().Post("/v1/login", R"({"name":"sam","password":"wrong password!"})",
                                     "application/json"),
                 401, "unauthorized", "wrong account name or password");
  }
  auto blocked = agent.client().Post(
      "/v1/login", R"({"name":"sam","password":"correct horse battery"})", "application/json");
  REQUIRE(blocked);
  CHECK(blocked->status == 429);
  CHECK(blocked->get_header_value("Retry-After") != "");
  // Disabled: its tokens stop at once.
  r = agent.client().Post("/v1/accounts/vera/disable", ada);
  REQUIRE_MESSAGE(r->status == 200, r->body);
  expect_error(agent.client().Get("/v1/me", vera), 401, "unauthorized", "disabled");
}

}  // namespace vend::agent
