// The live fleet: N virtual machines (the real firmware core, the simulated
// HAL, a ledger file each, a Paho client each) against a real broker and a
// real vend-agent, with customers and a restocker over the agent's HTTP API.
// See docs/simulator.md.
#pragma once

#include "live/cli.hpp"

namespace vend::sim {

// Runs the whole live session; returns the exit code (0 ok, 1 an invariant
// broke, 2 set-up failure).
int run_live(const Command& command);

}  // namespace vend::sim
