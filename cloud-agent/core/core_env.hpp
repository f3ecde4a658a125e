// Private to the agent core: what every part of it is given — the injected
// repository, clock, random source and log, the options, the counters, and
// which machines this instance serves — and the small helpers they share.
//
// The core's parts (each a class over the components it uses; a part calls
// only the parts listed before it; docs/agent.md, "The core's shape"):
//   Writes       the log: may a step write, its commit, fencing, failure
//   Output       what a step sends: commands and requests to devices, the
//                ops topics, subscriptions (the step's effects)
//   OrderDesk    orders and payments: reservations, payments, refunds,
//                settlements, the orders' timers
//   DeviceDesk   the machines as operators manage them: provisioning, slots,
//                restocks, keys, decommissioning, reconciliation's schedule
//   EventDesk    what machines send: events, presence, acks, results,
//                snapshots and their reconciliation
//   Coordinator  owns the components and the parts; start-up, ticks, timers
//                and metrics; routes each input to its part
// Every part runs inside a step, on the core's thread (AgentCore::step);
// nothing here locks, waits or publishes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "contracts/order.hpp"
#include "core/agent_core.hpp"
#include "repository/repository.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"
#include "vend/protocol.hpp"
#include "vend/random.hpp"
#include "vend/result.hpp"
#include "vend/transport.hpp"

namespace vend::agent {

namespace detail {

inline constexpr const char* kLog = "agent";
inline constexpr size_t kMaxLatencySamples = 10'000;  // between two take_metrics()
// A timer of a machine this core does not serve at the moment (its lease's
// validity ended) looks again this much later instead of acting.
inline constexpr int64_t kUnservedRetryMs = 1000;

// What pay() does after its step: wait for `wait`, then finish.
struct PayStep {
  Order answer;
  std::string outcome;
  Ticket wait;
};

// What a durable operator call waits for before answering.
template <typename T>
struct Durable {
  T value;
  Ticket wait;
};

// A message a step wants published. `order_id`: set for a dispense
// command, whose failure to go out is handed back (publish_failed);
// `restock_device`: set for a restock command, likewise
// (restock_publish_failed).
struct Publish {
  Message message;
  std::string order_id;
  std::string restock_device;
};

// What a step leaves for AgentCore to carry out after it.
struct Effects {
  std::vector<Publish> publishes;
  std::vector<std::string> subscribes;    // topic filters, QoS 1
  std::vector<std::string> unsubscribes;  // cluster mode: devices no longer served
};

// Rate limit of a request to a device: true (and `last_ms` = now) when
// none was sent yet (last_ms == 0) or the last is at least `interval_ms` old.
inline bool take_turn(int64_t& last_ms, int64_t now_ms, int64_t interval_ms) {
  if (last_ms != 0 && now_ms - last_ms < interval_ms) return false;
  last_ms = now_ms;
  return true;
}
Ticket ready_ticket(Status status = {});
Status check_text(const std::string& what, const std::string& value, size_t max_len,
                  bool allow_empty);

}  // namespace detail

// The injected services, options, counters and ownership, by reference: the
// Coordinator owns them; each part holds a copy of this (a base class, so
// their code names them as `log`, `clock`, `options`, ...).
struct CoreEnv {
  Repository& repo;
  const Clock& clock;
  Random& random;
  Logger& log;
  const AgentOptions& options;
  AgentMetrics& counters;  // the monotonic counters and latency samples
  // Cluster mode: what this core serves (null: everything, one agent).
  const AgentCore::Ownership& owns;

  bool serves(const std::string& key) const { return !owns || owns(key); }
  // not_owner (message: the device id) for a device this core does not serve.
  Status owner_check(const std::string& device) const;
};

}  // namespace vend::agent
