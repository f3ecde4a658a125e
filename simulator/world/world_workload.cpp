#include "world/world_workload.hpp"

#include <algorithm>

namespace vend::sim {

namespace {
constexpr int64_t kRestockCheckMs = 500;
constexpr int64_t kRestockQuietMs = 3000;  // one refill order per slot at a time
}  // namespace

WorldWorkload::WorldWorkload(const WorldOptions& options, int64_t reservation_ttl_ms,
                             std::vector<std::string> devices, Random& random, const Clock& clock,
                             Trace& trace)
    : options_(options),
      reservation_ttl_ms_(reservation_ttl_ms),
      devices_(std::move(devices)),
      random_(random),
      clock_(clock),
      trace_(trace) {}

void WorldWorkload::step(WorldAgents& agents, bool new_orders,
                         const std::function<void()>& after_answer,
                         const CrashInCall& crash_in_call) {
  if (!agents.up()) return;
  crash_in_call_ = crash_in_call;
  if (clock_.wall_ms() >= next_restock_ms_) {
    restock(agents);
    next_restock_ms_ = clock_.wall_ms() + kRestockCheckMs;
  }
  agents.each_core([this](agent::AgentCore& core) { serve_refunds(core); });
  if (new_orders && random_.chance(options_.order_rate)) create_order(agents, after_answer);
  for (Customer& c : customers_) {
    if (!agents.up()) break;  // the agent died
    if (c.act_at_ms <= clock_.wall_ms()) act(agents, c, after_answer);
  }
  std::erase_if(customers_, [](const Customer& c) { return c.act_at_ms < 0; });
}

agent::CrashAt WorldWorkload::crash_at(WorldAgent& agent, std::string call) {
  if (!crash_in_call_) return {};
  return [this, &agent, call = std::move(call)](agent::CallPoint point) {
    return crash_in_call_(agent, point, call);
  };
}

WorldWorkload::Plan WorldWorkload::pick_plan() {
  double u = random_.uniform();
  const double cuts[] = {options_.abandon, options_.cancel, options_.late_pay, options_.pay_twice,
                         options_.retry_pay};
  const Plan plans[] = {Plan::kAbandon, Plan::kCancel, Plan::kLatePay, Plan::kPayTwice,
                        Plan::kRetryPay};
  for (size_t i = 0; i < 5; ++i) {
    if (u < cuts[i]) return plans[i];
    u -= cuts[i];
  }
  return Plan::kPay;
}

void WorldWorkload::create_order(WorldAgents& agents, const std::function<void()>& after_answer) {
  const std::string& device = devices_[random_.range(0, devices_.size() - 1)];
  int slot = static_cast<int>(random_.range(1, options_.slots));
  Result<agent::Order> order = make_error("unavailable", "not called");
  Status routed = agents.route_agent([&](WorldAgent& agent) {
    order = agent.call_order(
        [&](agent::AgentCore::OrderCallback done) {
          agent.core().create_order_async(device, slot, "", "", std::move(done));
        },
        crash_at(agent, "order " + device + "/" + std::to_string(slot)));
    return status_of(order);
  });
  std::string where = device + "/" + std::to_string(slot);
  if (!routed.ok()) {
    ++refused_;
    trace_.add("customer order " + where + " refused " + routed.error().code);
    return;
  }
  ++created_;
  answered_orders_.push_back(order->id);
  Customer c{order->id, order->price_cents, pick_plan(), 0, 0, 0, {}};
  c.act_at_ms = clock_.wall_ms() + random_.range(50, 2000);
  if (c.plan == Plan::kLatePay) c.act_at_ms += reservation_ttl_ms_ + 1000;
  trace_.add("customer order " + where + " -> " + order->id);
  customers_.push_back(std::move(c));
  after_answer();
}

bool WorldWorkload::pay(WorldAgents& agents, Customer& c, const std::string& payment_id,
                        const std::function<void()>& after_answer) {
  constexpr int kMaxPayRetries = 60;
  Result<agent::Order> paid = make_error("unavailable", "not called");
  Status routed = agents.route_agent([&](WorldAgent& agent) {
    paid = agent.call_order(
        [&](agent::AgentCore::OrderCallback done) {
          agent.core().pay_async(c.order_id, payment_id, c.price_cents, std::move(done));
        },
        crash_at(agent, "pay " + c.order_id + " " + payment_id));
    return status_of(paid);
  });
  if (routed.ok()) answered_payments_[c.order_id].push_back(payment_id);
  trace_.add("customer pay " + c.order_id + " " + payment_id + " -> " +
             (routed.ok() ? std::string(agent::to_string(paid->state)) : routed.error().code));
  after_answer();
  bool again = agents.clustered() && !routed.ok() && routed.error().code == "unavailable" &&
               c.retries < kMaxPayRetries;
  if (again) ++c.retries;
  return !again;
}

// One action of a customer; a finished customer gets act_at_ms = -1. A
// payment to send again keeps the customer at the same action.
void WorldWorkload::act(WorldAgents& agents, Customer& c,
                        const std::function<void()>& after_answer) {
  constexpr int64_t kPayRetryMs = 300;
  ++c.acts;
  // The gateway sends a webhook it got no answer to again, same payment id.
  std::string payment_id =
      c.retry_payment_id.empty() ? "pay-" + std::to_string(++payments_) : c.retry_payment_id;
  c.retry_payment_id.clear();
  auto retry_later = [&] {
    --c.acts;
    c.act_at_ms = clock_.wall_ms() + kPayRetryMs;
    c.retry_payment_id = payment_id;
  };
  switch (c.plan) {
    case Plan::kAbandon: trace_.add("customer abandons " + c.order_id); break;
    case Plan::kCancel: {
      Result<agent::Order> r = make_error("unavailable", "not called");
      Status routed = agents.route([&](agent::AgentCore& core) {
        r = core.cancel(c.order_id);
        return status_of(r);
      });
      trace_.add("customer cancel " + c.order_id + " -> " +
                 (routed.ok() ? std::string(agent::to_string(r->state)) : routed.error().code));
      break;
    }
    case Plan::kRetryPay:
      if (!pay(agents, c, payment_id, [] {})) return retry_later();         // the gateway repeats
      if (!pay(agents, c, payment_id, after_answer)) return retry_later();  // the notification
      break;
    case Plan::kPayTwice:
      if (!pay(agents, c, payment_id, after_answer)) return retry_later();
      if (c.acts == 1) {
        c.act_at_ms = clock_.wall_ms() + random_.range(10, 3000);
        return;
      }
      break;
    case Plan::kPay:
    case Plan::kLatePay:
      if (!pay(agents, c, payment_id, after_answer)) return retry_later();
      break;
  }
  c.act_at_ms = -1;
}

void WorldWorkload::serve_refunds(agent::AgentCore& core) {
  constexpr double kGatewayFailure = 0.2;
  for (const agent::RefundDelivery& r : core.take_due_refunds(8)) {
    bool fail = random_.chance(kGatewayFailure);
    trace_.add("gateway refund " + r.refund_id + " attempt " + std::to_string(r.attempt) +
               (fail ? " -> 503" : " -> ok"));
    core.refund_attempted(r.payment_id,
                          fail ? agent::RefundOutcome::kRetry : agent::RefundOutcome::kDelivered,
                          fail ? "HTTP 503 (simulated gateway)" : "");
  }
}

void WorldWorkload::restock(WorldAgents& agents) {
  int64_t now = clock_.wall_ms();
  for (const std::string& device : devices_) {
    Result<std::vector<agent::SlotView>> slots = make_error("unavailable", "not called");
    Status routed = agents.route([&](agent::AgentCore& core) {
      slots = core.slots(device);
      return status_of(slots);
    });
    if (!routed.ok()) continue;
    for (const agent::SlotView& s : *slots) {
      int64_t have = s.pool + s.reserved + s.dispatched;
      std::string key = device + "/" + std::to_string(s.slot);
      if (have * 2 >= s.capacity || restock_quiet_until_[key] > now) continue;
      int count = static_cast<int>(s.capacity - have);
      Result<std::string> id = make_error("unavailable", "not called");
      Status asked = agents.route([&](agent::AgentCore& core) {
        id = core.request_restock(device, s.slot, count);
        return status_of(id);
      });
      restock_quiet_until_[key] = now + kRestockQuietMs;
      trace_.add("restocker " + key + " +" + std::to_string(count) + " -> " +
                 (asked.ok() ? *id : asked.error().code));
    }
  }
}

}  // namespace vend::sim
