#include "world/world_flood.hpp"

#include <cmath>
#include <string>
#include <utility>

#include "orders/order_ids.hpp"

namespace vend::sim {

WorldFlood::WorldFlood(double rate, Random& random, const Clock& clock, Trace& trace)
    : rate_(rate), random_(random), clock_(clock), trace_(trace) {}

void WorldFlood::step(WorldAgents& agents) {
  if (rate_ <= 0) return;
  double whole = std::floor(rate_);
  auto n = static_cast<int64_t>(whole);
  if (random_.chance(rate_ - whole)) ++n;
  for (int64_t i = 0; i < n; ++i) one(agents);
}

void WorldFlood::one(WorldAgents& agents) {
  WorldAgent* target = agents.any_serving();
  if (target == nullptr) return;
  ++requests_;
  bool order = (requests_ % 2) == 1;
  std::string what;
  Status answer;
  if (!agents.take_call(*target)) {
    answer = make_error("unavailable", "the call queue is full (503)");
    what = order ? "order" : "look-up";
  } else if (order) {
    std::string device = "flood-" + random_.id128().substr(0, 12);
    what = "order " + device;
    Result<agent::Order> r = target->call_order(
        [&](agent::AgentCore::OrderCallback done) {
          target->core().create_order_async(device, 1, "", "", std::move(done));
        },
        {});
    if (r.ok()) violations_.push_back({"flood_answered", "an order for " + device + ": " + r->id});
    answer = status_of(r);
  } else {
    std::string id = agent::new_order_id(clock_.wall_ms(), random_);
    what = "look-up " + id;
    auto r = target->core().get_order(id);
    if (r.ok()) violations_.push_back({"flood_answered", "a look-up of " + id + " found it"});
    answer = status_of(r);
  }
  trace_.add("flood " + what + " at " + target->instance_id() + " -> " +
             (answer.ok() ? std::string("ok") : answer.error().code));
}

std::vector<Violation> WorldFlood::take_violations() { return std::exchange(violations_, {}); }

}  // namespace vend::sim
