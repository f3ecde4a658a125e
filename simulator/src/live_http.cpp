#include "live_http.hpp"

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "vend/crypto.hpp"
#include "vend/webhook.hpp"

namespace vend::sim {

namespace {

using Json = nlohmann::json;

Result<Json> parse_json(const std::string& body) {
  Json j = Json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error("http_error", "bad JSON reply");
  return j;
}

Result<OrderReply> order_of(const Result<std::string>& body) {
  if (!body.ok()) return body.error();
  auto j = parse_json(*body);
  if (!j.ok()) return j.error();
  OrderReply o;
  o.id = j->value("id", "");
  o.state = j->value("state", "");
  o.price_cents = j->value("price_cents", int64_t{0});
  o.created_ms = j->value("created_ms", int64_t{0});
  o.updated_ms = j->value("updated_ms", int64_t{0});
  return o;
}

}  // namespace

Result<AgentEndpoint> AgentEndpoint::parse(const std::string& url) {
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return make_error("bad_usage", "--agent: expected http://host:port, got '" + url + "'");
  }
  AgentEndpoint e;
  e.host = rest.substr(0, colon);
  e.port = std::atoi(rest.substr(colon + 1).c_str());
  if (e.port <= 0 || e.port > 65535) return make_error("bad_usage", "--agent: bad port in " + url);
  return e;
}

AgentClient::AgentClient(AgentEndpoint endpoint, std::string client_id)
    : endpoint_(std::move(endpoint)),
      client_id_(std::move(client_id)),
      client_(std::make_unique<httplib::Client>(endpoint_.host, endpoint_.port)) {
  client_->set_connection_timeout(std::chrono::seconds(2));
  // No keep-alive: a connection kept across an agent restart would hang until
  // the read timeout. A fresh loopback connection per request costs little.
  client_->set_read_timeout(std::chrono::seconds(10));
  client_->set_keep_alive(false);
}

AgentClient::~AgentClient() = default;

Result<std::string> AgentClient::call(const char* method, const std::string& path,
                                      const std::string& body, bool operator_auth,
                                      const std::string& signed_for) {
  httplib::Headers headers;
  if (operator_auth) headers.emplace("Authorization", "Bearer " + endpoint_.operator_token);
  if (!client_id_.empty()) headers.emplace("X-Client-Id", client_id_);
  if (!signed_for.empty()) {
    int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    headers.emplace(webhook::kHeader,
                    webhook::sign(endpoint_.gateway_secret, now_s, signed_for, body));
  }
  httplib::Result res = std::string(method) == "GET"
                            ? client_->Get(path, headers)
                            : client_->Post(path, headers, body, "application/json");
  if (!res)
    return make_error("http_error",
                      std::string(method) + " " + path + ": " + httplib::to_string(res.error()));
  if (res->status >= 200 && res->status < 300) return res->body;
  auto j = parse_json(res->body);
  std::string code = "http_" + std::to_string(res->status);
  std::string message = res->body;
  if (j.ok() && j->contains("error") && (*j)["error"].is_object()) {
    code = (*j)["error"].value("code", code);
    message = (*j)["error"].value("message", message);
  }
  return make_error(code, message);
}

Result<OrderReply> AgentClient::create_order(const std::string& device, int slot) {
  return order_of(
      call("POST", "/v1/orders", Json{{"device", device}, {"slot", slot}}.dump(), false, ""));
}

Result<OrderReply> AgentClient::pay(const std::string& order_id, const std::string& payment_id,
                                    int64_t amount_cents) {
  std::string body = Json{{"payment_id", payment_id}, {"amount_cents", amount_cents}}.dump();
  return order_of(call("POST", "/v1/orders/" + order_id + "/payment", body, false, order_id));
}

Result<OrderReply> AgentClient::get_order(const std::string& order_id) {
  return order_of(call("GET", "/v1/orders/" + order_id, "", false, ""));
}

Result<std::string> AgentClient::provision(const std::string& device,
                                           const std::vector<SlotDef>& slots) {
  Json list = Json::array();
  for (const auto& s : slots) {
    list.push_back({{"slot", s.slot},
                    {"product", s.product},
                    {"price_cents", s.price_cents},
                    {"capacity", s.capacity}});
  }
  auto body = call("POST", "/v1/devices", Json{{"id", device}, {"slots", list}}.dump(), true, "");
  if (!body.ok()) return body.error();
  auto j = parse_json(*body);
  if (!j.ok()) return j.error();
  return j->value("key", "");
}

Result<std::vector<SlotReply>> AgentClient::slots(const std::string& device) {
  auto body = call("GET", "/v1/devices/" + device + "/slots", "", true, "");
  if (!body.ok()) return body.error();
  auto j = parse_json(*body);
  if (!j.ok()) return j.error();
  std::vector<SlotReply> out;
  for (const auto& s : j->value("slots", Json::array())) {
    out.push_back(SlotReply{s.value("slot", 0), s.value("capacity", 0), s.value("pool", int64_t{0}),
                            s.value("reserved", int64_t{0}), s.value("dispatched", int64_t{0})});
  }
  return out;
}

Status AgentClient::restock(const std::string& device, int slot, int count) {
  auto body = call("POST", "/v1/devices/" + device + "/restock",
                   Json{{"slot", slot}, {"count", count}}.dump(), true, "");
  if (!body.ok()) return body.error();
  return {};
}

}  // namespace vend::sim
