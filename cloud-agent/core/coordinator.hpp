// Private to the agent core: the coordinator behind AgentCore. It owns the
// components (the device book, the order book, payments and the refund
// outbox, the stock, the restocks in flight, the timers) and the parts of
// the core that work on them (core_env.hpp lists them), builds them in
// their layers, and routes: each input of AgentCore goes to its part, each
// fired timer to its subject's part. Its own work is start-up (the log into
// memory), the tick (timers, sweep, eviction, ops views, acks) and the
// metrics. Every method runs inside a step, on the core's thread.
#pragma once

#include <string>

#include "core/core_env.hpp"
#include "core/device_desk.hpp"
#include "core/event_desk.hpp"
#include "core/order_desk.hpp"
#include "core/output.hpp"
#include "core/writes.hpp"
#include "deadlines/deadlines.hpp"
#include "devices/device_book.hpp"
#include "orders/order_book.hpp"
#include "payments/payments.hpp"
#include "stock/restocks.hpp"
#include "stock/stock.hpp"

namespace vend::agent {

class Coordinator {
 public:
  Coordinator(Repository& repo, const Clock& clock, Random& random, Logger& log,
              AgentOptions options);
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Loads the log (in cluster mode, what `owns` accepts) into memory:
  // load() reads it (any thread: it touches only the repository), install()
  // puts it in memory; start() is both.
  Status start();
  Result<LoadedState> load(const AgentCore::Ownership& only) const;
  Status install(const LoadedState& loaded);
  // Several agents, once started: the machines of shards just gained, read
  // by load(gained), added to memory (what it holds stays). REQUIRES: no
  // machine of `gained` in memory.
  Status absorb(const LoadedState& gained);
  // The broker connection went up or down (subscriptions, presence probe).
  void on_connection(bool connected);
  // Timers that fell due, the sweep, eviction, ops views, rejected-line
  // summaries, the presence probe. The acks are flushed by AgentCore.
  void tick();
  // ok while storage works (a failed write of the writer thread included).
  Status health();
  AgentMetrics take_metrics();
  // Several agents: a fresh coordinator built by rebuild() takes over what
  // is not in the log: before start(), the broker connection, the counters
  // and the subscriptions; after it, the devices' presence, dropping the
  // subscriptions of machines it no longer serves.
  void take_over_from(Coordinator& old);
  void keep_presence_of(const Coordinator& old);

  // The injected services, options and counters (CoreEnv's members).
  Repository& repo;
  const Clock& clock;
  Random& random;
  Logger& log;
  const AgentOptions options;
  AgentMetrics counters;
  // Cluster mode: what this core serves (null: everything, one agent).
  AgentCore::Ownership owns;

  // The components: memory, one thread, no clock of their own.
  DeviceBook devices;
  OrderBook orders;
  Payments payments;
  Stock stock;
  Restocks restocks;
  Deadlines deadlines;

  // The parts, in their layers (a part uses only those above it).
  Writes writes;
  Output out;
  OrderDesk order_desk;
  DeviceDesk device_desk;
  EventDesk event_desk;

 private:
  CoreEnv env() { return CoreEnv{repo, clock, random, log, options, counters, owns}; }
  void fire_timer(const FiredTimer& timer);

  int64_t last_sweep_mono_ms_ = 0;
};

}  // namespace vend::agent
