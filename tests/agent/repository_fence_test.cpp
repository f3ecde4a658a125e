// The repository's write fence (issue 14, several agents) on a real
// PostgreSQL 15 the test starts: instances A and B share one database and
// hold shards through PgLeaseStore leases; every write of a device carries
// its shard's epoch and commits only while that lease is its writer's
// (docs/design-decisions.md, "The fence, built").
#include <doctest/doctest.h>
#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "boom_at_commit.hpp"
#include "test_support.hpp"
#include "cluster/pg_lease_store.hpp"
#include "postgres/postgres_repository.hpp"
#include "repository/repository.hpp"
#include "cluster/shard_map.hpp"
#include "vend/log.hpp"
#include "write_gate.hpp"

using namespace vend;
using namespace vend::agent;

namespace {

using Gate = vend::test::WriteGate;
using Steady = std::chrono::steady_clock;

constexpr int kShards = 8;
constexpr int64_t kLeaseMs = 60'000;  // long: the cases move leases by release()

vend::test::PostgresServer& postgres() {
  static vend::test::PostgresServer server;
  return server;
}

// The first device id "vm-<n>" whose shard is `shard`.
std::string device_in(int shard, int skip = 0) {
  for (int n = 0;; ++n) {
    std::string id = "vm-" + std::to_string(n);
    if (shard_of(id, kShards) == shard && skip-- == 0) return id;
  }
}

int64_t ms_since(Steady::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - start).count();
}

// The first column of the first row of `sql` on `url` ("" if none).
std::string query_one(const std::string& url, const std::string& sql) {
  PGconn* conn = PQconnectdb(url.c_str());
  PGresult* r = PQexec(conn, sql.c_str());
  std::string out =
      PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  PQfinish(conn);
  return out;
}

// Waits until the server has run A's fence check of a group still being
// sent (the writer's session mid-pipeline, waiting for the rest of it).
bool wait_fence_checked(const std::string& url) {
  for (int i = 0; i < 200; ++i) {
    std::string seen = query_one(
        url,
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'vend-agent writer' "
        "AND state = 'active' AND wait_event = 'ClientRead' AND (query LIKE '%vend_fence%' OR "
        "query LIKE 'INSERT INTO snapshots%')");
    if (seen == "1") return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// One instance: its lease store connection and its repository.
struct Instance {
  std::string id;
  std::unique_ptr<PgLeaseStore> leases;
  std::unique_ptr<Repository> repo;
  std::map<int, uint64_t> epochs;

  Grant acquire(int shard, int64_t lease_ms = kLeaseMs) {
    auto won = leases->acquire(id, {shard}, lease_ms);
    REQUIRE_MESSAGE(won.ok(), vend::test::error_text(won));
    REQUIRE(won->size() == 1);
    epochs[shard] = won->front().epoch;
    fence();
    return won->front();
  }
  void release(int shard) { REQUIRE(leases->release(id, Grant{shard, epochs.at(shard)}).ok()); }
  // The fence as the lease thread would set it (after release(), a stale
  // one: the instance has not noticed yet).
  void fence() {
    auto f = std::make_shared<WriteFence>();
    f->instance = id;
    f->shard_count = kShards;
    f->epochs = epochs;
    auto s = repo->set_fence(f);
    REQUIRE_MESSAGE(s.ok(), vend::test::error_text(s));
  }
  Ticket submit(Changeset c) {
    auto t = repo->submit(std::move(c));
    REQUIRE(t.ok());
    return *t;
  }
  Status snapshot(const std::string& device, const std::string& payload) {
    Changeset c;
    c.put_snapshot(device, payload, 1);
    return repo->wait(submit(std::move(c)));
  }
};

// Two instances on a fresh database.
struct Cluster {
  explicit Cluster(RepositoryOptions options = {}) : db("fence_" + std::to_string(next_db++)) {
    postgres().create_database(db);
    a = open("A", options);
    b = open("B", options);
  }
  Instance open(const std::string& id, const RepositoryOptions& options) {
    Instance i;
    i.id = id;
    auto store = PgLeaseStore::open(postgres().url(db));
    REQUIRE_MESSAGE(store.ok(), vend::test::error_text(store));
    i.leases = std::move(*store);
    REQUIRE(i.leases->join(id, "session-" + id, kShards).ok());
    auto repo = open_postgres_repository(postgres().url(db), options, log);
    REQUIRE_MESSAGE(repo.ok(), vend::test::error_text(repo));
    i.repo = std::move(*repo);
    return i;
  }
  std::string stored_snapshot(const std::string& device) {
    auto s = b.repo->snapshot(device);
    REQUIRE(s.ok());
    return s->has_value() ? (*s)->payload : "";
  }

  static inline std::atomic<int> next_db{0};
  std::string db;
  MemoryLogger log;
  Instance a, b;
};

bool fenced(const Status& s) { return !s.ok() && s.error().code == "fenced"; }

std::string message(const Status& s) { return s.ok() ? "" : s.error().message; }

// A raw write that holds the writer until `open` is set, on its `run`-th
// run only (a raw write runs again each time its group is sent again).
WriteFn hold_at_run(int run, std::promise<void>& started, std::shared_future<void> open) {
  auto runs = std::make_shared<std::atomic<int>>(0);
  return [run, &started, open, runs](WriteContext&) {
    if (++*runs == run) {
      started.set_value();
      open.wait();
    }
    return Status{};
  };
}

}  // namespace

TEST_CASE("fence: the owner's writes commit; after a takeover the old owner's are refused") {
  Cluster c;
  const int k = 3;
  const std::string dev = device_in(k);
  c.a.acquire(k);
  CHECK_MESSAGE(c.a.snapshot(dev, "a-1").ok(), "A holds the shard");

  c.a.release(k);  // A's lease ends; A has not noticed yet (its fence is stale)
  Grant taken = c.b.acquire(k);
  CHECK(taken.epoch == c.a.epochs[k] + 1);

  Changeset stale;
  stale.put_snapshot(dev, "a-2", 2);
  stale.insert_fault(StoredFault{dev, "stale", "from A", 0, 2});
  Status refused = c.a.repo->wait(c.a.submit(std::move(stale)));
  REQUIRE_MESSAGE(fenced(refused), vend::test::error_text(refused));
  CHECK(message(refused).find("shard " + std::to_string(k)) != std::string::npos);
  CHECK(message(refused).find("by A at epoch " + std::to_string(c.a.epochs[k])) !=
        std::string::npos);

  CHECK(c.b.snapshot(dev, "b-1").ok());
  CHECK(c.stored_snapshot(dev) == "b-1");
  auto faults = c.b.repo->faults(dev, 10);
  REQUIRE(faults.ok());
  CHECK(faults->empty());  // nothing of the refused changeset
  WriterStats a = c.a.repo->stats();
  CHECK(a.fenced_writes == 1);
  CHECK(a.failed_writes == 0);
  CHECK(c.b.repo->stats().fenced_writes == 0);
}

TEST_CASE("fence: an expired lease refuses the write, on the store's clock") {
  Cluster c;
  const int k = 5;
  const std::string dev = device_in(k);
  // A lease long enough for the first write on a loaded machine; the
  // second comes once it has surely expired.
  constexpr int64_t kShortLeaseMs = 1000;
  c.a.acquire(k, kShortLeaseMs);
  auto acquired = Steady::now();  // the store granted it before this
  CHECK(c.a.snapshot(dev, "a-1").ok());
  std::this_thread::sleep_until(acquired + std::chrono::milliseconds(kShortLeaseMs + 200));
  Status late = c.a.snapshot(dev, "a-2");
  REQUIRE_MESSAGE(fenced(late), vend::test::error_text(late));
  CHECK(message(late).find("expired") != std::string::npos);
  CHECK(c.stored_snapshot(dev) == "a-1");
  CHECK(c.a.repo->stats().fenced_writes == 1);
}

TEST_CASE("fence: a shard not in the fence is refused before the database") {
  Cluster c;
  const int held = 1, other = 2;
  c.a.acquire(held);
  // One device of a held shard and one of another: the whole changeset goes.
  Changeset mixed;
  mixed.put_snapshot(device_in(held), "x", 1);
  mixed.put_snapshot(device_in(other), "y", 1);
  Status s = c.a.repo->wait(c.a.submit(std::move(mixed)));
  REQUIRE_MESSAGE(fenced(s), vend::test::error_text(s));
  CHECK(message(s).find("does not hold shard " + std::to_string(other)) != std::string::npos);
  CHECK(message(s).find("before the database") != std::string::npos);
  CHECK(c.stored_snapshot(device_in(held)).empty());

  // A changeset that names no device is not fenced; fence_device() names one.
  Changeset payment;
  payment.insert_payment(StoredPayment{"pay-1", "ord-1", 150, "applied", 1});
  CHECK(c.a.repo->wait(c.a.submit(std::move(payment))).ok());
  Changeset named;
  named.insert_payment(StoredPayment{"pay-2", "ord-2", 150, "applied", 1});
  named.fence_device(device_in(other));
  named.fence_device(device_in(other));
  CHECK(named.fenced_devices().size() == 1);
  CHECK(fenced(c.a.repo->wait(c.a.submit(std::move(named)))));
  CHECK(c.a.repo->find_payment("pay-1")->has_value());
  CHECK_FALSE(c.a.repo->find_payment("pay-2")->has_value());
  CHECK(c.a.repo->stats().fenced_writes == 2);
  CHECK(c.a.repo->stats().failed_writes == 0);
}

TEST_CASE("fence: a changeset keeps the fence it was submitted with") {
  Cluster c;
  const int k = 4;
  const std::string dev = device_in(k);
  Gate gate;
  REQUIRE(c.a.repo->submit(gate.write()).ok());
  gate.wait_started();
  Changeset before;
  before.put_snapshot(dev, "unfenced", 1);
  Ticket unfenced = c.a.submit(std::move(before));  // no fence yet: not checked
  c.a.fence();                                      // holds nothing
  Changeset after;
  after.put_snapshot(device_in(k, 1), "fenced", 1);
  Ticket refused = c.a.submit(std::move(after));
  gate.open();
  CHECK(c.a.repo->wait(unfenced).ok());
  CHECK(fenced(c.a.repo->wait(refused)));
  CHECK(c.stored_snapshot(dev) == "unfenced");
  // nullptr: no fence any more.
  REQUIRE(c.a.repo->set_fence(nullptr).ok());
  CHECK(c.a.snapshot(device_in(k, 1), "free").ok());
}

TEST_CASE("fence: a group mixing fenced and good changesets commits the good ones") {
  Cluster c;
  const int mine = 0, moved = 6, never = 7;
  c.a.acquire(mine);
  c.a.acquire(moved);
  c.a.release(moved);
  c.b.acquire(moved);  // A's fence still names `moved` at its old epoch
  Gate gate;
  REQUIRE(c.a.repo->submit(gate.write()).ok());
  gate.wait_started();
  std::vector<Ticket> tickets;
  const char* plan[] = {"good", "moved", "good", "never", "good", "moved"};
  for (int i = 0; i < 6; ++i) {
    std::string what = plan[i];
    int shard = what == "good" ? mine : what == "moved" ? moved : never;
    Changeset ch;
    ch.insert_fault(StoredFault{device_in(shard), what, "#" + std::to_string(i), 0, i});
    tickets.push_back(c.a.submit(std::move(ch)));
  }
  gate.open();
  for (int i = 0; i < 6; ++i) {
    Status s = c.a.repo->wait(tickets[i]);
    if (std::string(plan[i]) == "good") {
      CHECK_MESSAGE(s.ok(), i, ": ", vend::test::error_text(s));
    } else {
      CHECK_MESSAGE(fenced(s), i, ": ", vend::test::error_text(s));
    }
  }
  CHECK(c.a.repo->faults(device_in(mine), 10)->size() == 3);
  CHECK(c.a.repo->faults(device_in(moved), 10)->empty());
  WriterStats st = c.a.repo->stats();
  CHECK(st.fenced_writes == 3);
  CHECK(st.failed_writes == 0);
  CHECK(st.largest_batch >= 6);  // one group
}

// The pause the fence is built for: A's writer is stopped after part of its
// group reached the server (its fence check passed) and before the COMMIT.
// No timeout runs on a session mid-pipeline, so had that check locked the
// lease row, the takeover would wait for A to wake up. It does not: the
// locking check goes with the COMMIT, and refuses A's write there.
TEST_CASE(
    "fence: a writer paused mid-group does not hold up a takeover, and is refused at commit") {
  Cluster c;
  const int k = 2, other = 5;
  const std::string dev = device_in(k);
  c.a.acquire(k);
  c.a.acquire(other);
  std::promise<void> started, open;
  std::shared_future<void> opened = open.get_future().share();
  Gate gate;  // holds the writer while the group is queued
  REQUIRE(c.a.repo->submit(gate.write()).ok());
  gate.wait_started();
  Changeset big;  // over libpq's pipeline buffer: sent before the pause
  big.put_snapshot(dev, std::string(200'000, 's'), 1);
  Ticket paused = c.a.submit(std::move(big));
  Changeset pause;
  pause.add(hold_at_run(1, started, opened));
  Ticket pauser = c.a.submit(std::move(pause));
  Changeset fine;
  fine.put_snapshot(device_in(other), "still mine", 1);
  Ticket good = c.a.submit(std::move(fine));
  gate.open();
  started.get_future().wait();
  REQUIRE(wait_fence_checked(postgres().url(c.db)));

  c.a.release(k);
  auto t0 = Steady::now();
  c.b.acquire(k);
  CHECK(ms_since(t0) < 500);  // not waiting for A
  CHECK(c.b.snapshot(device_in(k, 1), "b-1").ok());
  open.set_value();

  Status s = c.a.repo->wait(paused);
  REQUIRE_MESSAGE(fenced(s), vend::test::error_text(s));
  CHECK(message(s).find("at commit") != std::string::npos);  // its early check had passed
  CHECK(c.a.repo->wait(pauser).ok());
  CHECK(c.a.repo->wait(good).ok());
  CHECK(c.stored_snapshot(dev).empty());
  CHECK(c.stored_snapshot(device_in(other)) == "still mine");
  CHECK(c.a.repo->stats().fenced_writes == 1);
}

// A writer paused between two round trips of a group (after a failing
// changeset) sits idle in its transaction, holding the row locks of the
// changesets before it. The server ends its session past the timeout; the
// new owner's write of the same row proceeds within it; the old writer
// finds its connection lost and fails every write from then on.
TEST_CASE(
    "fence: a writer idle in its transaction is ended by the timeout; the new owner proceeds") {
  RepositoryOptions options;
  options.pg_idle_in_transaction_timeout_ms = 300;
  Cluster c(options);
  const int k = 1, other = 3;
  const std::string dev = device_in(k);
  c.a.acquire(k);
  c.a.acquire(other);
  std::promise<void> started, open;
  std::shared_future<void> opened = open.get_future().share();
  Gate gate;
  REQUIRE(c.a.repo->submit(gate.write()).ok());
  gate.wait_started();
  Changeset first;
  first.put_snapshot(dev, "a-uncommitted", 1);  // locks the snapshot row
  Ticket locked = c.a.submit(std::move(first));
  Changeset bad;  // fails: the next round trip waits for the writer
  bad.advance_device_seq(device_in(other), 7, 8);
  Ticket conflict = c.a.submit(std::move(bad));
  Changeset pause;  // its second run: in the round trip after the failure
  pause.add(hold_at_run(2, started, opened));
  Ticket pauser = c.a.submit(std::move(pause));
  gate.open();
  started.get_future().wait();

  c.a.release(k);
  c.b.acquire(k);
  auto t0 = Steady::now();
  CHECK(c.b.snapshot(dev, "b-1").ok());  // waits for A's session to end
  int64_t waited = ms_since(t0);
  CHECK(waited < 1500);
  MESSAGE("the new owner's write waited ", waited, " ms for the idle session");
  open.set_value();

  CHECK(c.a.repo->wait(conflict).error().code == "conflict");
  CHECK(c.a.repo->wait(locked).error().code == "unavailable");
  CHECK(c.a.repo->wait(pauser).error().code == "unavailable");
  CHECK(c.a.snapshot(device_in(other), "later").error().code == "unavailable");  // fail-stop
  CHECK(c.stored_snapshot(dev) == "b-1");
}

// A lease change that locks rows out of shard order (one transaction here;
// a multi-row UPDATE in a store) meets the COMMIT's FOR SHARE in a
// deadlock. PostgreSQL aborts the fence's statement (its wait started
// first); nothing was committed, so the writer applies the group again.
TEST_CASE("fence: a deadlock with a lease change is retried, never lost or doubled") {
  Cluster c;
  const int low = 1, high = 2;
  c.a.acquire(low);
  c.a.acquire(high);
  const std::string url = postgres().url(c.db);
  PGconn* x = PQconnectdb(url.c_str());
  auto run = [x](const char* sql) {
    PGresult* r = PQexec(x, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok;
  };
  REQUIRE(run("SET deadlock_timeout = '10s'"));  // A's check finds the deadlock
  REQUIRE(run("BEGIN"));
  REQUIRE(run("UPDATE vend_shard_leases SET expires_at = expires_at WHERE shard = 2"));
  Changeset both;
  both.insert_fault(StoredFault{device_in(low), "both", "low", 0, 1});
  both.insert_fault(StoredFault{device_in(high), "both", "high", 0, 1});
  Ticket t = c.a.submit(std::move(both));
  bool waiting = false;  // A's COMMIT holds `low` and waits for `high`
  for (int i = 0; i < 300 && !waiting; ++i) {
    waiting = query_one(url,
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                        "'vend-agent writer' AND wait_event_type = 'Lock'") == "1";
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(waiting);
  CHECK(run("UPDATE vend_shard_leases SET expires_at = expires_at WHERE shard = 1"));
  CHECK(run("COMMIT"));
  PQfinish(x);
  Status s = c.a.repo->wait(t);
  CHECK_MESSAGE(s.ok(), vend::test::error_text(s));
  CHECK(c.log.contains("deadlock"));
  CHECK(c.a.repo->faults(device_in(low), 10)->size() == 1);
  CHECK(c.a.repo->faults(device_in(high), 10)->size() == 1);
  CHECK(c.a.repo->stats().fenced_writes == 0);
}

TEST_CASE("fence: a failing COMMIT retries each fenced write alone, each with its fence") {
  Cluster c;
  const int mine = 0, moved = 4;
  c.a.acquire(mine);
  c.a.acquire(moved);
  c.a.release(moved);
  c.b.acquire(moved);
  postgres().sql(c.db, vend::test::kBoomAtCommitSql);
  Gate gate;
  REQUIRE(c.a.repo->submit(gate.write()).ok());
  gate.wait_started();
  auto fault = [&](int shard, const std::string& code) {
    Changeset ch;
    ch.insert_fault(StoredFault{device_in(shard), code, "m", 0, 1});
    return c.a.submit(std::move(ch));
  };
  Ticket first = fault(mine, "a");
  Ticket stale = fault(moved, "stale");
  Ticket boom = fault(mine, "boom");
  Ticket last = fault(mine, "c");
  gate.open();
  CHECK_MESSAGE(c.a.repo->wait(first).ok(), vend::test::error_text(first.get()));
  CHECK(fenced(c.a.repo->wait(stale)));
  CHECK(c.a.repo->wait(boom).error().message.find("boom at commit") != std::string::npos);
  CHECK_MESSAGE(c.a.repo->wait(last).ok(), vend::test::error_text(last.get()));
  CHECK(c.log.contains("retrying each write alone"));
  CHECK(c.a.repo->faults(device_in(mine), 10)->size() == 2);
  CHECK(c.a.repo->faults(device_in(moved), 10)->empty());
  CHECK(c.a.repo->stats().failed_writes == 1);
  CHECK(c.a.repo->stats().fenced_writes == 1);
}

TEST_CASE("fence: SQLite, a database without the cluster tables, another shard count: config") {
  MemoryLogger log;
  vend::test::TempDir dir;
  auto sqlite = Repository::open(dir.file("agent.db"), RepositoryOptions{}, log);
  REQUIRE(sqlite.ok());
  auto fence = std::make_shared<WriteFence>(WriteFence{"A", kShards, {{0, 1}}});
  Status s = (*sqlite)->set_fence(fence);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "config");
  CHECK((*sqlite)->set_fence(nullptr).ok());

  postgres().create_database("fence_bare");
  auto bare = open_postgres_repository(postgres().url("fence_bare"), RepositoryOptions{}, log);
  REQUIRE(bare.ok());
  s = (*bare)->set_fence(fence);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "config");
  CHECK(s.error().message.find("no cluster tables") != std::string::npos);

  Cluster c;
  s = c.a.repo->set_fence(std::make_shared<WriteFence>(WriteFence{"A", kShards + 1, {}}));
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "config");
  CHECK(s.error().message.find("shard count") != std::string::npos);
  s = c.a.repo->set_fence(std::make_shared<WriteFence>(WriteFence{"", kShards, {}}));
  CHECK_FALSE(s.ok());
}
