// ClusterNode (the vend-agent shell's cluster part) on a real PostgreSQL
// (tests/support PostgresServer: lease store and log), with the faults that
// used to stop or stall an agent:
//   - a core whose call queue refuses every step (saturation) neither stops
//     the instance nor loses a lease: it stays a member and its requests are
//     answered "unavailable" (503);
//   - a rebuild that takes longer than the lease (every step of the core
//     slowed) lets no lease lapse: the lease thread never waits for it;
//   - a PostgreSQL stop/start of 3 s costs "unavailable" answers, not the
//     instance: its writer reconnects and its core is rebuilt;
//   - a session holding row locks for ever (an agent paused mid-group)
//     stalls a write no longer than lock_timeout; once it lets go, writes
//     succeed again.
#include "shell/cluster_node.hpp"

#include <doctest/doctest.h>
#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/pg_lease_store.hpp"
#include "core/agent_core.hpp"
#include "core/order_calls.hpp"
#include "postgres/postgres_repository.hpp"
#include "test_support.hpp"
#include "vend/clock.hpp"
#include "vend/in_memory_bus.hpp"
#include "vend/log.hpp"
#include "vend/random.hpp"

namespace vend::agent {
namespace {

using namespace std::chrono_literals;

constexpr int kShards = 16;

bool eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

constexpr int64_t kLeaseMs = 2000;

// The core's runner, with two faults: refuse every step (its queue is
// full) or sleep before each one (a slow core: a rebuild takes seconds).
// Steps run one at a time under a lock (any thread may call the core).
class FaultyRunner final : public CoreRunner {
 public:
  std::atomic<bool> refuse{false};
  std::atomic<int> delay_ms{0};

  bool run(const std::function<void()>& step) override {
    if (refuse) return false;
    if (int d = delay_ms.load(); d > 0) std::this_thread::sleep_for(std::chrono::milliseconds(d));
    std::lock_guard lock(mu_);
    return inner_.run(step);
  }
  bool post(std::function<void()> step) override {
    if (refuse) return false;
    std::lock_guard lock(mu_);
    return inner_.post(std::move(step));
  }

 private:
  std::recursive_mutex mu_;
  InlineRunner inner_;
};

// One agent instance: its log on PostgreSQL, a core on FaultyRunner, and
// its ClusterNode, joined and started.
struct Instance {
  Instance(const std::string& url, const std::string& id, InMemoryBus& bus)
      : client(bus.make_client("agent-" + id)) {
    RepositoryOptions ro;
    ro.pg_idle_in_transaction_timeout_ms = kLeaseMs / 2;
    ro.pg_lock_timeout_ms = kLeaseMs / 2;
    ro.pg_statement_timeout_ms = 5 * kLeaseMs;
    auto opened = open_postgres_repository(url, ro, log);
    REQUIRE_MESSAGE(opened.ok(), test::error_text(opened));
    repo = std::move(opened).value();
    core = std::make_unique<AgentCore>(*repo, *client, clock, random, log, AgentOptions{}, &runner);
    auto store = PgLeaseStore::open(url);
    REQUIRE_MESSAGE(store.ok(), test::error_text(store));
    ClusterNodeOptions co;
    co.lease = LeaseOptions{id, kShards, kLeaseMs, 500, 500};
    co.advertise_url = "http://" + id + ".invalid";
    node = std::make_unique<ClusterNode>(co, std::move(store).value(), *repo, clock, random, log);
    REQUIRE(node->join().ok());
    REQUIRE(core->start(node->ownership()).ok());
    node->start(*core);
  }
  ~Instance() {
    runner.refuse = false;
    runner.delay_ms = 0;
    node->stop();
    repo->flush();  // its callbacks reach the core: before the core goes
  }
  // A counter or gauge of node->metrics().
  int64_t metric(const std::string& name) const {
    std::string text = node->metrics();
    size_t at = text.find("\n" + name + " ");
    REQUIRE_MESSAGE(at != std::string::npos, name);
    return std::stoll(text.substr(at + name.size() + 2));
  }

  SystemClock clock;
  SecureRandom random;
  StderrLogger log{LogLevel::kWarn};
  std::unique_ptr<InMemoryClient> client;
  FaultyRunner runner;
  std::unique_ptr<Repository> repo;
  std::unique_ptr<AgentCore> core;
  std::unique_ptr<ClusterNode> node;
};

TEST_CASE("a saturated core keeps its leases and its membership") {
  test::PostgresServer postgres;
  postgres.create_database("vend");
  InMemoryBus bus;
  Instance a(postgres.url("vend"), "a", bus);
  REQUIRE(a.metric("vend_cluster_shards_held") == kShards);
  int64_t gained = a.metric("vend_cluster_shards_gained_total");

  a.runner.refuse = true;  // every step refused, as with a full queue
  auto order = call_order([&](AgentCore::OrderCallback done) {
    a.core->create_order_async("vm-1", 1, "client", "", std::move(done));
  });
  REQUIRE_FALSE(order.ok());
  CHECK(order.error().code == "unavailable");  // 503: load shed
  std::this_thread::sleep_for(std::chrono::milliseconds(3 * kLeaseMs));

  CHECK_FALSE(a.node->replaced());
  CHECK(a.metric("vend_cluster_leases_held") == kShards);
  CHECK(a.metric("vend_cluster_shards_gained_total") == gained);  // never lapsed, never won again
  CHECK(a.metric("vend_cluster_shards_lost_total") == 0);
  CHECK(a.metric("vend_cluster_members") == 1);
}

TEST_CASE("a rebuild longer than the lease lets no lease lapse") {
  test::PostgresServer postgres;
  postgres.create_database("vend");
  InMemoryBus bus;
  Instance a(postgres.url("vend"), "a", bus);
  // Each step of a's core now takes 1.5 lease: a rebuild (two steps and a
  // load) takes about three.
  a.runner.delay_ms = static_cast<int>(kLeaseMs * 3 / 2);
  Instance b(postgres.url("vend"), "b", bus);  // a hands shards over, then rebuilds
  auto start = std::chrono::steady_clock::now();
  int64_t lost_after_handover = -1;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(4 * kLeaseMs)) {
    std::this_thread::sleep_for(250ms);
    if (a.metric("vend_cluster_members") != 2) continue;
    int64_t lost = a.metric("vend_cluster_shards_lost_total");
    if (lost_after_handover < 0) lost_after_handover = lost;
    // Only the shards handed to b leave a; nothing of a's lapses meanwhile.
    CHECK(lost == lost_after_handover);
    CHECK(a.metric("vend_cluster_shards_gained_total") == kShards);
  }
  CHECK(lost_after_handover > 0);
  CHECK(lost_after_handover < kShards);
  CHECK(a.metric("vend_cluster_lease_rounds_failed_total") == 0);
  CHECK(a.metric("vend_cluster_leases_held") == kShards - lost_after_handover);
  a.runner.delay_ms = 0;
  CHECK(eventually([&] { return a.metric("vend_cluster_rebuilds_total") >= 1; }, 10s));
  CHECK(a.metric("vend_cluster_shards_held") == kShards - lost_after_handover);
  CHECK_FALSE(a.node->replaced());
}

const std::vector<SlotSpec> kSlots = {SlotSpec{1, "cola", 150, 10}};

TEST_CASE("a PostgreSQL restart of three seconds costs 503 answers, not the instance") {
  test::PostgresServer postgres;
  postgres.create_database("vend");
  InMemoryBus bus;
  Instance a(postgres.url("vend"), "a", bus);
  REQUIRE(a.core->provision_device("vm-1", kSlots).ok());

  postgres.stop();
  // "unavailable", or "not_owner" once the leases lapsed during the stop
  // (the HTTP front answers 503 while nobody serves a shard).
  auto during = a.core->provision_device("vm-2", kSlots);
  REQUIRE_FALSE(during.ok());
  CHECK((during.error().code == "unavailable" || during.error().code == "not_owner"));
  std::this_thread::sleep_for(3s);
  postgres.start();

  int n = 3;
  CHECK(eventually(
      [&] { return a.core->provision_device("vm-" + std::to_string(n++), kSlots).ok(); }, 20s));
  CHECK_FALSE(a.node->replaced());
  CHECK(a.metric("vend_cluster_storage_recoveries_total") >= 1);
  CHECK(eventually([&] { return a.metric("vend_cluster_shards_held") == kShards; }, 10s));
  // vm-2 was answered "unavailable": never stored, so it is free.
  CHECK(a.core->provision_device("vm-2", kSlots).ok());
}

TEST_CASE("row locks held for ever stall a write no longer than lock_timeout") {
  test::PostgresServer postgres;
  postgres.create_database("vend");
  InMemoryBus bus;
  Instance a(postgres.url("vend"), "a", bus);
  REQUIRE(a.core->provision_device("vm-1", kSlots).ok());
  // Another session locks the slot's row and never commits, as an agent
  // paused in the middle of a group does.
  PGconn* holder = PQconnectdb(postgres.url("vend").c_str());
  REQUIRE(PQstatus(holder) == CONNECTION_OK);
  PQclear(PQexec(holder, "BEGIN; SELECT 1 FROM slots WHERE device = 'vm-1' FOR UPDATE"));

  auto t0 = std::chrono::steady_clock::now();
  Status stalled = a.core->set_slot("vm-1", SlotSpec{1, "lemonade", 170, 10});
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(stalled.ok());
  CHECK(stalled.error().code == "unavailable");
  CHECK(took < std::chrono::milliseconds(kLeaseMs / 2 + 1500));

  PQclear(PQexec(holder, "ROLLBACK"));
  PQfinish(holder);
  CHECK(eventually(
      [&] {
        return a.core->set_slot("vm-1", SlotSpec{1, "lemonade", 170, 10}).ok();
      },
      10s));
  CHECK_FALSE(a.node->replaced());
}

}  // namespace
}  // namespace vend::agent
