// A small client of the agent's HTTP API (docs/agent.md, docs/openapi.yaml)
// for customers, the restocker and provisioning. One object per thread:
// not thread-safe. Non-copyable.
//
// Several agents (docs/deployment.md "Several agents"): the client spreads
// its requests over every address in turn, follows the 307 redirects to a
// machine's owner, and retries a request that got 503 (a shard moving) or no
// answer (an agent killed or paused) on the next address, within a bound.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vend/result.hpp"

namespace httplib {
class Client;
}

namespace vend::sim {

struct AgentAddress {
  std::string host = "127.0.0.1";
  int port = 8080;
};

struct AgentEndpoint {
  std::string host = "127.0.0.1";  // the first (or only) agent
  int port = 8080;
  std::vector<AgentAddress> more;  // the other agents of a cluster
  std::string operator_token;
  std::string gateway_secret;
  // "http://host:port[,http://host:port...]".
  static Result<AgentEndpoint> parse(const std::string& urls);
  std::vector<AgentAddress> addresses() const;
};

struct OrderReply {
  std::string id;
  std::string state;
  int64_t price_cents = 0;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
};

struct SlotReply {
  int slot = 0;
  int capacity = 0;
  int64_t pool = 0, reserved = 0, dispatched = 0;
};

struct SlotDef {
  int slot = 0;
  std::string product;
  int64_t price_cents = 0;
  int capacity = 0;
};

class AgentClient {
 public:
  // `client_id`, when not empty, is sent as X-Client-Id on orders: the
  // phone app's install id, its scope for idempotency and rate limits
  // (every simulated customer runs on the same address).
  // `retried`, when given, counts each request sent again after a 503 or
  // no answer; it must outlive the client.
  explicit AgentClient(AgentEndpoint endpoint, std::string client_id = "",
                       std::atomic<int64_t>* retried = nullptr);
  ~AgentClient();
  AgentClient(const AgentClient&) = delete;
  AgentClient& operator=(const AgentClient&) = delete;

  // Errors carry the API's error code ("sold_out", "device_offline", ...),
  // or "http_error" when the agent could not be reached.
  Result<OrderReply> create_order(const std::string& device, int slot);
  // Signs the notification as the gateway does (Vend-Signature, vend/webhook.hpp).
  Result<OrderReply> pay(const std::string& order_id, const std::string& payment_id,
                         int64_t amount_cents);
  Result<OrderReply> get_order(const std::string& order_id);
  // Operator: returns the device key (hex).
  Result<std::string> provision(const std::string& device, const std::vector<SlotDef>& slots);
  Result<std::vector<SlotReply>> slots(const std::string& device);
  Status restock(const std::string& device, int slot, int count);

 private:
  Result<std::string> call(const char* method, const std::string& path, const std::string& body,
                           bool operator_auth, const std::string& signed_for);
  // One attempt on the next address; `retry` is set when another may help.
  Result<std::string> call_once(const char* method, const std::string& path,
                                const std::string& body, bool operator_auth,
                                const std::string& signed_for, bool& retry);
  AgentEndpoint endpoint_;
  std::string client_id_;
  std::atomic<int64_t>* retried_;
  std::vector<std::unique_ptr<httplib::Client>> clients_;
  size_t next_ = 0;
};

}  // namespace vend::sim
