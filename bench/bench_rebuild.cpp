// Benchmark: the rebuild of an agent that gains shards (issue 35,
// docs/benchmarks.md "Rebuild after a shard moves"), in process: AgentCore
// over the shipped SQLite repository and over PostgreSQL 15 (started by the
// bench as the tests start it), InlineRunner, a transport that sends
// nothing.
//
// Each backend holds two logs of the same live fleet: 20 machines x 8
// slots, 10 tokens in each slot's pool, one open order per machine. One log
// has no history; the other has `history rows` more (default 1,000,000:
// finished orders, each with its SOLD token, its payment and two events,
// spread over the 20 machines and older than the live rows). Cores that
// own the 20 machines (cluster mode: an Ownership) are started, one on the
// log without history, two on the log with it (loading 1,000 finished
// orders, and none), and every run times AgentCore::rebuild() on each,
// interleaved. Target: the rebuild over the history, apart from the
// finished orders it is configured to load, within 1.5x the rebuild
// without history.
//
// VEND_BENCH_EXPLAIN=1 also prints the plans of the load's queries on the
// log with history (docs/agent.md, "Loading a shard").
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "core/agent_core.hpp"
#include "null_transport.hpp"
#include "postgres/postgres_repository.hpp"
#include "repository/repository.hpp"
#include "test_support.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"
#include "vend/random.hpp"
#include "vend/sqlite.hpp"

namespace vend::bench {
namespace {

using namespace vend::agent;

constexpr const char* kBench = "bench_rebuild";
constexpr int kMachines = 20;
constexpr int kSlots = 8;
constexpr int kTokensPerSlot = 10;
constexpr int kRowsPerFinishedOrder = 5;  // order, token, payment, 2 events
// The finished orders a rebuild loads (AgentOptions::finished_orders_max):
// bounded by configuration, not by history. The bench's is 1,000; the
// shipped default is 100,000 (docs/benchmarks.md).
constexpr size_t kFinishedOrdersMax = 1'000;

std::string machine_id(int m) { return "vm-" + std::to_string(100 + m); }

// The live fleet, written through the repository as the agent writes it.
void seed_live(Repository& repo) {
  Changeset c;
  for (int m = 0; m < kMachines; ++m) {
    const std::string vm = machine_id(m);
    c.insert_device(vm, std::string(64, 'a'), 1);
    for (int s = 1; s <= kSlots; ++s) {
      c.upsert_slot(vm, SlotSpec{s, "item", 100, kTokensPerSlot});
      std::vector<std::string> tokens;
      for (int k = 0; k < kTokensPerSlot; ++k) {
        tokens.push_back(vm + "-" + std::to_string(s) + "-" + std::to_string(k));
      }
      c.insert_pool_tokens(vm, s, "live-" + std::to_string(s), tokens);
    }
    Order o;
    o.id = "ord-open-" + vm;
    o.device = vm;
    o.slot = 1;
    o.token = vm + "-1-0";
    o.price_cents = 100;
    o.created_ms = o.updated_ms = 2'000'000'000'000;
    o.reserve_deadline_ms = o.created_ms + 300'000;
    c.insert_order(o);
    c.move_token(o.token, TokenState::kPool, TokenState::kReserved, o.id);
  }
  auto ticket = repo.submit(std::move(c));
  if (!ticket.ok()) throw std::runtime_error(ticket.error().to_string());
  if (auto s = repo.wait(*ticket); !s.ok()) throw std::runtime_error(s.error().to_string());
}

// The history's rows, for `per_machine` finished orders a machine. `series`
// is the backend's row source of i = 1..per_machine.
std::string history_sql(const std::string& series, int64_t per_machine) {
  const std::string n = std::to_string(per_machine);
  const std::string from = " FROM " + series + ", devices d";
  const std::string id = "d.id || '-' || i";
  return "INSERT INTO pool_tokens(token, device, slot, restock_id, state, order_id) SELECT "
         "'h-' || " +
         id + ", d.id, 1 + i % 8, 'hist', 'SOLD', 'ho-' || " + id + from +
         ";"
         "INSERT INTO orders(id, device, slot, token, price_cents, state, created_ms, "
         "updated_ms, reserve_deadline_ms, dispatch_expires_at_ms, payment_id) SELECT 'ho-' || " +
         id + ", d.id, 1 + i % 8, 'h-' || " + id + ", 100, 'COMPLETED', i, i, i, i, 'hp-' || " +
         id + from +
         ";"
         "INSERT INTO payments(payment_id, order_id, amount_cents, outcome, at_ms) SELECT "
         "'hp-' || " +
         id + ", 'ho-' || " + id + ", 100, 'applied', i" + from +
         ";"
         "INSERT INTO order_events(order_id, from_state, to_state, at_ms, detail) SELECT 'ho-' "
         "|| " +
         id + ", 'RESERVED', 'PAID', i, ''" + from +
         ";"
         "INSERT INTO order_events(order_id, from_state, to_state, at_ms, detail) SELECT 'ho-' "
         "|| " +
         id + ", 'DISPATCHED', 'COMPLETED', i, ''" + from + ";";
}

// SQLite: the history in one transaction on a second connection (the
// triggers count the SOLD tokens into their slots as the agent's writes do).
void seed_history_sqlite(const std::string& path, int64_t per_machine) {
  auto db = sql::Database::open(path);
  if (!db.ok()) throw std::runtime_error(db.error().to_string());
  std::string series =
      "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
      std::to_string(per_machine) + ") SELECT i FROM n)";
  auto s = db->exec("BEGIN;" + history_sql(series, per_machine) + "COMMIT;");
  if (!s.ok()) throw std::runtime_error(s.error().to_string());
}

// PostgreSQL: the same with the counting trigger off for the bulk insert
// (a trigger call per row would take minutes), then the slots counted once
// as the schema's migration does, and ANALYZE (autovacuum's job on a live
// database).
void seed_history_postgres(test::PostgresServer& pg, const std::string& db, int64_t per_machine) {
  pg.sql(db,
         "ALTER TABLE pool_tokens DISABLE TRIGGER USER;" +
             history_sql("generate_series(1, " + std::to_string(per_machine) + ") i", per_machine) +
             "ALTER TABLE pool_tokens ENABLE TRIGGER USER;"
             "UPDATE slots s SET sold = c.sold, burned = c.burned FROM (SELECT device, slot, "
             "count(*) FILTER (WHERE state = 'SOLD') AS sold, count(*) FILTER (WHERE state = "
             "'BURNED') AS burned FROM pool_tokens GROUP BY device, slot) c WHERE c.device = "
             "s.device AND c.slot = s.slot; ANALYZE;");
}

// One agent core on one log, owning the 20 machines.
class Instance {
 public:
  Instance(std::unique_ptr<Repository> repo, size_t finished_orders_max)
      : repo_(std::move(repo)), finished_orders_max_(finished_orders_max) {}

  void start() {
    AgentOptions options;
    options.finished_orders_max = finished_orders_max_;
    core_ = std::make_unique<AgentCore>(*repo_, transport_, clock_, random_, log_, options);
    if (auto s = core_->start(owns()); !s.ok()) throw std::runtime_error(s.error().to_string());
  }
  // Milliseconds of one rebuild.
  double rebuild_ms() {
    Stopwatch watch;
    if (auto s = core_->rebuild(owns()); !s.ok()) throw std::runtime_error(s.error().to_string());
    return watch.elapsed_s() * 1e3;
  }
  Repository& repo() { return *repo_; }

 private:
  static AgentCore::Ownership owns() {
    return [](const std::string& key) { return key.starts_with("vm-1"); };
  }

  NullLogger log_;
  SystemClock clock_;
  SecureRandom random_;
  NullTransport transport_;
  std::unique_ptr<Repository> repo_;
  size_t finished_orders_max_;
  std::unique_ptr<AgentCore> core_;
};

// VEND_BENCH_EXPLAIN=1: the plans of a filtered load's queries on the log
// with history (docs/agent.md "Loading a shard"), to stderr. The queries as
// the backends spell them (repository_reads.cpp, postgres_reads.cpp), the
// machines' ids and the loaded orders' ids in place of the parameters.
struct LoadQueries {
  std::string in_devices;  // "<column> IN <set>" for the backend, minus the column
  std::string payments_of_orders;
};

std::string sqlite_payments(const std::string& ids_json) {
  return "SELECT payment_id, at_ms FROM payments WHERE order_id IN (SELECT value FROM "
         "json_each('[" +
         ids_json + "]'))";
}

std::string postgres_payments(const std::string& ids) {
  return "SELECT payment_id, at_ms FROM unnest('{" + ids +
         "}'::text[]) AS x(wanted), LATERAL (SELECT payment_id, at_ms FROM payments WHERE "
         "order_id = x.wanted OFFSET 0) p";
}

std::vector<std::string> load_queries(const LoadQueries& q) {
  const std::string open = "('RESERVED', 'PAID', 'DISPATCHED')";
  return {
      "SELECT id FROM devices ORDER BY id",
      "SELECT d.id, d.key_hex, q.last_processed_seq FROM devices d LEFT JOIN device_seq q ON "
      "q.device = d.id WHERE d.id" +
          q.in_devices + " ORDER BY d.id",
      "SELECT device, ledger_id FROM retired_ledgers WHERE device" + q.in_devices +
          " ORDER BY device, retired_ms",
      "SELECT device, slot, product, price_cents, capacity, sold, burned FROM slots WHERE "
      "device" +
          q.in_devices + " ORDER BY device, slot",
      "SELECT token, device, slot FROM pool_tokens WHERE state = 'POOL' AND device" + q.in_devices,
      "SELECT restock_id, device, slot, count FROM restocks WHERE state = 'REQUESTED' AND "
      "device" +
          q.in_devices,
      "SELECT id FROM orders WHERE state IN " + open + " AND device" + q.in_devices +
          " ORDER BY created_ms, id",
      "SELECT id FROM orders WHERE state NOT IN " + open + " AND device" + q.in_devices +
          " ORDER BY updated_ms DESC, id LIMIT 1000",
      q.payments_of_orders +
          " UNION SELECT payment_id, at_ms FROM payments WHERE outcome = "
          "'unknown_order_refunded' ORDER BY 2, 1",
      "SELECT payment_id FROM refunds WHERE state = 'PENDING' ORDER BY at_ms, payment_id",
  };
}

std::string ids_of(int n, const std::string& prefix, const std::string& quote_open,
                   const std::string& quote_close) {
  std::string out;
  for (int m = 0; m < n; ++m) {
    out += (m == 0 ? "" : ",") + quote_open + prefix + machine_id(m) + quote_close;
  }
  return out;
}

void explain_sqlite(const std::string& path) {
  auto db = sql::Database::open(path);
  if (!db.ok()) throw std::runtime_error(db.error().to_string());
  LoadQueries q{" IN (SELECT value FROM json_each('[" + ids_of(kMachines, "", "\"", "\"") + "]'))",
                sqlite_payments(ids_of(kMachines, "ord-open-", "\"", "\""))};
  for (const auto& sql : load_queries(q)) {
    std::string plan;
    auto st = db->prepare("EXPLAIN QUERY PLAN " + sql);
    if (!st.ok()) throw std::runtime_error(st.error().to_string());
    while (st->step().value()) plan += "  " + st->column_text(3) + "\n";
    std::cerr << "sqlite> " << sql << "\n" << plan;
  }
}

// VEND_BENCH_EXPLAIN=analyze: with each plan node's actual time.
std::string explain_options() {
  const char* e = std::getenv("VEND_BENCH_EXPLAIN");
  return e != nullptr && std::string(e) == "analyze" ? "EXPLAIN (ANALYZE, COSTS OFF) "
                                                     : "EXPLAIN (COSTS OFF) ";
}

void explain_postgres(test::PostgresServer& pg, const std::string& db, int64_t per_machine_seeded) {
  LoadQueries q{" = ANY('{" + ids_of(kMachines, "", "", "") + "}'::text[])",
                postgres_payments(ids_of(kMachines, "ord-open-", "", ""))};
  if (const char* e = std::getenv("VEND_BENCH_EXPLAIN"); e && std::string(e) == "analyze") {
    // The 1,000 finished orders a rebuild loads, as its payments query names them.
    std::string ids = ids_of(kMachines, "ord-open-", "", "");
    for (int m = 0; m < kMachines; ++m) {
      for (int64_t i = 0; i < 50; ++i) {
        ids += ",ho-" + machine_id(m) + "-" + std::to_string(per_machine_seeded - i);
      }
    }
    q.payments_of_orders = postgres_payments(ids);
  }
  for (const auto& sql : load_queries(q)) {
    std::cerr << "postgresql> " << sql << "\n" << pg.query(db, explain_options() + sql);
  }
}

bool explain_wanted() {
  const char* e = std::getenv("VEND_BENCH_EXPLAIN");
  return e != nullptr && (std::string(e) == "1" || std::string(e) == "analyze");
}

std::unique_ptr<Repository> opened(Result<std::unique_ptr<Repository>> r) {
  if (!r.ok()) throw std::runtime_error(r.error().to_string());
  return std::move(r).value();
}

// Rebuilds of the three instances, interleaved: the log without history;
// the log with history, loading kFinishedOrdersMax finished orders; the
// same log loading none (what the history itself costs). Target: the last
// within 1.5x the first.
void measure(const Options& opt, Report& report, const std::string& backend, Instance& empty,
             Instance& history, Instance& history_no_finished) {
  std::vector<double> without, with, with_none_finished;
  for (int r = 0; r < std::max(opt.runs, 5); ++r) {
    without.push_back(empty.rebuild_ms());
    with.push_back(history.rebuild_ms());
    with_none_finished.push_back(history_no_finished.rebuild_ms());
  }
  const std::string a = backend + "_rebuild_ms_without_history";
  const std::string b = backend + "_rebuild_ms_with_history";
  const std::string c = backend + "_rebuild_ms_with_history_no_finished_orders";
  report.add(a, "ms", without, Better::kLower);
  report.add(b, "ms", with, Better::kLower);
  report.add(c, "ms", with_none_finished, Better::kLower);
  report.compare(b, a, RatioKind::kPlain);  // with / without, run by run
  report.compare(c, a, RatioKind::kPlain);
  report.target(c, "<= 1.5x " + a, report.at(c).ratio.value_or(1e9) <= 1.5);
}

void run(const Options& opt, Report& report) {
  const int64_t history_rows = scaled(opt, 1'000'000, 1'000);
  const int64_t per_machine =
      std::max<int64_t>(1, history_rows / (kMachines * kRowsPerFinishedOrder));
  NullLogger log;
  test::TempDir dir;
  progress(kBench, "sqlite: seeding two logs, one with " +
                       std::to_string(per_machine * kMachines * kRowsPerFinishedOrder) +
                       " history rows");
  auto sqlite_at = [&](const char* file, size_t finished_max) {
    return Instance(opened(Repository::open(dir.file(file), RepositoryOptions{}, log)),
                    finished_max);
  };
  Instance sqlite_empty = sqlite_at("empty.db", kFinishedOrdersMax);
  Instance sqlite_history = sqlite_at("history.db", kFinishedOrdersMax);
  seed_live(sqlite_empty.repo());
  seed_live(sqlite_history.repo());
  seed_history_sqlite(dir.file("history.db"), per_machine);
  Instance sqlite_history_none = sqlite_at("history.db", 0);
  if (explain_wanted()) explain_sqlite(dir.file("history.db"));
  sqlite_empty.start();
  sqlite_history.start();
  sqlite_history_none.start();
  progress(kBench, "sqlite: rebuilds");
  measure(opt, report, "sqlite", sqlite_empty, sqlite_history, sqlite_history_none);

  progress(kBench, "postgresql: starting the server and seeding two databases");
  test::PostgresServer pg;
  pg.create_database("empty");
  pg.create_database("history");
  auto pg_at = [&](const char* db, size_t finished_max) {
    return Instance(opened(open_postgres_repository(pg.url(db), RepositoryOptions{}, log)),
                    finished_max);
  };
  Instance pg_empty = pg_at("empty", kFinishedOrdersMax);
  Instance pg_history = pg_at("history", kFinishedOrdersMax);
  Instance pg_history_none = pg_at("history", 0);
  seed_live(pg_empty.repo());
  seed_live(pg_history.repo());
  seed_history_postgres(pg, "history", per_machine);
  pg.sql("empty", "ANALYZE");
  if (explain_wanted()) explain_postgres(pg, "history", per_machine);
  pg_empty.start();
  pg_history.start();
  pg_history_none.start();
  progress(kBench, "postgresql: rebuilds");
  measure(opt, report, "postgresql", pg_empty, pg_history, pg_history_none);

  report.note("20 machines x 8 slots x 10 pool tokens, one open order each; history: " +
              std::to_string(per_machine * kMachines) + " finished orders (" +
              std::to_string(per_machine * kMachines * kRowsPerFinishedOrder) +
              " rows: order, SOLD token, payment, 2 events each) on the same 20 machines");
  report.note(
      "AgentCore::rebuild() of a core owning the 20 machines (cluster mode), InlineRunner, no "
      "broker; finished_orders_max 1,000 (the finished orders a rebuild loads; bounded by "
      "configuration, not by history), and 0 for *_no_finished_orders (the history alone)");
  report.note(
      "postgresql: PostgreSQL 15 started by the bench on loopback, ANALYZE after the seed; "
      "sqlite: the shipped repository options (WAL), no ANALYZE");
}

}  // namespace
}  // namespace vend::bench

int main(int argc, char** argv) {
  return vend::bench::run_bench(argc, argv, "bench_rebuild", vend::bench::run);
}
