#include "live/live_http.hpp"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

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

Result<AgentEndpoint> AgentEndpoint::parse(const std::string& urls) {
  AgentEndpoint e;
  std::vector<AgentAddress> all;
  size_t from = 0;
  while (from <= urls.size()) {
    size_t comma = urls.find(',', from);
    std::string rest =
        urls.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    from = comma == std::string::npos ? urls.size() + 1 : comma + 1;
    if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
    while (!rest.empty() && rest.back() == '/') rest.pop_back();
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return make_error(
          "bad_usage",
          "--agent: expected http://host:port[,http://host:port...], got '" + urls + "'");
    }
    AgentAddress a{rest.substr(0, colon), std::atoi(rest.substr(colon + 1).c_str())};
    if (a.port <= 0 || a.port > 65535) {
      return make_error("bad_usage", "--agent: bad port in " + urls);
    }
    all.push_back(a);
  }
  e.host = all.front().host;
  e.port = all.front().port;
  e.more.assign(all.begin() + 1, all.end());
  return e;
}

std::vector<AgentAddress> AgentEndpoint::addresses() const {
  std::vector<AgentAddress> out{{host, port}};
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

namespace {

// Bounds of the retries with several agents: a failover takes the lease
// (3 s by default) plus a renewal round and the rebuild, so 20 s covers one
// with room; a paused agent costs at most the read timeout per attempt.
constexpr int kMaxAttempts = 24;
constexpr auto kRetryBudget = std::chrono::seconds(20);
constexpr auto kRoundPause = std::chrono::milliseconds(250);
constexpr auto kMaxRetryAfter = std::chrono::milliseconds(1000);

}  // namespace

AgentClient::AgentClient(AgentEndpoint endpoint, std::string client_id,
                         std::atomic<int64_t>* retried)
    : endpoint_(std::move(endpoint)), client_id_(std::move(client_id)), retried_(retried) {
  std::vector<AgentAddress> addresses = endpoint_.addresses();
  for (const AgentAddress& a : addresses) {
    auto client = std::make_unique<httplib::Client>(a.host, a.port);
    client->set_connection_timeout(std::chrono::seconds(2));
    // No keep-alive: a connection kept across an agent restart would hang
    // until the read timeout. A fresh loopback connection per request costs
    // little. With several agents a paused one should not hold a customer
    // long: another answers.
    client->set_read_timeout(std::chrono::seconds(addresses.size() > 1 ? 4 : 10));
    client->set_keep_alive(false);
    // 307 to the machine's owner. cpp-httplib copies the request, headers
    // (Authorization, Vend-Signature) and body included, for a 307.
    client->set_follow_location(true);
    clients_.push_back(std::move(client));
  }
  // Spread the clients' first requests over the agents.
  next_ = std::hash<std::string>{}(client_id_) % clients_.size();
}

AgentClient::~AgentClient() = default;

Result<std::string> AgentClient::call(const char* method, const std::string& path,
                                      const std::string& body, bool operator_auth,
                                      const std::string& signed_for) {
  auto deadline = std::chrono::steady_clock::now() + kRetryBudget;
  for (int attempt = 1;; ++attempt) {
    bool retry = false;
    Result<std::string> r = call_once(method, path, body, operator_auth, signed_for, retry);
    // One agent: its answer (or silence) is the result, as before clusters.
    if (!retry || clients_.size() == 1 || attempt >= kMaxAttempts ||
        std::chrono::steady_clock::now() >= deadline) {
      return r;
    }
    if (retried_ != nullptr) ++*retried_;
    if (attempt % clients_.size() == 0) std::this_thread::sleep_for(kRoundPause);
  }
}

Result<std::string> AgentClient::call_once(const char* method, const std::string& path,
                                           const std::string& body, bool operator_auth,
                                           const std::string& signed_for, bool& retry) {
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
  httplib::Client& client = *clients_[next_];
  next_ = (next_ + 1) % clients_.size();  // the next request, or this one's retry, goes on
  httplib::Result res = std::string(method) == "GET"
                            ? client.Get(path, headers)
                            : client.Post(path, headers, body, "application/json");
  if (!res) {
    retry = true;
    return make_error("http_error",
                      std::string(method) + " " + path + ": " + httplib::to_string(res.error()));
  }
  if (res->status >= 200 && res->status < 300) return res->body;
  if (res->status == 503) {
    retry = true;
    int after_s = std::atoi(res->get_header_value("Retry-After").c_str());
    if (after_s > 0 && clients_.size() > 1) {
      std::this_thread::sleep_for(
          std::min<std::chrono::milliseconds>(std::chrono::seconds(after_s), kMaxRetryAfter));
    }
  }
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
