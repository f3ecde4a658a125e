#include "http/ops_routes.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/embedded_files.hpp"
#include "http/http_json.hpp"
#include "http/ops_series.hpp"
#include "http/ops_stream.hpp"

namespace vend::agent {

namespace {

constexpr int64_t kMaxFleetPage = 500;

struct FleetQuery {
  int64_t offset = 0;
  int64_t limit = 100;
  std::string filter = "all";
  std::string q;  // id substring
};

Result<FleetQuery> fleet_query(const HttpRequest& req) {
  FleetQuery out;
  for (const auto& [name, value] : req.params) {
    if (req.param_count(name) > 1) {
      return http::bad_request("query parameter '" + name + "' given more than once");
    }
    if (name == "offset" || name == "limit") {
      auto n = name == "offset" ? http::integer_param(name, value, 0, 1'000'000'000)
                                : http::integer_param(name, value, 1, kMaxFleetPage);
      if (!n.ok()) return n.error();
      (name == "offset" ? out.offset : out.limit) = *n;
    } else if (name == "filter") {
      static const char* const kFilters[] = {"all",          "online",   "offline",
                                             "out_of_stock", "mismatch", "backlog"};
      if (std::find(std::begin(kFilters), std::end(kFilters), value) == std::end(kFilters)) {
        return http::bad_request(
            "query parameter 'filter' must be all, online, offline, out_of_stock, mismatch or "
            "backlog");
      }
      out.filter = value;
    } else if (name == "q") {
      if (value.size() > 128) return http::bad_request("query parameter 'q' is over 128 bytes");
      out.q = value;
    } else {
      return http::bad_request("unknown query parameter '" + name + "'");
    }
  }
  return out;
}

int empty_slots(const ops::DeviceStatus& d) {
  return static_cast<int>(
      std::count_if(d.slots.begin(), d.slots.end(), [](const auto& s) { return s.pool == 0; }));
}

bool mismatch(const ops::DeviceStatus& d) {
  return d.last_verdict == "alert" || d.last_verdict == "pending";
}

bool backlog(const ops::DeviceStatus& d) { return d.outbox_depth > 0 || d.unacked_events > 0; }

bool matches(const ops::DeviceStatus& d, const FleetQuery& q) {
  if (!q.q.empty() && d.device.find(q.q) == std::string::npos) return false;
  if (q.filter == "online") return d.online;
  if (q.filter == "offline") return !d.online;
  if (q.filter == "out_of_stock") return empty_slots(d) > 0;
  if (q.filter == "mismatch") return mismatch(d);
  if (q.filter == "backlog") return backlog(d);
  return true;
}

http::Json fleet_row(const ops::DeviceStatus& d) {
  int64_t pool = 0, in_flight = 0, sold = 0, burned = 0;
  http::Json stock = http::Json::array();
  for (const auto& s : d.slots) {
    stock.push_back({{"slot", s.slot}, {"pool", s.pool}, {"capacity", s.capacity}});
    pool += s.pool;
    in_flight += s.reserved + s.dispatched;
    sold += s.sold;
    burned += s.burned;
  }
  http::Json row = {{"id", d.device},
                    {"online", d.online},
                    {"last_seen_ms", d.last_seen_ms},
                    {"clock_skew_ms", nullptr},
                    {"slots", d.slots.size()},
                    {"empty_slots", empty_slots(d)},
                    {"pool", pool},
                    {"in_flight", in_flight},
                    {"sold", sold},
                    {"burned", burned},
                    {"outbox_depth", d.outbox_depth},
                    {"unacked_events", d.unacked_events},
                    {"last_verdict", d.last_verdict},
                    {"stock", std::move(stock)}};
  if (d.clock_skew_ms) row["clock_skew_ms"] = *d.clock_skew_ms;
  return row;
}

http::Json fleet_summary(const std::vector<ops::DeviceStatus>& all) {
  int64_t online = 0, out_of_stock = 0, empty = 0, mismatches = 0, backlogged = 0;
  uint64_t outbox = 0, unacked = 0;
  for (const auto& d : all) {
    int e = empty_slots(d);
    online += d.online ? 1 : 0;
    out_of_stock += e > 0 ? 1 : 0;
    empty += e;
    mismatches += mismatch(d) ? 1 : 0;
    backlogged += backlog(d) ? 1 : 0;
    outbox += d.outbox_depth;
    unacked += d.unacked_events;
  }
  auto n = static_cast<int64_t>(all.size());
  return {{"devices", n},
          {"online", online},
          {"offline", n - online},
          {"out_of_stock", out_of_stock},
          {"empty_slots", empty},
          {"mismatches", mismatches},
          {"backlogged", backlogged},
          {"outbox_total", outbox},
          {"unacked_total", unacked}};
}

std::string content_type_of(std::string_view name) {
  auto ends = [&](std::string_view ext) {
    return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

const console::EmbeddedFile* find_file(std::string_view name) {
  for (size_t i = 0; i < console::kEmbeddedFileCount; ++i) {
    if (name == console::kEmbeddedFiles[i].name) return &console::kEmbeddedFiles[i];
  }
  return nullptr;
}

// If-None-Match holds `etag` (or "*"), compared weakly.
bool not_modified(const HttpRequest& req, const std::string& etag) {
  for (size_t i = 0; i < req.header_count("If-None-Match"); ++i) {
    std::string header = req.header("If-None-Match", i);
    if (header.find('*') != std::string::npos || header.find(etag) != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace

void OpsRoutes::add_routes(Router& router) {
  const Access op = Access::kOperator;
  router.add("GET", "/v1/fleet", op, route_to(this, &OpsRoutes::fleet));
  router.add("GET", "/v1/fleet/summary", op, route_to(this, &OpsRoutes::fleet_counts));
  router.add("GET", "/v1/alerts", op, route_to(this, &OpsRoutes::list_alerts));
  router.add("GET", "/v1/ops/stream", op, route_to(this, &OpsRoutes::ops_stream));
  router.add("GET", "/v1/ops/series", op, route_to(this, &OpsRoutes::ops_series));
  router.add("GET", "/console", Access::kPublic, route_to(this, &OpsRoutes::console));
  router.add("GET", "/console/{file}", Access::kPublic, route_to(this, &OpsRoutes::console));
}

Result<HttpReply> OpsRoutes::ops_stream(const HttpRequest&) {
  if (options_.ops_hub == nullptr) return make_error("not_found", "this agent has no event stream");
  auto stream = options_.ops_hub->subscribe();
  if (!stream.ok()) return stream.error();
  HttpReply reply{200, "", "text/event-stream; charset=utf-8"};
  reply.stream = std::move(stream).value();
  return reply;
}

Result<HttpReply> OpsRoutes::ops_series(const HttpRequest&) {
  if (options_.ops_series == nullptr) return make_error("not_found", "this agent keeps no series");
  return HttpReply{200, options_.ops_series->render()};
}

// O(devices) per request, one core step; sorted by id.
Result<HttpReply> OpsRoutes::fleet(const HttpRequest& req) {
  auto query = fleet_query(req);
  if (!query.ok()) return query.error();
  std::vector<ops::DeviceStatus> all = core_.device_statuses();
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a.device < b.device; });
  http::Json rows = http::Json::array();
  int64_t matching = 0;
  for (const auto& d : all) {
    if (!matches(d, *query)) continue;
    if (matching >= query->offset && matching < query->offset + query->limit) {
      rows.push_back(fleet_row(d));
    }
    ++matching;
  }
  http::Json body = {{"summary", fleet_summary(all)}, {"total", matching},
                     {"offset", query->offset},       {"limit", query->limit},
                     {"filter", query->filter},       {"devices", std::move(rows)}};
  return HttpReply{200, body.dump()};
}

Result<HttpReply> OpsRoutes::list_alerts(const HttpRequest& req) {
  if (!req.params.empty()) return http::bad_request("GET /v1/alerts takes no parameters");
  http::Json list = http::Json::array();
  for (const ops::Alert& a : core_.active_alerts()) list.push_back(http::alert_json(a));
  return HttpReply{200, http::Json{{"alerts", std::move(list)}}.dump()};
}

Result<HttpReply> OpsRoutes::fleet_counts(const HttpRequest& req) {
  if (!req.params.empty()) return http::bad_request("GET /v1/fleet/summary takes no parameters");
  return HttpReply{200, fleet_summary(core_.device_statuses()).dump()};
}

// GET /console redirects to /console/; /console/ is index.html. The files
// change only with the binary: revalidated (no-cache) by their ETag.
Result<HttpReply> OpsRoutes::console(const HttpRequest& req) {
  if (req.path == "/console") {
    HttpReply moved{308, "", "text/plain"};
    moved.headers.emplace_back("Location", "/console/");
    return moved;
  }
  std::string name(http::path_segment(req.path, 1));  // /console/{file}
  if (name.empty()) name = "index.html";
  const console::EmbeddedFile* file = find_file(name);
  if (file == nullptr) return make_error("not_found", "no console file '" + name + "'");
  std::string etag = "\"" + std::string(file->sha256).substr(0, 32) + "\"";
  HttpReply reply{200, std::string(file->bytes, file->size), content_type_of(name)};
  if (not_modified(req, etag)) reply = HttpReply{304, "", ""};
  reply.headers.emplace_back("ETag", etag);
  reply.headers.emplace_back("Cache-Control", "no-cache");
  reply.headers.emplace_back("X-Content-Type-Options", "nosniff");
  reply.headers.emplace_back("Content-Security-Policy",
                             "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
  return reply;
}

}  // namespace vend::agent
