// The repository contract, run on both backends: SQLite and a real
// PostgreSQL 15 the test starts (tests/support PostgresServer; a server that
// cannot start fails the test). Group commit, per-write isolation inside a
// group, back-pressure, draining on destruction, and the start-up load.
// Then what only one backend has: SQLite's disk full mid-group; PostgreSQL's
// lost connection, bad URLs and a schema from a newer agent.
#include "repository/repository.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "boom_at_commit.hpp"
#include "postgres/postgres_repository.hpp"
#include "repository_backends.hpp"
#include "test_support.hpp"
#include "vend/log.hpp"
#include "write_gate.hpp"

using namespace vend;
using namespace vend::agent;

namespace {

using Gate = vend::test::WriteGate;
using vend::test::Fixture;
using vend::test::OnPostgres;
using vend::test::OnSqlite;
using vend::test::postgres;

Order reserved_order(const std::string& id, const std::string& token) {
  Order o;
  o.id = id;
  o.device = "vm-1";
  o.slot = 1;
  o.token = token;
  o.price_cents = 150;
  o.created_ms = o.updated_ms = 1000;
  o.reserve_deadline_ms = 5000;
  return o;
}

}  // namespace

TEST_CASE_TEMPLATE("writes queued while the writer is busy commit as one group", B, OnSqlite,
                   OnPostgres) {
  Fixture<B> f;
  Gate gate;
  REQUIRE(f.repo->submit(gate.write()).ok());
  gate.wait_started();
  std::vector<Ticket> tickets;
  for (int i = 0; i < 100; ++i) tickets.push_back(f.fault("f" + std::to_string(i)));
  gate.open();
  for (auto& t : tickets) CHECK(t.get().ok());
  WriterStats s = f.repo->stats();
  CHECK(s.batches == 2);
  CHECK(s.largest_batch == 100);
  CHECK(s.failed_writes == 0);
  CHECK(f.fault_count() == 100);
}

TEST_CASE_TEMPLATE("a failing write is rolled back alone; the rest of its group commits", B,
                   OnSqlite, OnPostgres) {
  Fixture<B> f;
  Gate gate;
  REQUIRE(f.repo->submit(gate.write()).ok());
  gate.wait_started();
  Ticket a = f.fault("a");
  Changeset bad;
  bad.insert_fault(StoredFault{"vm-1", "b", "m", 0, 1});
  bad.transition_order(reserved_order("ord-missing", "t"), OrderState::kReserved, "x");
  Ticket b = f.submit(std::move(bad));
  Ticket c = f.fault("c");
  CHECK_FALSE(f.repo->has_failed_writes());
  gate.open();
  CHECK(a.get().ok());
  REQUIRE_FALSE(b.get().ok());
  CHECK(b.get().error().code == "conflict");
  CHECK(c.get().ok());
  auto faults = f.repo->faults("vm-1", 10);
  REQUIRE(faults->size() == 2);
  CHECK((*faults)[0].code == "c");
  CHECK((*faults)[1].code == "a");
  CHECK(f.repo->stats().failed_writes == 1);
  CHECK(f.repo->has_failed_writes());  // the core's lock-free check says the same
}

// SQLITE_FULL (and IOERR) may roll the whole transaction back on its own;
// the statements after it would then run in autocommit mode, and the retry
// of the group would apply them a second time. Pins that down with a cap on
// the database's pages (a disk that fills up mid-group).
TEST_CASE(
    "sqlite: a disk full mid-group: nothing committed twice, no durable write answered failed") {
  Fixture<> f;
  Gate gate;
  REQUIRE(f.repo
              ->submit([](WriteContext& ctx) {
                auto pages = ctx.sqlite()->prepare("PRAGMA page_count");
                if (!pages.ok()) return Status(pages.error());
                (void)pages->step();
                int64_t n = pages->column_int64(0);
                return ctx.sqlite()->exec("PRAGMA max_page_count = " + std::to_string(n + 3));
              })
              .ok());
  REQUIRE(f.repo->submit(gate.write()).ok());
  gate.wait_started();
  Changeset first;
  first.insert_payment(StoredPayment{"pay-1", "ord-1", 150, "applied", 1});
  Ticket a = f.submit(std::move(first));
  Changeset huge;
  huge.insert_fault(StoredFault{"vm-1", "big", std::string(400 * 1024, 'x'), 0, 1});
  Ticket b = f.submit(std::move(huge));
  Changeset last;
  last.insert_payment(StoredPayment{"pay-2", "ord-2", 150, "applied", 2});
  Ticket c = f.submit(std::move(last));
  gate.open();
  REQUIRE_FALSE(b.get().ok());
  CHECK(b.get().error().code == "sqlite_full");
  CHECK_MESSAGE(a.get().ok(), vend::test::error_text(a.get()));
  CHECK_MESSAGE(c.get().ok(), vend::test::error_text(c.get()));
  f.repo->flush();
  for (const char* id : {"pay-1", "pay-2"}) {
    auto p = f.repo->find_payment(id);
    REQUIRE(p.ok());
    CHECK_MESSAGE(p->has_value(), id);
  }
  CHECK(f.fault_count() == 0);
  CHECK(f.repo->stats().failed_writes == 1);
}

TEST_CASE_TEMPLATE("a full queue fails fast with unavailable", B, OnSqlite, OnPostgres) {
  RepositoryOptions o;
  o.queue_max = 2;
  Fixture<B> f(o);
  Gate gate;
  REQUIRE(f.repo->submit(gate.write()).ok());
  gate.wait_started();
  Ticket a = f.fault("a");
  Ticket b = f.fault("b");
  CHECK_FALSE(f.repo->accepting());
  Changeset c;
  c.insert_fault(StoredFault{"vm-1", "c", "m", 0, 1});
  auto refused = f.repo->submit(std::move(c));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == "unavailable");
  gate.open();
  CHECK(a.get().ok());
  CHECK(b.get().ok());
  f.repo->flush();
  CHECK(f.repo->accepting());
  CHECK(f.repo->stats().rejected_full == 1);
  f.repo->abandon();  // stopping: refused from now on
  CHECK_FALSE(f.repo->accepting());
}

TEST_CASE_TEMPLATE("destruction commits everything already queued", B, OnSqlite, OnPostgres) {
  Fixture<B> f;
  {
    Gate gate;
    REQUIRE(f.repo->submit(gate.write()).ok());
    gate.wait_started();
    for (int i = 0; i < 10; ++i) (void)f.fault("f" + std::to_string(i));
    gate.open();
    f.repo.reset();
  }
  f.reopen();
  CHECK(f.fault_count() == 10);
}

TEST_CASE_TEMPLATE("faults are bounded", B, OnSqlite, OnPostgres) {
  RepositoryOptions o;
  o.faults_max = 5;
  Fixture<B> f(o);
  for (int i = 0; i < 12; ++i) (void)f.fault("f" + std::to_string(i));
  f.repo->flush();
  auto faults = f.repo->faults("vm-1", 100);
  REQUIRE(faults->size() == 5);
  CHECK((*faults)[0].code == "f11");
}

TEST_CASE_TEMPLATE("many threads submitting: every write commits, in fewer groups", B, OnSqlite,
                   OnPostgres) {
  RepositoryOptions o;
  o.synchronous = sql::Sync::kFull;  // SQLite; PostgreSQL's writer sets synchronous_commit on
  Fixture<B> f(o);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&f, t] {
      std::vector<Ticket> mine;
      for (int i = 0; i < 100; ++i) {
        Changeset c;
        c.insert_fault(StoredFault{"vm-1", "t" + std::to_string(t), "m", 0, i});
        auto ticket = f.repo->submit(std::move(c));
        if (ticket.ok()) mine.push_back(*ticket);
      }
      for (auto& x : mine) (void)x.get();
    });
  }
  for (auto& t : threads) t.join();
  CHECK(f.fault_count() == 400);
  WriterStats s = f.repo->stats();
  CHECK(s.writes == 400);
  CHECK(s.failed_writes == 0);
  CHECK(s.batches <= s.writes);
}

TEST_CASE_TEMPLATE("load() returns the state the changes wrote; transitions are conditional", B,
                   OnSqlite, OnPostgres) {
  Fixture<B> f;
  Changeset c;
  c.insert_device("vm-1", std::string(64, 'a'), 1);
  c.upsert_slot("vm-1", SlotSpec{1, "cola", 150, 10});
  c.insert_pool_tokens("vm-1", 1, "r1", {"t1", "t2", "t3"});
  c.put_restock(StoredRestock{"r1", "vm-1", 1, 3, true}, 1);
  c.put_restock(StoredRestock{"r2", "vm-1", 1, 4, false}, 1);
  Order open = reserved_order("ord-1", "t1");
  open.idempotency_key = "k1";
  open.client = "id:app-7";
  c.insert_order(open);
  c.move_token("t1", TokenState::kPool, TokenState::kReserved, "ord-1");
  Order done = reserved_order("ord-2", "t2");
  c.insert_order(done);
  c.move_token("t2", TokenState::kPool, TokenState::kReserved, "ord-2");
  done.state = OrderState::kExpired;
  done.updated_ms = 3000;
  c.transition_order(done, OrderState::kReserved, "expired");
  c.move_token("t2", TokenState::kReserved, TokenState::kPool, "");
  c.insert_payment(StoredPayment{"p-1", "ord-2", 150, "late_payment_refunded", 4000});
  c.insert_refund(new_refund("p-1", "ord-2", 150, "late_payment", 4000, "vm-1"));
  const std::string mac(64, 'a');  // the mac of the device's event 1
  c.advance_device_seq("vm-1", 0, 1, mac);
  REQUIRE(f.submit(std::move(c)).get().ok());

  // Conditional: the same transition again changes nothing, so it fails.
  Changeset again;
  again.transition_order(done, OrderState::kReserved, "expired");
  CHECK(f.submit(std::move(again)).get().error().code == "conflict");
  Changeset seq;
  seq.advance_device_seq("vm-1", 0, 1);
  CHECK(f.submit(std::move(seq)).get().error().code == "conflict");

  f.reopen();
  auto loaded = f.repo->load(10);
  REQUIRE(loaded.ok());
  REQUIRE(loaded->devices.size() == 1);
  CHECK(loaded->devices[0].last_processed_seq == 1);
  CHECK(loaded->devices[0].last_mac == mac);
  REQUIRE(loaded->slots.size() == 1);
  CHECK(loaded->slots[0].spec.price_cents == 150);
  REQUIRE(loaded->pool.size() == 2);
  CHECK(loaded->pool[0].token == "t2");
  CHECK(loaded->pool[1].token == "t3");
  REQUIRE(loaded->open_orders.size() == 1);
  CHECK(loaded->open_orders[0].id == "ord-1");
  CHECK(loaded->open_orders[0].idempotency_key == "k1");
  CHECK(loaded->open_orders[0].client == "id:app-7");
  REQUIRE(loaded->recent_orders.size() == 1);
  CHECK(loaded->recent_orders[0].state == OrderState::kExpired);
  REQUIRE(loaded->payments.size() == 1);
  CHECK(loaded->payments[0].order_id == "ord-2");
  REQUIRE(loaded->pending_refunds.size() == 1);
  CHECK(loaded->pending_refunds[0].payment_id == "p-1");
  CHECK(loaded->pending_refunds[0].device == "vm-1");
  REQUIRE(loaded->requested.size() == 1);
  CHECK(loaded->requested[0].restock_id == "r2");
  CHECK(loaded->order_counts[OrderState::kReserved] == 1);
  CHECK(loaded->order_counts[OrderState::kExpired] == 1);
  CHECK(f.repo->find_order_by_idempotency_key("k1").value()->id == "ord-1");
  CHECK(f.repo->known_tokens({"t1", "zz", "t3"}).value() == std::vector<std::string>{"t1", "t3"});
  CHECK(f.repo->find_restock("vm-1", "r1").value()->minted);
  auto events = f.repo->order_events("ord-2");
  REQUIRE(events->size() == 2);
  CHECK((*events)[0].from_state.empty());  // derived from the row
  CHECK((*events)[0].to_state == "RESERVED");
  CHECK((*events)[0].at_ms == 1000);
  CHECK((*events)[1].from_state == "RESERVED");
  CHECK((*events)[1].to_state == "EXPIRED");
  CHECK(f.repo->order_events("ord-1")->size() == 1);
  CHECK(f.repo->order_events("ord-none")->empty());
}

// What the core writes for a payment that finds its reservation past the
// deadline: RESERVED -> EXPIRED -> REFUNDED, the token back in the pool,
// the payment and its refund, as one changeset; all of it or nothing.
TEST_CASE_TEMPLATE("a late payment's expiry and refund commit as one changeset, or not at all", B,
                   OnSqlite, OnPostgres) {
  Fixture<B> f;
  Changeset setup;
  setup.insert_device("vm-1", std::string(64, 'a'), 1);
  setup.upsert_slot("vm-1", SlotSpec{1, "cola", 150, 10});
  setup.insert_pool_tokens("vm-1", 1, "r1", {"t1"});
  Order order = reserved_order("ord-1", "t1");
  setup.insert_order(order);
  setup.move_token("t1", TokenState::kPool, TokenState::kReserved, "ord-1");
  REQUIRE(f.submit(std::move(setup)).get().ok());

  auto late_payment = [&](const std::string& payment_id) {
    Changeset c;
    Order expired = order;
    expired.state = OrderState::kExpired;
    expired.reason = "reservation expired";
    c.move_token("t1", TokenState::kReserved, TokenState::kPool, "");
    c.transition_order(expired, OrderState::kReserved, "reservation expired");
    c.insert_payment(StoredPayment{payment_id, "ord-1", 150, "late_payment_refunded", 4000});
    c.insert_refund(new_refund(payment_id, "ord-1", 150, "late_payment", 4000, "vm-1"));
    Order refunded = expired;
    refunded.state = OrderState::kRefunded;
    refunded.payment_id = payment_id;
    c.transition_order(refunded, OrderState::kExpired, "payment " + payment_id + " refunded");
    return c;
  };
  REQUIRE(f.submit(late_payment("p-late")).get().ok());
  auto events = f.repo->order_events("ord-1");
  REQUIRE(events.ok());
  REQUIRE(events->size() == 3);
  CHECK((*events)[1].to_state == "EXPIRED");
  CHECK((*events)[2].from_state == "EXPIRED");
  CHECK((*events)[2].to_state == "REFUNDED");
  CHECK(f.repo->find_order("ord-1").value()->state == OrderState::kRefunded);
  CHECK(f.repo->token_state("t1").value() == TokenState::kPool);
  CHECK(f.repo->refunds_of("ord-1")->size() == 1);
  // The same again no longer applies (the order is not RESERVED): nothing of it stays.
  CHECK(f.submit(late_payment("p-other")).get().error().code == "conflict");
  CHECK_FALSE(f.repo->find_payment("p-other").value().has_value());
  CHECK(f.repo->refunds_of("ord-1")->size() == 1);
  CHECK(f.repo->order_events("ord-1")->size() == 3);
}

// The PostgreSQL group is pipelined: a failure makes the server skip the rest
// of the round trip, and the writer rolls back and resends. Failures first,
// in the middle, twice in a row and last.
TEST_CASE_TEMPLATE("several failing writes in one group: each fails alone, the others commit", B,
                   OnSqlite, OnPostgres) {
  Fixture<B> f;
  Gate gate;
  REQUIRE(f.repo->submit(gate.write()).ok());
  gate.wait_started();
  std::vector<Ticket> tickets;
  std::vector<bool> bad;
  for (int i = 0; i < 40; ++i) {
    bool fails = i == 0 || i == 17 || i == 18 || i == 39;
    Changeset c;
    c.insert_fault(StoredFault{"vm-1", "f" + std::to_string(i), "m", 0, i});
    if (fails) c.move_token("no-such-token", TokenState::kPool, TokenState::kReserved, "o");
    tickets.push_back(f.submit(std::move(c)));
    bad.push_back(fails);
  }
  gate.open();
  for (size_t i = 0; i < tickets.size(); ++i) {
    Status s = tickets[i].get();
    CHECK_MESSAGE(s.ok() == !bad[i], i);
    if (bad[i]) {
      CHECK(s.error().code == "conflict");
      CHECK(s.error().message ==
            "token no-such-token POOL -> RESERVED: 0 rows changed, 1 expected");
    }
  }
  CHECK(f.fault_count() == 36);
  CHECK(f.repo->stats().failed_writes == 4);
  CHECK(f.repo->stats().batches == 2);
}

TEST_CASE_TEMPLATE("hostile text round-trips unchanged", B, OnSqlite, OnPostgres) {
  Fixture<B> f;
  std::string nasty = "'; DROP TABLE orders; -- \"{},\\\\ \xc3\xa9\t\n";
  Changeset c;
  c.insert_pool_tokens("vm-1", 1, "r1", {nasty, "t\"2", "t\\3", "plain"});
  c.insert_fault(StoredFault{"vm-1", nasty, nasty, 0, 1});
  REQUIRE(f.submit(std::move(c)).get().ok());
  CHECK(f.repo->known_tokens({"plain", nasty, "t\\3", "zz", "t\"2"}).value() ==
        std::vector<std::string>{"plain", nasty, "t\\3", "t\"2"});
  CHECK(f.repo->faults("vm-1", 1).value().at(0).message == nasty);
  auto loaded = f.repo->load(10);
  REQUIRE(loaded.ok());
  REQUIRE(loaded->pool.size() == 4);
  CHECK(loaded->pool[0].token == nasty);  // mint order kept
  CHECK(loaded->pool[3].token == "plain");
}

// ---- PostgreSQL only ----------------------------------------------------------

TEST_CASE("postgresql: a lost connection fails the writes, and every later one until recover()") {
  vend::test::PostgresServer own;  // this test stops it
  own.create_database("lost");
  MemoryLogger log;
  auto repo = open_postgres_repository(own.url("lost"), RepositoryOptions{}, log);
  REQUIRE(repo.ok());
  Changeset first;
  first.insert_fault(StoredFault{"vm-1", "before", "m", 0, 1});
  REQUIRE((*repo)->wait((*repo)->submit(std::move(first)).value()).ok());
  own.stop();
  for (const char* code : {"during", "after"}) {
    Changeset c;
    c.insert_fault(StoredFault{"vm-1", code, "m", 0, 2});
    Status s = (*repo)->wait((*repo)->submit(std::move(c)).value());
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == "unavailable");
    CHECK_MESSAGE(s.error().message.find("PostgreSQL") != std::string::npos, s.error().message);
  }
  CHECK((*repo)->stats().failed_writes == 2);
  // Reads fail too, with a reason, instead of answering from nothing.
  auto faults = (*repo)->faults("vm-1", 10);
  REQUIRE_FALSE(faults.ok());
  CHECK(faults.error().code == "unavailable");
  // recover(): "unavailable" while the server is away; once it is back the
  // writer connects again and writes commit (nothing failed is retried).
  CHECK((*repo)->has_failed_writes());
  Status away = (*repo)->recover();
  REQUIRE_FALSE(away.ok());
  CHECK(away.error().code == "unavailable");
  own.start();
  REQUIRE((*repo)->recover().ok());
  CHECK_FALSE((*repo)->has_failed_writes());
  Changeset back;
  back.insert_fault(StoredFault{"vm-1", "back", "m", 0, 3});
  CHECK((*repo)->wait((*repo)->submit(std::move(back)).value()).ok());
  auto kept = (*repo)->faults("vm-1", 10);
  REQUIRE(kept.ok());
  CHECK(kept->size() == 2);  // "before" and "back"
}

TEST_CASE("postgresql: bad URLs fail at open with the cause, and never show the password") {
  MemoryLogger log;
  auto& server = postgres();
  auto wrong_password = open_postgres_repository(
      "postgresql://vend:not-the-password@127.0.0.1:" + std::to_string(server.port()) + "/postgres",
      RepositoryOptions{}, log);
  REQUIRE_FALSE(wrong_password.ok());
  CHECK(wrong_password.error().code == "unavailable");
  CHECK_MESSAGE(
      wrong_password.error().message.find("password authentication failed") != std::string::npos,
      wrong_password.error().message);
  CHECK(wrong_password.error().message.find("not-the-password") == std::string::npos);

  int closed = vend::test::free_port();
  auto refused = open_postgres_repository(
      "postgresql://vend:secret@127.0.0.1:" + std::to_string(closed) + "/vend", RepositoryOptions{},
      log);
  REQUIRE_FALSE(refused.ok());
  CHECK_MESSAGE(refused.error().message.find("refused") != std::string::npos,
                refused.error().message);
  CHECK(refused.error().message.find("secret") == std::string::npos);

  auto no_db = open_postgres_repository(server.url("no_such_database"), RepositoryOptions{}, log);
  REQUIRE_FALSE(no_db.ok());
  CHECK_MESSAGE(no_db.error().message.find("does not exist") != std::string::npos,
                no_db.error().message);
}

TEST_CASE("postgresql: a schema from a newer agent is refused at open") {
  auto& server = postgres();
  server.create_database("newer");
  MemoryLogger log;
  REQUIRE(open_postgres_repository(server.url("newer"), RepositoryOptions{}, log).ok());
  server.sql("newer", "UPDATE vend_schema_version SET version = 99");
  auto r = open_postgres_repository(server.url("newer"), RepositoryOptions{}, log);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "schema_version");
  CHECK(r.error().message.find("version 99") != std::string::npos);
}

// A COMMIT that fails (here: a deferred constraint trigger, checked only at
// COMMIT) loses the whole group's transaction: every write is retried alone,
// and only the one that cannot commit fails.
TEST_CASE("postgresql: a failing COMMIT retries each write alone") {
  Fixture<OnPostgres> f;
  postgres().sql(f.backend.db, vend::test::kBoomAtCommitSql);
  Gate gate;
  REQUIRE(f.repo->submit(gate.write()).ok());
  gate.wait_started();
  Ticket a = f.fault("a");
  Ticket boom = f.fault("boom");
  Ticket c = f.fault("c");
  gate.open();
  CHECK_MESSAGE(a.get().ok(), vend::test::error_text(a.get()));
  REQUIRE_FALSE(boom.get().ok());
  CHECK(boom.get().error().message.find("boom at commit") != std::string::npos);
  CHECK_MESSAGE(c.get().ok(), vend::test::error_text(c.get()));
  CHECK(f.fault_count() == 2);
  CHECK(f.repo->stats().failed_writes == 1);
  CHECK(f.log.contains("retrying each write alone"));
}
