#include "cluster/lease_keeper.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/lease_store.hpp"
#include "cluster/shard_map.hpp"
#include "vend/clock.hpp"
#include "vend/random.hpp"

using vend::ManualClock;
using vend::SeededRandom;
using vend::agent::check_lease_options;
using vend::agent::Grant;
using vend::agent::LeaseKeeper;
using vend::agent::LeaseOptions;
using vend::agent::MemoryLeaseStore;
using vend::agent::rendezvous_owner;

namespace {

constexpr int kShards = 32;
constexpr int64_t kLease = 3000;
constexpr int64_t kRenew = 1000;
constexpr int64_t kStep = 10;  // simulated ms between two looks at the cluster

LeaseOptions options_for(const std::string& id) {
  LeaseOptions o;
  o.instance_id = id;
  o.shard_count = kShards;
  o.lease_ms = kLease;
  o.renew_every_ms = kRenew;
  o.safety_ms = 500;
  return o;
}

// One agent process: a keeper, run in rounds as the shell would, on a
// monotonic clock of its own (store time + a fixed offset: another boot).
struct Instance {
  std::string id;
  std::string session;
  int64_t offset_ms = 0;
  LeaseKeeper keeper;
  bool joined = false;
  bool dead = false;
  int64_t paused_until = 0;  // store time; rounds stop while paused
  int64_t next_round = 0;    // store time
  // The second half of a round in flight: the store runs acquire/renew
  // `latency` after the heartbeat.
  std::optional<LeaseKeeper::Plan> plan;
  int64_t plan_t0 = 0;
  int64_t settle_at = 0;

  Instance(std::string id_, std::string session_, int64_t offset)
      : id(id_), session(std::move(session_)), offset_ms(offset), keeper(options_for(id_)) {}
};

struct Cluster {
  ManualClock clock{1'700'000'000'000, 0};  // the store's (database's) clock
  MemoryLeaseStore store{clock};
  std::vector<std::unique_ptr<Instance>> instances;
  SeededRandom rng{1};
  int64_t max_latency_ms = 0;

  int64_t now() const { return clock.monotonic_ms(); }
  int64_t local(const Instance& in) const { return now() + in.offset_ms; }

  Instance& start(const std::string& id, int64_t offset) {
    instances.push_back(
        std::make_unique<Instance>(id, id + "#" + std::to_string(instances.size()), offset));
    instances.back()->next_round = now();
    return *instances.back();
  }

  void first_half(Instance& in) {
    if (!in.joined) {
      in.joined = store.join(in.id, in.session, kShards).ok();
      if (!in.joined) return;
    }
    int64_t t0 = local(in);
    auto view = store.heartbeat(in.id, in.session, kLease);
    if (!view) {
      in.keeper.expire(t0);
      if (view.error().code == "conflict") in.dead = true;  // replaced: the process stops
      return;
    }
    auto plan = in.keeper.plan(*view, t0);
    for (const Grant& g : plan.dropping) REQUIRE(store.release(in.id, g).ok());
    in.plan = std::move(plan);
    in.plan_t0 = t0;
    in.settle_at = now() + (max_latency_ms ? rng.range(0, max_latency_ms) : 0);
  }

  void second_half(Instance& in) {
    auto won = store.acquire(in.id, in.plan->acquire, kLease);
    auto renewed = store.renew(in.id, in.plan->renew, kLease);
    REQUIRE(won.ok());
    REQUIRE(renewed.ok());
    in.keeper.settle(*in.plan, *won, *renewed, in.plan_t0);
    in.plan.reset();
  }

  // One kStep of store time: due rounds run, then the invariant is checked.
  void step() {
    for (auto& in : instances) {
      if (in->dead || now() < in->paused_until) continue;
      if (in->plan && now() >= in->settle_at) second_half(*in);
      if (!in->plan && now() >= in->next_round) {
        first_half(*in);
        in->next_round = now() + kRenew;
      }
    }
    check_one_owner();
    clock.advance(kStep);
  }
  void run_for(int64_t ms) {
    for (int64_t end = now() + ms; now() < end;) step();
  }

  // At most one process believes it owns a shard, and that one's writes pass
  // the fence. A paused process counts: it acts the moment it wakes up.
  void check_one_owner() {
    for (int shard = 0; shard < kShards; ++shard) {
      int believers = 0;
      for (auto& in : instances) {
        if (in->dead) continue;
        auto epoch = in->keeper.epoch_of(shard, local(*in));
        if (!epoch) continue;
        ++believers;
        REQUIRE_MESSAGE(store.fence_ok(shard, in->id, *epoch),
                        "shard " << shard << " believed owned by " << in->id << " at epoch "
                                 << *epoch << " but the store fences it");
      }
      REQUIRE_MESSAGE(believers <= 1, "shard " << shard << " has " << believers << " owners");
    }
  }

  // Every shard owned by a live process, the one rendezvous names.
  bool covered_by_rendezvous() const {
    std::vector<std::string> live;
    for (auto& in : instances) {
      if (!in->dead && now() >= in->paused_until) live.push_back(in->id);
    }
    for (int shard = 0; shard < kShards; ++shard) {
      std::string want = rendezvous_owner(shard, live);
      for (auto& in : instances) {
        if (in->dead || in->id != want) continue;
        if (!in->keeper.epoch_of(shard, local(*in))) return false;
      }
    }
    return true;
  }
};

}  // namespace

TEST_CASE("lease options are checked, naming what is wrong") {
  CHECK(check_lease_options(options_for("a")).empty());
  LeaseOptions o = options_for("");
  CHECK(check_lease_options(o) == "instance id must not be empty");
  o = options_for("a");
  o.shard_count = 0;
  CHECK(check_lease_options(o) == "shard count must be in 1..4096");
  o = options_for("a");
  o.lease_ms = 2000;
  CHECK(check_lease_options(o).find("twice the renew interval") != std::string::npos);
}

TEST_CASE("the store keeps one shard count and one live process per instance id") {
  ManualClock clock;
  MemoryLeaseStore store(clock);
  REQUIRE(store.join("a", "a#1", 32).ok());
  auto mismatch = store.join("b", "b#1", 64);
  REQUIRE_FALSE(mismatch.ok());
  CHECK(mismatch.error().code == "config");
  CHECK(mismatch.error().message == "shard count 64 differs from the store's 32");

  REQUIRE(store.heartbeat("a", "a#1", kLease).ok());
  auto twin = store.join("a", "a#2", 32);  // a second process with the same id
  REQUIRE_FALSE(twin.ok());
  CHECK(twin.error().code == "conflict");
  // Once the first one's membership expired (it died), the id is free again,
  // and the replaced process is told so at its next heartbeat.
  clock.advance(kLease);
  REQUIRE(store.join("a", "a#2", 32).ok());
  auto old = store.heartbeat("a", "a#1", kLease);
  REQUIRE_FALSE(old.ok());
  CHECK(old.error().code == "conflict");
  CHECK(store.heartbeat("a", "a#2", kLease).ok());
}

TEST_CASE("a lease is fenced by its epoch and its expiry") {
  ManualClock clock;
  MemoryLeaseStore store(clock);
  REQUIRE(store.join("a", "a#1", 4).ok());
  REQUIRE(store.join("b", "b#1", 4).ok());
  auto won = store.acquire("a", {1}, kLease);
  REQUIRE(won.ok());
  REQUIRE(won->size() == 1);
  Grant a1 = won->front();
  CHECK(store.fence_ok(1, "a", a1.epoch));
  CHECK(store.acquire("b", {1}, kLease)->empty());  // held live: left alone
  clock.advance(kLease);                            // expired, nobody took it yet
  CHECK_FALSE(store.fence_ok(1, "a", a1.epoch));
  CHECK(store.renew("a", {a1}, kLease)->empty());  // a lapsed lease is not renewed
  auto b = store.acquire("b", {1}, kLease);
  REQUIRE(b->size() == 1);
  CHECK(b->front().epoch == a1.epoch + 1);
  CHECK_FALSE(store.fence_ok(1, "a", a1.epoch));
  CHECK(store.fence_ok(1, "b", b->front().epoch));
  CHECK(store.fence_refusals() == 2);
  REQUIRE(store.release("b", b->front()).ok());
  CHECK_FALSE(store.fence_ok(1, "b", b->front().epoch));
}

TEST_CASE("three instances own every shard once, as rendezvous says") {
  Cluster c;
  c.start("agent-a", 0);
  c.start("agent-b", 5'000'000);
  c.start("agent-c", -40'000);  // booted earlier: another monotonic origin
  c.run_for(3 * kRenew);
  CHECK(c.covered_by_rendezvous());
  size_t owned = 0;
  for (auto& in : c.instances) owned += in->keeper.owned_count();
  CHECK(owned == static_cast<size_t>(kShards));
}

TEST_CASE("kill -9 of an owner: the survivors take its shards within lease + one round") {
  Cluster c;
  c.max_latency_ms = 100;
  for (const char* id : {"agent-a", "agent-b", "agent-c"}) c.start(id, 0);
  c.run_for(3 * kRenew);
  REQUIRE(c.covered_by_rendezvous());
  c.instances[1]->dead = true;
  int64_t killed_at = c.now();
  while (!c.covered_by_rendezvous() && c.now() < killed_at + 4 * kLease) c.step();
  int64_t failover_ms = c.now() - killed_at;
  MESSAGE("failover after " << failover_ms << " ms");
  CHECK(c.covered_by_rendezvous());
  CHECK(failover_ms <= kLease + kRenew + c.max_latency_ms + kStep);

  // The same id restarts (a new process): it waits out its old membership,
  // then wins its shards back with new epochs.
  c.start("agent-b", 777);
  c.run_for(kLease + 3 * kRenew);
  CHECK(c.covered_by_rendezvous());
  CHECK(c.instances.back()->keeper.owned_count() > 0);
}

TEST_CASE("SIGSTOP past the lease: the paused owner stops using its shards and is fenced") {
  Cluster c;
  for (const char* id : {"agent-a", "agent-b", "agent-c"}) c.start(id, 1000);
  c.run_for(3 * kRenew);
  Instance& paused = *c.instances[2];
  std::vector<Grant> before = paused.keeper.held();
  REQUIRE_FALSE(before.empty());
  paused.paused_until = c.now() + 2 * kLease;
  c.run_for(2 * kLease);  // check_one_owner ran every step meanwhile
  // Awake, before any round of its own: nothing is believed owned any more,
  // and a write at an old epoch would be refused.
  for (const Grant& g : before) {
    CHECK_FALSE(paused.keeper.epoch_of(g.shard, c.local(paused)));
    CHECK_FALSE(c.store.fence_ok(g.shard, paused.id, g.epoch));
  }
  c.run_for(3 * kRenew);  // its membership lapsed but the session is its own: it comes back
  CHECK(c.covered_by_rendezvous());
  for (const Grant& g : before) {
    auto epoch = paused.keeper.epoch_of(g.shard, c.local(paused));
    REQUIRE(epoch);
    CHECK(*epoch > g.epoch);  // won again: rebuilt from the database
  }
}

TEST_CASE("a join moves shards to the newcomer without two owners at any instant") {
  Cluster c;
  c.max_latency_ms = 200;
  c.start("agent-a", 0);
  c.start("agent-b", 0);
  c.run_for(3 * kRenew);
  REQUIRE(c.covered_by_rendezvous());
  c.start("agent-c", 0);
  c.run_for(3 * kRenew);
  CHECK(c.covered_by_rendezvous());
  CHECK(c.instances[2]->keeper.owned_count() > 0);
}

TEST_CASE("random kills, restarts, pauses and latencies keep one owner per shard") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    Cluster c;
    c.rng = SeededRandom(seed);
    c.max_latency_ms = 300;
    for (const char* id : {"agent-a", "agent-b", "agent-c"}) {
      c.start(id, c.rng.range(-100'000, 100'000));
    }
    for (int event = 0; event < 12; ++event) {
      c.run_for(c.rng.range(100, 2 * kLease));
      Instance& in = *c.instances[static_cast<size_t>(c.rng.range(0, 2))];
      if (in.dead) {
        c.start(in.id, c.rng.range(-100'000, 100'000));  // restart (a new process)
        c.instances.erase(std::find_if(c.instances.begin(), c.instances.end(),
                                       [&](auto& p) { return p.get() == &in; }));
      } else if (c.rng.chance(0.5)) {
        in.dead = true;
      } else {
        in.paused_until = c.now() + c.rng.range(100, 3 * kLease);
      }
    }
    for (auto& in : c.instances) in->paused_until = 0;
    c.run_for(kLease + 4 * kRenew);  // quiet: everything settles
    CHECK(c.covered_by_rendezvous());
  }
}
