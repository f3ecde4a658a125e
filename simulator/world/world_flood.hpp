// Outside clients flooding the agents of the deterministic world
// (WorldOptions::flood_rate): requests anyone can send without credentials,
// each to a serving instance drawn by the seed (no redirect followed), in
// turn an order for a machine id no machine has (fresh each time) and a
// look-up of a well-formed order id that was never made (a read of the log
// in cluster mode, where memory never holds every order). They take their
// place in the instances' call queues (WorldAgents::take_call), so the
// customers meet a full queue as they would behind the HTTP front.
//
// The promise they test: no such request is answered with an order, and no
// instance stops or loses a shard because of them (the lease checks and
// the settle phase). Not thread-safe. Non-copyable.
#pragma once

#include <cstdint>
#include <vector>

#include "checker/invariant_checker.hpp"
#include "vend/clock.hpp"
#include "vend/random.hpp"
#include "world/trace.hpp"
#include "world/world_agents.hpp"

namespace vend::sim {

class WorldFlood {
 public:
  // REQUIRES: rate >= 0.
  WorldFlood(double rate, Random& random, const Clock& clock, Trace& trace);
  WorldFlood(const WorldFlood&) = delete;
  WorldFlood& operator=(const WorldFlood&) = delete;

  // This step's requests (none with rate 0: no random draw either).
  void step(WorldAgents& agents);
  int64_t requests() const { return requests_; }
  // Requests answered with an order: each one a breach ("flood_answered").
  std::vector<Violation> take_violations();

 private:
  void one(WorldAgents& agents);

  double rate_;
  Random& random_;
  const Clock& clock_;
  Trace& trace_;
  int64_t requests_ = 0;
  std::vector<Violation> violations_;
};

}  // namespace vend::sim
