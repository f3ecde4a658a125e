// Customers and the restocker of the deterministic world. They call the agent
// core directly (no HTTP in deterministic mode), only while it is up.
// Customers order a random slot and then pay, pay twice, have the gateway
// repeat the payment, pay after the reservation expired, cancel, or abandon
// the order. The restocker orders a refill of every slot whose sellable stock
// runs low. The payment gateway takes the agent's refunds, failing some of
// them (the agent must retry until each is delivered). Not thread-safe.
// Non-copyable.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "vend/clock.hpp"
#include "vend/random.hpp"
#include "world/trace.hpp"
#include "world/world.hpp"
#include "world/world_agents.hpp"

namespace vend::sim {

class WorldWorkload {
 public:
  WorldWorkload(const WorldOptions& options, int64_t reservation_ttl_ms,
                std::vector<std::string> devices, Random& random, const Clock& clock, Trace& trace);
  WorldWorkload(const WorldWorkload&) = delete;
  WorldWorkload& operator=(const WorldWorkload&) = delete;

  // Asked inside a customer's reservation or payment (agent::call_order's
  // CallPoint; `call` names it for the trace) of the instance serving it:
  // true when it crashed there.
  using CrashInCall = std::function<bool(WorldAgent&, agent::CallPoint, const std::string& call)>;

  // One step of customers (new orders when `new_orders`, due payments) and
  // the restocker. No-op while the agent is down. Reservations and payments
  // take the asynchronous path (AgentCore::create_order_async, pay_async),
  // driven to their answer; `crash_in_call` may kill the agent after a
  // commit and before the answer reaches the customer, or between a
  // payment's two steps: the customer then got no answer. `after_answer`
  // runs right after each answer a customer gets (the crash point that
  // matters most: nothing answered may be lost); the step ends if the
  // agent went down. Several agents: calls go through WorldAgents::route,
  // and a payment answered "unavailable" (its shard moving, or no answer)
  // is sent again later, as a gateway retries its webhook.
  void step(WorldAgents& agents, bool new_orders, const std::function<void()>& after_answer,
            const CrashInCall& crash_in_call);
  int64_t orders_created() const { return created_; }
  int64_t orders_refused() const { return refused_; }
  // What the customers were told: every order answered as created, and every
  // payment answered 2xx (order id -> payment ids), only answers they
  // received (not one the agent died before giving). The agent must keep
  // its word through any crash (InvariantChecker::check_promises).
  const std::vector<std::string>& answered_orders() const { return answered_orders_; }
  const std::map<std::string, std::vector<std::string>>& answered_payments() const {
    return answered_payments_;
  }

 private:
  enum class Plan { kPay, kPayTwice, kRetryPay, kLatePay, kCancel, kAbandon };
  struct Customer {
    std::string order_id;
    int64_t price_cents = 0;
    Plan plan = Plan::kPay;
    int64_t act_at_ms = 0;
    int acts = 0;                  // actions taken so far
    int retries = 0;               // payments sent again after "unavailable"
    std::string retry_payment_id;  // the payment to send again, or ""
  };

  void create_order(WorldAgents& agents, const std::function<void()>& after_answer);
  Plan pick_plan();
  void act(WorldAgents& agents, Customer& customer, const std::function<void()>& after_answer);
  // False when the agents answered "unavailable" and the payment is to be
  // sent again (several agents only).
  bool pay(WorldAgents& agents, Customer& customer, const std::string& payment_id,
           const std::function<void()>& after_answer);
  // The crash hook of `call` served by `agent` (crash_in_call_ bound to it).
  agent::CrashAt crash_at(WorldAgent& agent, std::string call);
  void restock(WorldAgents& agents);
  // The payment gateway's refund endpoint: confirms each due refund, or
  // fails it (the agent retries).
  void serve_refunds(agent::AgentCore& core);

  const WorldOptions& options_;
  int64_t reservation_ttl_ms_;
  std::vector<std::string> devices_;
  Random& random_;
  const Clock& clock_;
  Trace& trace_;
  CrashInCall crash_in_call_;        // of the current step
  std::vector<Customer> customers_;  // still acting, in creation order
  int64_t created_ = 0;
  int64_t refused_ = 0;
  int64_t payments_ = 0;
  int64_t next_restock_ms_ = 0;
  std::map<std::string, int64_t> restock_quiet_until_;  // "device/slot" -> wall ms
  std::vector<std::string> answered_orders_;
  std::map<std::string, std::vector<std::string>> answered_payments_;
};

}  // namespace vend::sim
