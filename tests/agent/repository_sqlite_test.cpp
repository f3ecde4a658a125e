// What only the SQLite backend has: a database of the previous agent
// (schema v4) migrated in place, and the WAL checkpoints kept off the writer
// thread (repository_checkpointer.hpp) with the WAL bounded.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "repository/repository.hpp"
#include "repository/repository_checkpointer.hpp"
#include "repository/repository_schema.hpp"
#include "test_support.hpp"
#include "vend/log.hpp"

using namespace vend;
using namespace vend::agent;

namespace {

int64_t scalar(sql::Database& db, const std::string& query) {
  auto st = db.prepare(query);
  REQUIRE(st.ok());
  REQUIRE(st->step().value());
  return st->column_int64(0);
}

std::string plan_of(sql::Database& db, const std::string& query) {
  auto st = db.prepare("EXPLAIN QUERY PLAN " + query);
  REQUIRE(st.ok());
  std::string plan;
  while (st->step().value()) plan += st->column_text(3) + "\n";
  return plan;
}

int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

// A database as the previous agent left it: its migrations (1..4) and rows
// written with its SQL, a random-id order holding one token.
void write_v4_database(const std::string& path) {
  auto db = sql::Database::open(path);
  REQUIRE(db.ok());
  const auto& all = detail::migrations();
  REQUIRE(all.size() >= 4);
  REQUIRE(all[3].version == 4);
  REQUIRE(db->migrate({all.begin(), all.begin() + 4}).ok());
  REQUIRE(db->exec(R"sql(
    INSERT INTO devices(id, key_hex, created_ms) VALUES('vm-1', 'aa', 1);
    INSERT INTO device_seq(device, last_processed_seq) VALUES('vm-1', 7);
    INSERT INTO slots VALUES('vm-1', 1, 'cola', 150, 10);
    INSERT INTO pool_tokens VALUES('t-1', 'vm-1', 1, 'rst-1', 'SOLD', 'ord-old-sold');
    INSERT INTO pool_tokens VALUES('t-2', 'vm-1', 1, 'rst-1', 'RESERVED',
                                   'ord-0123456789abcdef0123456789abcdef');
    INSERT INTO pool_tokens VALUES('t-3', 'vm-1', 1, 'rst-1', 'POOL', NULL);
    INSERT INTO pool_tokens VALUES('t-4', 'vm-1', 1, 'rst-1', 'POOL', NULL);
    INSERT INTO orders(id, device, slot, token, price_cents, state, created_ms, updated_ms,
                       reserve_deadline_ms, dispatch_expires_at_ms)
      VALUES('ord-0123456789abcdef0123456789abcdef', 'vm-1', 1, 't-2', 150, 'RESERVED',
             100, 100, 300100, 0);
    INSERT INTO order_events(order_id, from_state, to_state, at_ms)
      VALUES('ord-0123456789abcdef0123456789abcdef', '', 'RESERVED', 100);
  )sql")
              .ok());
  REQUIRE(db->user_version().value() == 4);
}

}  // namespace

TEST_CASE("sqlite: a database of the previous agent (v4) opens, migrates and keeps working") {
  vend::test::TempDir dir;
  const std::string path = dir.file("agent.db");
  write_v4_database(path);
  MemoryLogger log;
  {
    auto repo = Repository::open(path, RepositoryOptions{}, log);
    REQUIRE_MESSAGE(repo.ok(), vend::test::error_text(repo));
    auto loaded = (*repo)->load(100);
    REQUIRE(loaded.ok());
    REQUIRE(loaded->slots.size() == 1);
    CHECK(loaded->slots[0].sold == 1);
    REQUIRE(loaded->pool.size() == 2);
    CHECK(loaded->pool[0].token == "t-3");  // mint order kept
    REQUIRE(loaded->open_orders.size() == 1);
    const Order old = loaded->open_orders[0];
    CHECK(old.id == "ord-0123456789abcdef0123456789abcdef");

    // The old order is paid and a new one (a time-ordered id) reserves.
    Order paid = old;
    paid.state = OrderState::kPaid;
    paid.payment_id = "pay-1";
    paid.updated_ms = 200;
    Order fresh;
    fresh.id = "ord-00000000012c00112233445566778899aabbccddeeff";
    fresh.device = "vm-1";
    fresh.slot = 1;
    fresh.token = "t-3";
    fresh.price_cents = 150;
    fresh.state = OrderState::kReserved;
    fresh.created_ms = fresh.updated_ms = 300;
    fresh.reserve_deadline_ms = 300300;
    Changeset c;
    c.insert_payment(StoredPayment{"pay-1", old.id, 150, "applied", 200});
    c.transition_order(paid, OrderState::kReserved, "payment pay-1");
    c.move_token("t-2", TokenState::kReserved, TokenState::kDispatched, old.id);
    c.insert_order(fresh);
    c.move_token("t-3", TokenState::kPool, TokenState::kReserved, fresh.id);
    auto t = (*repo)->submit(std::move(c));
    REQUIRE(t.ok());
    REQUIRE((*repo)->wait(*t).ok());

    auto counts = (*repo)->token_counts("vm-1", 1);
    REQUIRE(counts.ok());
    CHECK((*counts)[TokenState::kPool] == 1);
    CHECK((*counts)[TokenState::kReserved] == 1);
    CHECK((*counts)[TokenState::kDispatched] == 1);
    CHECK((*counts)[TokenState::kSold] == 1);
    // The old order's creation event was stored: reported once, not twice.
    auto events = (*repo)->order_events(old.id);
    REQUIRE(events.ok());
    REQUIRE(events->size() == 2);
    CHECK((*events)[0].from_state.empty());
    CHECK((*events)[0].at_ms == 100);
    CHECK((*events)[1].from_state == "RESERVED");
    // The new one's is derived from its row.
    auto created = (*repo)->order_events(fresh.id);
    REQUIRE(created.ok());
    REQUIRE(created->size() == 1);
    CHECK((*created)[0].from_state.empty());
    CHECK((*created)[0].to_state == "RESERVED");
    CHECK((*created)[0].at_ms == 300);
    CHECK((*created)[0].detail == vend::agent::kCreationDetail);
  }
  // Opened again (v5 now: nothing to migrate), everything is still there.
  auto repo = Repository::open(path, RepositoryOptions{}, log);
  REQUIRE_MESSAGE(repo.ok(), vend::test::error_text(repo));
  auto loaded = (*repo)->load(100);
  REQUIRE(loaded.ok());
  CHECK(loaded->open_orders.size() == 2);
  CHECK(loaded->pool.size() == 1);
  repo->reset();

  auto db = sql::Database::open(path);
  REQUIRE(db.ok());
  // A reservation writes its row and its token, no order_events row.
  CHECK(scalar(*db, "SELECT count(*) FROM order_events") == 2);
  CHECK(db->user_version().value() == static_cast<int>(detail::migrations().size()));
  CHECK(scalar(*db, "SELECT count(*) FROM sqlite_master WHERE name = 'pool_tokens_by_slot'") == 0);
  // The per-slot reads still find the slot's rows by the index, not a scan.
  CHECK(plan_of(*db,
                "SELECT state, count(*) FROM pool_tokens WHERE device = 'vm-1' AND slot = 1 "
                "GROUP BY state")
            .find("pool_tokens_by_device_slot") != std::string::npos);
}

TEST_CASE("sqlite: WAL checkpoints off the writer keep the WAL bounded under steady writes") {
  vend::test::TempDir dir;
  const std::string path = dir.file("wal.db");
  sql::OpenOptions options;
  options.synchronous = sql::Sync::kOff;  // the test is about sizes, not fsyncs
  auto writer = sql::Database::open(path, options);
  REQUIRE(writer.ok());
  REQUIRE(writer->exec("CREATE TABLE t(id INTEGER PRIMARY KEY, pad TEXT NOT NULL)").ok());
  MemoryLogger log;
  detail::CheckpointLimits limits{20, 100};
  auto ckpt = detail::SqliteCheckpointer::start(path, options, limits, log);
  REQUIRE(ckpt.ok());
  (*ckpt)->attach(*writer);
  auto reader = sql::Database::open(path, options);
  REQUIRE(reader.ok());

  const std::string pad(3000, 'x');  // about one page per row
  auto commit_row = [&](int id) {
    // As the backend does between two groups.
    if ((*ckpt)->finish_due()) (*ckpt)->finish_on(*writer);
    auto tx = sql::Transaction::begin(*writer);
    REQUIRE(tx.ok());
    auto ins = writer->prepare("INSERT INTO t(id, pad) VALUES(?, ?)");
    REQUIRE(ins.ok());
    ins->bind(1, int64_t{id}).bind(2, pad);
    REQUIRE(ins->run().ok());
    REQUIRE(tx->commit().ok());
  };
  const int kCommits = 1500;  // 2 frames each: 3,000 frames if the WAL never started over
  int64_t largest_wal = 0;
  for (int i = 1; i <= kCommits; ++i) {
    commit_row(i);
    if (i % 100 == 0) CHECK(scalar(*reader, "SELECT count(*) FROM t") == i);
    largest_wal = std::max(largest_wal, file_size(path + "-wal"));
  }
  auto counts = (*ckpt)->counts();
  INFO("passive ", counts.passive, " finished ", counts.finished, " deferred ", counts.deferred);
  CHECK(counts.passive > 0);
  CHECK(counts.finished > 0);
  // restart_pages plus what the writer adds while a checkpoint of the thread
  // is under way (then the writer's own one waits for the next group): on a
  // loaded machine that thread can be off its core for many of these fast
  // commits, so the bound is loose; without the writer's checkpoints the WAL
  // grows to 3,000 frames.
  constexpr int64_t kFrame = 4096 + 24;
  CHECK(largest_wal < 10 * limits.restart_pages * kFrame);
  CHECK(largest_wal > limits.passive_pages * kFrame);
  // Once the thread is idle, the writer's checkpoint and the next commit start
  // the WAL over: it holds only that commit's frames.
  bool started_over = false;
  int next_id = kCommits + 1;
  for (int attempt = 0; attempt < 20 && !started_over; ++attempt) {
    while (!(*ckpt)->finish_due()) commit_row(next_id++);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the thread is done
    commit_row(next_id++);
    int log = -1, copied = -1;
    REQUIRE(sqlite3_wal_checkpoint_v2(reader->handle(), nullptr, SQLITE_CHECKPOINT_PASSIVE, &log,
                                      &copied) == SQLITE_OK);
    started_over = log >= 0 && log < 10;
  }
  CHECK(started_over);
  (*ckpt)->detach(*writer);
  ckpt->reset();
  reader = sql::Database::open(path, options);
  REQUIRE(reader.ok());
  CHECK(scalar(*reader, "SELECT count(*) FROM t") >= kCommits);
}

namespace {

// The program SQLite runs for `statement` opens an ephemeral table.
bool opens_ephemeral(sql::Database& db, const std::string& statement) {
  auto st = db.prepare("EXPLAIN " + statement);
  REQUIRE(st.ok());
  bool found = false;
  while (st->step().value()) found = found || st->column_text(1) == "OpenEphemeral";
  return found;
}

std::string table_text(sql::Database& db, const std::string& table) {
  auto st = db.prepare("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?");
  REQUIRE(st.ok());
  st->bind(1, table);
  REQUIRE(st->step().value());
  return st->column_text(0);
}

}  // namespace

// SQLite codes `state IN ('A','B','C',...)` as an ephemeral index built on
// every run of the CHECK: each order, token and refund write paid for it.
TEST_CASE("sqlite: the state CHECKs build no ephemeral table per write, old databases too") {
  vend::test::TempDir dir;
  const std::string fresh_path = dir.file("fresh.db");
  const std::string old_path = dir.file("old.db");
  write_v4_database(old_path);
  MemoryLogger log;
  for (const std::string& path : {fresh_path, old_path}) {
    CAPTURE(path);
    {
      auto repo = Repository::open(path, RepositoryOptions{}, log);
      REQUIRE_MESSAGE(repo.ok(), vend::test::error_text(repo));
    }
    auto db = sql::Database::open(path);
    REQUIRE(db.ok());
    CHECK(db->user_version().value() == static_cast<int>(detail::migrations().size()));
    for (const char* table : {"orders", "pool_tokens", "refunds"}) {
      CAPTURE(table);
      std::string text = table_text(*db, table);
      CHECK(text.find("state IN (") == std::string::npos);
      CHECK(text.find("state = '") != std::string::npos);
    }
    CHECK_FALSE(opens_ephemeral(
        *db,
        "UPDATE pool_tokens SET state = 'SOLD', order_id = 'o' WHERE token = 't-2' AND "
        "state = 'DISPATCHED'"));
    CHECK_FALSE(opens_ephemeral(
        *db,
        "UPDATE orders SET state = 'PAID', updated_ms = 1 WHERE id = 'o' AND state = "
        "'RESERVED'"));
    CHECK_FALSE(
        opens_ephemeral(*db, "UPDATE refunds SET state = 'DELIVERED' WHERE payment_id = 'p'"));
    CHECK(table_text(*db, "orders").find("NEEDS_REVIEW") != std::string::npos);
    auto check = db->prepare("PRAGMA quick_check");
    REQUIRE(check.ok());
    REQUIRE(check->step().value());
    CHECK(check->column_text(0) == "ok");
    // The CHECKs still refuse a state no code knows, and take every known one.
    CHECK(db->exec("INSERT INTO pool_tokens VALUES('t-9', 'vm-1', 1, 'rst-9', 'POOL', NULL)").ok());
    CHECK_FALSE(db->exec("UPDATE pool_tokens SET state = 'LOST' WHERE token = 't-9'").ok());
    CHECK(db->exec("UPDATE pool_tokens SET state = 'BURNED' WHERE token = 't-9'").ok());
    CHECK_FALSE(db->exec("INSERT INTO orders(id, device, slot, token, price_cents, state, "
                         "created_ms, updated_ms, reserve_deadline_ms, dispatch_expires_at_ms) "
                         "VALUES('o-bad', 'vm-1', 1, 't', 1, 'SHIPPED', 1, 1, 1, 0)")
                    .ok());
    CHECK(db->exec("INSERT INTO orders(id, device, slot, token, price_cents, state, "
                   "created_ms, updated_ms, reserve_deadline_ms, dispatch_expires_at_ms) "
                   "VALUES('o-ok', 'vm-1', 1, 't', 1, 'NEEDS_REVIEW', 1, 1, 1, 0)")
              .ok());
  }
  // The old database's rows are all there after the rewrite.
  auto repo = Repository::open(old_path, RepositoryOptions{}, log);
  REQUIRE_MESSAGE(repo.ok(), vend::test::error_text(repo));
  auto loaded = (*repo)->load(100);
  REQUIRE(loaded.ok());
  CHECK(loaded->pool.size() == 2);
  CHECK(loaded->open_orders.size() == 1);
}

// agent.db holds every device's key: created 0600 whatever the umask, and
// its -wal and -shm with it; an existing file keeps the mode it has.
TEST_CASE("the agent's SQLite database and its -wal and -shm are created mode 0600") {
  test::TempDir dir;
  const std::string path = dir.file("agent.db");
  MemoryLogger log;
  const mode_t old_umask = ::umask(022);  // a permissive umask, as a shell's default
  {
    auto repo = Repository::open(path, RepositoryOptions{}, log);
    ::umask(old_umask);
    REQUIRE(repo.ok());
    Changeset changes;
    changes.insert_device("vm-1", std::string(64, 'a'), 1);
    auto ticket = (*repo)->submit(std::move(changes));
    REQUIRE(ticket.ok());
    REQUIRE((*repo)->wait(*ticket).ok());
    for (const std::string& file : {path, path + "-wal", path + "-shm"}) {
      struct stat st {};
      REQUIRE_MESSAGE(::stat(file.c_str(), &st) == 0, file);
      CHECK_MESSAGE((st.st_mode & 0777) == 0600,
                    file << " has mode " << std::oct << (st.st_mode & 0777));
    }
  }
  // An operator's chmod stays.
  REQUIRE(::chmod(path.c_str(), 0640) == 0);
  auto again = Repository::open(path, RepositoryOptions{}, log);
  REQUIRE(again.ok());
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
}
