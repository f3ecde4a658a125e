// The LeaseStore contract against both implementations: MemoryLeaseStore
// (the model the simulation uses) and PgLeaseStore on a real PostgreSQL
// started by the test. Then keepers on PostgreSQL in real time: a kill -9
// (a keeper that stops without leaving) is taken over within 5 s, and a
// keeper paused past its lease is fenced.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include "test_support.hpp"
#include "cluster/lease_keeper.hpp"
#include "cluster/lease_store.hpp"
#include "cluster/pg_lease_store.hpp"
#include "cluster/shard_map.hpp"
#include "vend/clock.hpp"

using namespace vend::agent;
using vend::ManualClock;
using vend::SystemClock;
using vend::test::PostgresServer;

namespace {

constexpr int64_t kTtl = 400;  // ms: short, so the real-time store expires quickly

struct MemoryRig {
  static constexpr const char* kName = "memory";
  ManualClock clock;
  MemoryLeaseStore memory{clock};
  LeaseStore& store() { return memory; }
  void advance(int64_t ms) { clock.advance(ms); }
  bool fence(int shard, const std::string& id, uint64_t epoch) {
    return memory.fence_ok(shard, id, epoch);
  }
};

struct PgRig {
  static constexpr const char* kName = "postgresql";
  PostgresServer server;  // a fresh server per case
  std::unique_ptr<PgLeaseStore> pg = open();
  std::unique_ptr<PgLeaseStore> open() {
    auto opened = PgLeaseStore::open(server.url("postgres"));
    REQUIRE_MESSAGE(opened.ok(), vend::test::error_text(opened));
    return std::move(*opened);
  }
  LeaseStore& store() { return *pg; }
  void advance(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms + 20)); }
  bool fence(int shard, const std::string& id, uint64_t epoch) {
    auto ok = pg->fence_ok(shard, id, epoch);
    REQUIRE(ok.ok());
    return *ok;
  }
};

}  // namespace

TEST_CASE_TEMPLATE("lease store: one shard count, one live process per id", Rig, MemoryRig, PgRig) {
  CAPTURE(Rig::kName);
  Rig rig;
  LeaseStore& s = rig.store();
  REQUIRE(s.join("a", "a#1", 8).ok());
  auto mismatch = s.join("b", "b#1", 16);
  REQUIRE_FALSE(mismatch.ok());
  CHECK(mismatch.error().code == "config");
  CHECK(mismatch.error().message == "shard count 16 differs from the store's 8");

  REQUIRE(s.heartbeat("a", "a#1", kTtl).ok());
  auto twin = s.join("a", "a#2", 8);
  REQUIRE_FALSE(twin.ok());
  CHECK(twin.error().code == "conflict");
  CHECK(twin.error().message == "instance id a is in use by a live process");
  rig.advance(kTtl);  // the first process died: its membership ran out
  REQUIRE(s.join("a", "a#2", 8).ok());
  REQUIRE(s.heartbeat("a", "a#2", kTtl).ok());
  auto replaced = s.heartbeat("a", "a#1", kTtl);
  REQUIRE_FALSE(replaced.ok());
  CHECK(replaced.error().code == "conflict");
}

TEST_CASE_TEMPLATE("lease store: the view, grants, renewals, the fence", Rig, MemoryRig, PgRig) {
  CAPTURE(Rig::kName);
  Rig rig;
  LeaseStore& s = rig.store();
  REQUIRE(s.join("b", "b#1", 4).ok());
  REQUIRE(s.join("a", "a#1", 4).ok());
  REQUIRE(s.heartbeat("b", "b#1", kTtl).ok());
  auto view = s.heartbeat("a", "a#1", kTtl);
  REQUIRE(view.ok());
  CHECK(view->members == std::vector<std::string>{"a", "b"});
  REQUIRE(view->leases.size() == 4);
  for (const LeaseRow& row : view->leases) CHECK_FALSE(row.live);

  auto won = s.acquire("a", {0, 2}, kTtl);
  REQUIRE(won.ok());
  REQUIRE(won->size() == 2);
  Grant a0 = (*won)[0].shard == 0 ? (*won)[0] : (*won)[1];
  CHECK(a0.epoch == 1);
  CHECK(rig.fence(0, "a", 1));
  CHECK_FALSE(rig.fence(0, "b", 1));
  CHECK(s.acquire("b", {0, 1}, kTtl)->size() == 1);  // 0 is held live: only 1 is won

  // Renewed in time, the lease outlives its first term.
  rig.advance(kTtl / 2);
  CHECK(s.renew("a", {a0, Grant{2, 99}}, kTtl)->size() == 1);  // a stale epoch is not renewed
  rig.advance(kTtl / 2 + 50);
  CHECK(rig.fence(0, "a", 1));
  // Not renewed, it lapses: fenced, not renewable, and won again at epoch + 1.
  rig.advance(kTtl);
  CHECK_FALSE(rig.fence(0, "a", 1));
  CHECK(s.renew("a", {a0}, kTtl)->empty());
  auto taken = s.acquire("b", {0}, kTtl);
  REQUIRE(taken->size() == 1);
  CHECK(taken->front().epoch == 2);
  CHECK(rig.fence(0, "b", 2));
  // Released: fenced at once, and free for the next owner.
  REQUIRE(s.release("b", taken->front()).ok());
  CHECK_FALSE(rig.fence(0, "b", 2));
  CHECK(s.acquire("a", {0}, kTtl)->front().epoch == 3);
  // Leaving releases everything and the member goes.
  REQUIRE(s.leave("a").ok());
  CHECK_FALSE(rig.fence(0, "a", 3));
  auto after = s.heartbeat("b", "b#1", kTtl);
  REQUIRE(after.ok());
  CHECK(after->members == std::vector<std::string>{"b"});
}

TEST_CASE("lease store on PostgreSQL: an unreachable database is a clear error") {
  int port = vend::test::free_port();
  auto opened = PgLeaseStore::open("postgresql://vend@127.0.0.1:" + std::to_string(port) +
                                   "/postgres?connect_timeout=2");
  REQUIRE_FALSE(opened.ok());
  CHECK(opened.error().code == "unavailable");
  CHECK(opened.error().message.find("lease store: cannot connect") == 0);
}

namespace {

// One agent's lease thread on its own connection, in real time, with the
// shipped lease defaults.
class KeeperThread {
 public:
  KeeperThread(const std::string& url, const std::string& id, int shard_count)
      : session_(id + "#" + std::to_string(++starts_)), keeper_(options(id, shard_count)) {
    auto opened = PgLeaseStore::open(url);
    REQUIRE(opened.ok());
    store_ = std::move(*opened);
    thread_ = std::thread([this] { loop(); });
  }
  ~KeeperThread() { kill(); }

  // kill -9: the thread stops where it is; nothing is released.
  void kill() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void pause_for(int64_t ms) { pause_ms_ = ms; }
  std::vector<Grant> held() {
    std::lock_guard lock(mu_);
    return keeper_.held();
  }
  std::optional<uint64_t> epoch_of(int shard) {
    std::lock_guard lock(mu_);
    return keeper_.epoch_of(shard, clock_.monotonic_ms());
  }
  // Shards believed owned the moment the last pause ended (before any round).
  size_t owned_on_waking() const { return owned_on_waking_; }
  const std::string& id() const { return keeper_.options().instance_id; }

 private:
  static LeaseOptions options(const std::string& id, int shard_count) {
    LeaseOptions o;  // shipped defaults for the lease times
    o.instance_id = id;
    o.shard_count = shard_count;
    return o;
  }
  void loop() {
    while (!joined_ && !stop_) {
      joined_ = store_->join(id(), session_, keeper_.options().shard_count).ok();
      if (!joined_) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    while (!stop_) {
      if (int64_t pause = pause_ms_.exchange(0); pause > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(pause));  // SIGSTOP
        size_t owned = 0;
        for (int shard = 0; shard < keeper_.options().shard_count; ++shard) {
          if (epoch_of(shard)) ++owned;
        }
        owned_on_waking_ = owned;
      }
      int64_t t0 = clock_.monotonic_ms();
      {
        std::lock_guard lock(mu_);
        (void)run_lease_round(keeper_, *store_, session_, t0, [](const std::vector<int>&) {});
      }
      while (!stop_ && clock_.monotonic_ms() < t0 + keeper_.options().renew_every_ms) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }

  static inline std::atomic<int> starts_{0};
  SystemClock clock_;
  std::string session_;
  std::mutex mu_;  // guards keeper_ (the test reads it)
  LeaseKeeper keeper_;
  std::unique_ptr<PgLeaseStore> store_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> pause_ms_{0};
  std::atomic<size_t> owned_on_waking_{999};
  bool joined_ = false;
  std::thread thread_;
};

constexpr int kShards = 16;

// Every shard owned by exactly the live instance rendezvous names, and never
// two believers.
bool settled(std::vector<std::unique_ptr<KeeperThread>>& live) {
  std::vector<std::string> ids;
  for (auto& k : live) ids.push_back(k->id());
  for (int shard = 0; shard < kShards; ++shard) {
    int believers = 0;
    bool right_one = false;
    for (auto& k : live) {
      if (!k->epoch_of(shard)) continue;
      ++believers;
      right_one = k->id() == rendezvous_owner(shard, ids);
    }
    REQUIRE_MESSAGE(believers <= 1, "shard " << shard << " has two owners");
    if (believers != 1 || !right_one) return false;
  }
  return true;
}

int64_t ms_until_settled(std::vector<std::unique_ptr<KeeperThread>>& live, int64_t limit_ms) {
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start)
        .count();
  };
  while (!settled(live) && elapsed() < limit_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return elapsed();
}

}  // namespace

TEST_CASE("keepers on PostgreSQL: kill -9 of an owner is taken over within 5 s") {
  PostgresServer server;
  std::vector<std::unique_ptr<KeeperThread>> live;
  for (const char* id : {"agent-a", "agent-b", "agent-c"}) {
    live.push_back(std::make_unique<KeeperThread>(server.url("postgres"), id, kShards));
  }
  REQUIRE(ms_until_settled(live, 10'000) < 10'000);
  for (int kill = 0; kill < 2; ++kill) {
    auto victim = std::move(live[1]);
    live.erase(live.begin() + 1);
    REQUIRE_FALSE(victim->held().empty());
    victim->kill();
    int64_t failover_ms = ms_until_settled(live, 10'000);
    MESSAGE("failover " << kill + 1 << ": " << failover_ms << " ms");
    CHECK(failover_ms < 5000);
    // The same id comes back as a new process.
    live.push_back(std::make_unique<KeeperThread>(server.url("postgres"), victim->id(), kShards));
    REQUIRE(ms_until_settled(live, 10'000) < 10'000);
  }
}

TEST_CASE("keepers on PostgreSQL: an owner paused past its lease is fenced and stops using it") {
  PostgresServer server;
  std::vector<std::unique_ptr<KeeperThread>> live;
  for (const char* id : {"agent-a", "agent-b"}) {
    live.push_back(std::make_unique<KeeperThread>(server.url("postgres"), id, kShards));
  }
  REQUIRE(ms_until_settled(live, 10'000) < 10'000);
  std::vector<Grant> before = live[0]->held();
  REQUIRE_FALSE(before.empty());
  live[0]->pause_for(2 * LeaseOptions{}.lease_ms);
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * LeaseOptions{}.lease_ms + 300));
  auto check = PgLeaseStore::open(server.url("postgres"));
  REQUIRE(check.ok());
  for (const Grant& g : before) {
    auto ok = (*check)->fence_ok(g.shard, "agent-a", g.epoch);
    REQUIRE(ok.ok());
    CHECK_FALSE(*ok);
  }
  for (int i = 0; i < 200 && live[0]->owned_on_waking() == 999; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the pause began <= 1 round late
  }
  CHECK(live[0]->owned_on_waking() == 0);
  REQUIRE(ms_until_settled(live, 10'000) < 10'000);  // it comes back, with new epochs
  for (const Grant& g : before) {
    auto epoch = live[0]->epoch_of(g.shard);
    REQUIRE(epoch);
    CHECK(*epoch > g.epoch);
  }
}
