// The agent core on a REAL redis-server that dies mid-run (integration,
// docs/stock-store.md "Degradation"): two threads keep ordering, sales go
// on through the database with not one item over the stock, and once Redis
// is back (empty, on the same port) the breaker half-opens, warms every
// counter up from the pools and reservations go through Redis again.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "agent_rig.hpp"
#include "test_support.hpp"
#include "vend/agent/agent_core.hpp"
#include "vend/agent/redis_stock_store.hpp"

using namespace vend;
using namespace vend::agent;
using vend::agent::test::AgentRig;

namespace {

constexpr int kStock = 600;      // slot 1: what the two threads sell
constexpr int kOtherStock = 50;  // slot 2: untouched until the end
constexpr int kKillAfter = 150;  // reservations through Redis before it dies
constexpr int64_t kOpenMs = 500;

AgentOptions redis_agent_options() {
  AgentOptions o = vend::agent::test::test_agent_options();
  o.reservation_ttl_ms = 60'000;  // nothing expires while the test runs
  o.store_breaker = {3, kOpenMs};
  return o;
}

RedisOptions redis_options(const vend::test::RedisServer& redis) {
  auto o = RedisOptions::parse_url(redis.url());
  REQUIRE(o.ok());
  o->reconnect_backoff_max = std::chrono::milliseconds(200);
  return *o;
}

std::vector<std::optional<int64_t>> counters(StockStore& store) {
  auto v = store.mget({stock_key("vm-1", 1), stock_key("vm-1", 2)});
  REQUIRE(v.ok());
  return *v;
}

}  // namespace

TEST_CASE("redis dies mid-run: no oversell through the database; back empty: warmed up, used") {
  vend::test::RedisServer redis;
  SystemClock redis_clock;  // the store's reconnect backoff runs on real time
  MemoryLogger redis_log;
  RedisStockStore store(redis_options(redis), redis_clock, redis_log);
  AgentRig rig(redis_agent_options(), &store);
  rig.add_device("vm-1", {{1, "cola", 150, kStock}, {2, "water", 90, kOtherStock}});
  rig.devices.back()->restock(1, kStock);
  rig.devices.back()->restock(2, kOtherStock);
  REQUIRE(rig.run_until([&] {
    return rig.slot("vm-1", 1).pool == kStock && rig.slot("vm-1", 2).pool == kOtherStock;
  }));
  REQUIRE(counters(store)[0] == kStock);

  // Two customers' threads order slot 1 until it is sold out. Only the core
  // is shared; the virtual clock stands still meanwhile (the breaker stays
  // open, every reservation after the kill goes through the database).
  std::atomic<int> sold{0};
  std::atomic<int> other_errors{0};
  std::atomic<bool> redis_dead{false};
  std::vector<std::vector<std::string>> ids(2);
  auto customer = [&](int n) {
    for (;;) {
      // Pace the orders until Redis is dead, so it dies mid-run.
      if (!redis_dead) std::this_thread::sleep_for(std::chrono::microseconds(500));
      auto o = rig.core->create_order("vm-1", 1, "", "");
      if (o.ok()) {
        ids[n].push_back(o->id);
        ++sold;
      } else if (o.error().code == "sold_out") {
        return;
      } else {
        ++other_errors;
      }
    }
  };
  std::thread a(customer, 0);
  std::thread b(customer, 1);
  while (sold < kKillAfter) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  redis.stop();
  redis_dead = true;
  a.join();
  b.join();

  CHECK(other_errors == 0);
  CHECK(sold == kStock);  // exactly the stock: never more, and nothing refused
  CHECK(rig.slot("vm-1", 1).pool == 0);
  CHECK(rig.slot("vm-1", 1).reserved == kStock);
  AgentMetrics m = rig.core->take_metrics();
  CHECK(m.store_state == "open");
  CHECK(m.reservations_total == kStock);
  CHECK(m.reservations_via_database_total > 0);
  CHECK(m.reservations_via_database_total <= kStock - kKillAfter);
  const int64_t via_database = m.reservations_via_database_total;
  MESSAGE("through Redis: " << kStock - via_database << ", through the database: " << via_database);

  // Some customers cancel while the store is down: the pool grows, the
  // (dead) store is skipped.
  for (int i = 0; i < 10; ++i) REQUIRE(rig.core->cancel(ids[0][static_cast<size_t>(i)]).ok());
  CHECK(rig.slot("vm-1", 1).pool == 10);

  // Redis comes back EMPTY on the same port. tick() probes every open_ms
  // (virtual) until ping and the warm-up succeed (the store's real-time
  // reconnect backoff may refuse the first probes).
  redis.start();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (rig.core->store_state() != "closed" && std::chrono::steady_clock::now() < deadline) {
    rig.clock.advance(kOpenMs);
    rig.core->tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(rig.core->store_state() == "closed");
  m = rig.core->take_metrics();
  CHECK(m.store_breaker_closed_total == 1);
  CHECK(m.store_breaker_half_opened_total >= 1);
  auto warmed = counters(store);
  CHECK(warmed[0] == 10);  // == the pools, though Redis came back empty
  CHECK(warmed[1] == kOtherStock);
  rig.check_stock_invariant();

  // Reservations go through Redis again: its counters go down.
  REQUIRE(rig.core->create_order("vm-1", 2, "", "").ok());
  REQUIRE(rig.core->create_order("vm-1", 1, "", "").ok());
  auto after = counters(store);
  CHECK(after[0] == 9);
  CHECK(after[1] == kOtherStock - 1);
  CHECK(rig.core->take_metrics().reservations_via_database_total == via_database);
  rig.check_stock_invariant();
}
