// bench_stock: reserve() throughput of the agent's stock stores, in one run:
//   - EmbeddedStockStore, 1 and 2 threads;
//   - RedisStockStore against a real redis-server started here (the same Lua
//     script, EVALSHA): 1 connection, 50 connections (50 threads, pool 50),
//     and pipelined x16 (reserve_many) on 1 and 50 connections;
//   - SQLite: `UPDATE stock SET n = n - 1 WHERE key = ? AND n > 0`, WAL,
//     synchronous=NORMAL, one connection, one transaction per reserve.
// 10k keys "inv:vm-NNNN:S", each thread walks its own random permutation.
// Counters start at 10^9, so every reserve succeeds (only successes count;
// anything else is reported in the notes).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "test_support.hpp"
#include "vend/agent/embedded_stock_store.hpp"
#include "vend/agent/redis_stock_store.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"
#include "vend/sqlite.hpp"

namespace {

using vend::agent::ReserveResult;
using vend::agent::StockStore;
using namespace std::chrono_literals;

constexpr int kKeys = 10'000;
constexpr int64_t kFill = 1'000'000'000;
constexpr int kMaxThreads = 64;

std::vector<std::string> make_keys() {
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) {
    char device[16];
    std::snprintf(device, sizeof device, "vm-%04d", i / 10);
    keys.push_back(vend::agent::stock_key(device, i % 10));
  }
  return keys;
}

// Each thread's own walk over the keys, on its own cache line.
struct alignas(64) Cursor {
  std::vector<uint32_t> order;
  size_t pos = 0;
  uint32_t next() {
    uint32_t k = order[pos];
    pos = pos + 1 == order.size() ? 0 : pos + 1;
    return k;
  }
};

class Workload {
 public:
  Workload() : keys_(make_keys()), cursors_(kMaxThreads) {
    for (int t = 0; t < kMaxThreads; ++t) {
      Cursor& c = cursors_[static_cast<size_t>(t)];
      c.order.resize(kKeys);
      for (uint32_t i = 0; i < kKeys; ++i) c.order[i] = i;
      std::shuffle(c.order.begin(), c.order.end(), std::mt19937(static_cast<unsigned>(t) + 1));
    }
  }
  const std::vector<std::string>& keys() const { return keys_; }
  const std::string& next_key(int thread) {
    return keys_[cursors_[static_cast<size_t>(thread)].next()];
  }
  // Reserves that did not answer kOk (errors, kMissing, kInsufficient).
  std::atomic<uint64_t> failures{0};

 private:
  std::vector<std::string> keys_;
  std::vector<Cursor> cursors_;
};

// Single reserves, `threads` threads, for `d`.
double reserve_rate(StockStore& store, Workload& w, int threads, std::chrono::milliseconds d) {
  return vend::bench::ops_per_second_threads(threads, d, [&](int t) -> uint64_t {
    uint64_t ok = 0;
    for (int i = 0; i < 64; ++i) {
      auto r = store.reserve(w.next_key(t), 1);
      if (r.ok() && *r == ReserveResult::kOk) {
        ++ok;
      } else {
        w.failures.fetch_add(1, std::memory_order_relaxed);
      }
    }
    return ok;
  });
}

// reserve_many() batches of `depth` items, `threads` threads, for `d`.
double reserve_many_rate(StockStore& store, Workload& w, int threads, int depth,
                         std::chrono::milliseconds d) {
  return vend::bench::ops_per_second_threads(threads, d, [&](int t) -> uint64_t {
    std::vector<StockStore::ReserveItem> items;
    items.reserve(static_cast<size_t>(depth));
    for (int i = 0; i < depth; ++i) items.emplace_back(w.next_key(t), 1);
    auto r = store.reserve_many(items);
    uint64_t ok = 0;
    if (r.ok()) ok = static_cast<uint64_t>(std::count(r->begin(), r->end(), ReserveResult::kOk));
    w.failures.fetch_add(static_cast<uint64_t>(depth) - ok, std::memory_order_relaxed);
    return ok;
  });
}

// The SQLite baseline: one connection, autocommit UPDATE per reserve.
class SqliteStock {
 public:
  static std::unique_ptr<SqliteStock> open(const std::string& path, const Workload& w) {
    vend::sql::OpenOptions o;
    o.synchronous = vend::sql::Sync::kNormal;
    auto db = vend::sql::Database::open(path, o);
    if (!db) throw std::runtime_error(db.error().to_string());
    auto self = std::unique_ptr<SqliteStock>(new SqliteStock(std::move(*db)));
    self->fill(w);
    return self;
  }

  double rate(Workload& w, std::chrono::milliseconds d) {
    return vend::bench::ops_per_second(d, [&]() -> uint64_t {
      uint64_t ok = 0;
      for (int i = 0; i < 64; ++i) {
        auto changed = update_->bind(1, w.next_key(0)).run();
        if (changed.ok() && *changed == 1) {
          ++ok;
        } else {
          w.failures.fetch_add(1, std::memory_order_relaxed);
        }
      }
      return ok;
    });
  }

 private:
  explicit SqliteStock(vend::sql::Database db) : db_(std::move(db)) {}

  void fill(const Workload& w) {
    check(db_.exec("CREATE TABLE stock (key TEXT PRIMARY KEY, n INTEGER NOT NULL)"));
    check(db_.exec("BEGIN"));
    auto insert = db_.prepare("INSERT INTO stock (key, n) VALUES (?, ?)");
    if (!insert) throw std::runtime_error(insert.error().to_string());
    for (const std::string& key : w.keys()) check(insert->bind(1, key).bind(2, kFill).run());
    check(db_.exec("COMMIT"));
    auto update = db_.prepare("UPDATE stock SET n = n - 1 WHERE key = ? AND n > 0");
    if (!update) throw std::runtime_error(update.error().to_string());
    update_.emplace(std::move(*update));
  }
  template <typename R>
  static void check(const R& r) {
    if (!r.ok()) throw std::runtime_error(r.error().to_string());
  }

  vend::sql::Database db_;
  std::optional<vend::sql::Statement> update_;
};

std::unique_ptr<vend::agent::RedisStockStore> open_redis(const vend::test::RedisServer& server,
                                                         int pool, const vend::Clock& clock,
                                                         vend::Logger& logger) {
  vend::agent::RedisOptions o;
  o.port = server.port();
  o.pool_size = pool;
  // 50 client threads and the server share 2 cores: a reply can take long.
  o.command_timeout = 5000ms;
  o.connect_timeout = 2000ms;
  return std::make_unique<vend::agent::RedisStockStore>(o, clock, logger);
}

void fill(StockStore& store, const Workload& w) {
  for (const std::string& key : w.keys()) {
    auto s = store.load(key, kFill);
    if (!s.ok()) throw std::runtime_error("load: " + s.error().to_string());
  }
}

void run(const vend::bench::Options& opt, vend::bench::Report& report) {
  const std::chrono::milliseconds d{vend::bench::scaled(opt, 1000, 50)};
  Workload w;
  vend::SystemClock clock;
  vend::NullLogger logger;

  vend::agent::EmbeddedStockStore embedded;
  fill(embedded, w);
  vend::test::RedisServer server;
  auto redis1 = open_redis(server, 1, clock, logger);
  auto redis50 = open_redis(server, 50, clock, logger);
  fill(*redis1, w);
  vend::test::TempDir dir;
  auto sqlite = SqliteStock::open(dir.file("stock.db"), w);

  // name -> runs, measured interleaved so each run's figures share its noise.
  std::vector<std::pair<std::string, std::vector<double>>> m = {
      {"embedded_1t", {}},     {"embedded_2t", {}},        {"redis_1conn", {}},
      {"redis_50conn", {}},    {"redis_pipe16_1conn", {}}, {"redis_pipe16_50conn", {}},
      {"sqlite_wal_1conn", {}}};
  for (int r = 0; r < opt.runs; ++r) {
    vend::bench::progress("bench_stock", "run " + std::to_string(r + 1));
    m[0].second.push_back(reserve_rate(embedded, w, 1, d));
    m[1].second.push_back(reserve_rate(embedded, w, 2, d));
    m[2].second.push_back(reserve_rate(*redis1, w, 1, d));
    m[3].second.push_back(reserve_rate(*redis50, w, 50, d));
    m[4].second.push_back(reserve_many_rate(*redis1, w, 1, 16, d));
    m[5].second.push_back(reserve_many_rate(*redis50, w, 50, 16, d));
    m[6].second.push_back(sqlite->rate(w, d));
  }
  for (auto& [name, runs] : m) report.add(name, "reserves/s", runs);
  // The embedded figures against each baseline (rows repeat the value).
  report.add("embedded_1t_vs_sqlite", "reserves/s", m[0].second);
  report.add("embedded_2t_vs_redis_pipe16", "reserves/s", m[1].second);
  report.compare("embedded_1t", "redis_1conn");
  report.compare("embedded_2t", "redis_50conn");
  report.compare("embedded_1t_vs_sqlite", "sqlite_wal_1conn");
  report.compare("embedded_2t_vs_redis_pipe16", "redis_pipe16_50conn");
  report.compare("redis_pipe16_50conn", "redis_50conn");
  report.target_value("embedded_1t", 2e6);
  report.target_ratio_at_least("embedded_2t", 20);

  report.note("10k keys, each thread walks its own random permutation; counters start at 1e9");
  report.note("redis: redis-server " + std::string("started by the bench on loopback, no ") +
              "persistence; reserve = the store's Lua script via EVALSHA; Nconn = N threads "
              "sharing a pool of N connections; pipe16 = reserve_many of 16 items");
  report.note(
      "sqlite: UPDATE stock SET n = n - 1 WHERE key = ? AND n > 0, WAL, "
      "synchronous=NORMAL, autocommit (one transaction per reserve), one connection");
  report.note("reserves that did not succeed (counted out): " + std::to_string(w.failures.load()));
}

}  // namespace

int main(int argc, char** argv) { return vend::bench::run_bench(argc, argv, "bench_stock", run); }
