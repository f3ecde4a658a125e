// The agent repository: group commit, per-write isolation inside a group,
// back-pressure, draining on destruction, and the start-up load.
#include "vend/agent/repository.hpp"

#include <doctest/doctest.h>

#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "test_support.hpp"
#include "vend/log.hpp"

using namespace vend;
using namespace vend::agent;

namespace {

// Holds the writer thread inside one write until open(), so that the writes
// submitted meanwhile pile up and form the next group.
class Gate {
 public:
  WriteFn write() {
    return [this](WriteContext&) {
      started_.set_value();
      released_.wait();
      return Status{};
    };
  }
  void wait_started() { started_future_.wait(); }
  void open() { release_.set_value(); }

 private:
  std::promise<void> started_;
  std::future<void> started_future_ = started_.get_future();
  std::promise<void> release_;
  std::shared_future<void> released_ = release_.get_future().share();
};

struct Fixture {
  explicit Fixture(RepositoryOptions options = {}) : options(options) { reopen(); }
  void reopen() {
    repo.reset();
    auto r = Repository::open(dir.file("agent.db"), options, log);
    REQUIRE(r.ok());
    repo = std::move(r).value();
  }
  Ticket submit(Changeset c) {
    auto t = repo->submit(std::move(c));
    REQUIRE(t.ok());
    return *t;
  }
  Ticket fault(const std::string& code) {
    Changeset c;
    c.insert_fault(StoredFault{"vm-1", code, "m", 0, 1});
    return submit(std::move(c));
  }
  size_t fault_count() {
    auto f = repo->faults("vm-1", 100000);
    REQUIRE(f.ok());
    return f->size();
  }

  vend::test::TempDir dir;
  MemoryLogger log;
  RepositoryOptions options;
  std::unique_ptr<Repository> repo;
};

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

TEST_CASE("writes queued while the writer is busy commit as one group") {
  Fixture f;
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

TEST_CASE("a failing write is rolled back alone; the rest of its group commits") {
  Fixture f;
  Gate gate;
  REQUIRE(f.repo->submit(gate.write()).ok());
  gate.wait_started();
  Ticket a = f.fault("a");
  Changeset bad;
  bad.insert_fault(StoredFault{"vm-1", "b", "m", 0, 1});
  bad.transition_order(reserved_order("ord-missing", "t"), OrderState::kReserved, "x");
  Ticket b = f.submit(std::move(bad));
  Ticket c = f.fault("c");
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
}

// SQLITE_FULL (and IOERR) may roll the whole transaction back on its own;
// the statements after it would then run in autocommit mode, and the retry
// of the group would apply them a second time. Pins that down with a cap on
// the database's pages (a disk that fills up mid-group).
TEST_CASE("a disk full mid-group: nothing committed twice, no durable write answered failed") {
  Fixture f;
  Gate gate;
  REQUIRE(f.repo
              ->submit([](WriteContext& ctx) {
                auto pages = ctx.db().prepare("PRAGMA page_count");
                if (!pages.ok()) return Status(pages.error());
                (void)pages->step();
                int64_t n = pages->column_int64(0);
                return ctx.db().exec("PRAGMA max_page_count = " + std::to_string(n + 3));
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
  CHECK_MESSAGE(a.get().ok(), a.get().error().to_string());
  CHECK_MESSAGE(c.get().ok(), c.get().error().to_string());
  f.repo->flush();
  for (const char* id : {"pay-1", "pay-2"}) {
    auto p = f.repo->find_payment(id);
    REQUIRE(p.ok());
    CHECK_MESSAGE(p->has_value(), id);
  }
  CHECK(f.fault_count() == 0);
  CHECK(f.repo->stats().failed_writes == 1);
}

TEST_CASE("a full queue fails fast with unavailable") {
  RepositoryOptions o;
  o.queue_max = 2;
  Fixture f(o);
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
}

TEST_CASE("destruction commits everything already queued") {
  Fixture f;
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

TEST_CASE("faults are bounded") {
  RepositoryOptions o;
  o.faults_max = 5;
  Fixture f(o);
  for (int i = 0; i < 12; ++i) (void)f.fault("f" + std::to_string(i));
  f.repo->flush();
  auto faults = f.repo->faults("vm-1", 100);
  REQUIRE(faults->size() == 5);
  CHECK((*faults)[0].code == "f11");
}

TEST_CASE("many threads submitting: every write commits, in fewer groups") {
  RepositoryOptions o;
  o.synchronous = sql::Sync::kFull;
  Fixture f(o);
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

TEST_CASE("load() returns the state the changes wrote; transitions are conditional") {
  Fixture f;
  Changeset c;
  c.insert_device("vm-1", std::string(64, 'a'), 1);
  c.upsert_slot("vm-1", SlotSpec{1, "cola", 150, 10});
  c.insert_pool_tokens("vm-1", 1, "r1", {"t1", "t2", "t3"});
  c.put_restock(StoredRestock{"r1", "vm-1", 1, 3, true}, 1);
  c.put_restock(StoredRestock{"r2", "vm-1", 1, 4, false}, 1);
  Order open = reserved_order("ord-1", "t1");
  open.idempotency_key = "k1";
  c.insert_order(open, "reserved");
  c.move_token("t1", TokenState::kPool, TokenState::kReserved, "ord-1");
  Order done = reserved_order("ord-2", "t2");
  c.insert_order(done, "reserved");
  c.move_token("t2", TokenState::kPool, TokenState::kReserved, "ord-2");
  done.state = OrderState::kExpired;
  done.updated_ms = 3000;
  c.transition_order(done, OrderState::kReserved, "expired");
  c.move_token("t2", TokenState::kReserved, TokenState::kPool, "");
  c.insert_payment(StoredPayment{"p-1", "ord-2", 150, "late_payment_refunded", 4000});
  c.advance_device_seq("vm-1", 0, 1);
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
  REQUIRE(loaded->slots.size() == 1);
  CHECK(loaded->slots[0].spec.price_cents == 150);
  REQUIRE(loaded->pool.size() == 2);
  CHECK(loaded->pool[0].token == "t2");
  CHECK(loaded->pool[1].token == "t3");
  REQUIRE(loaded->open_orders.size() == 1);
  CHECK(loaded->open_orders[0].id == "ord-1");
  CHECK(loaded->open_orders[0].idempotency_key == "k1");
  REQUIRE(loaded->recent_orders.size() == 1);
  CHECK(loaded->recent_orders[0].state == OrderState::kExpired);
  REQUIRE(loaded->payments.size() == 1);
  CHECK(loaded->payments[0].order_id == "ord-2");
  REQUIRE(loaded->requested.size() == 1);
  CHECK(loaded->requested[0].restock_id == "r2");
  CHECK(loaded->order_counts[OrderState::kReserved] == 1);
  CHECK(loaded->order_counts[OrderState::kExpired] == 1);
  CHECK(f.repo->find_order_by_idempotency_key("k1").value()->id == "ord-1");
  CHECK(f.repo->known_tokens({"t1", "zz", "t3"}).value() == std::vector<std::string>{"t1", "t3"});
  CHECK(f.repo->find_restock("vm-1", "r1").value()->minted);
  auto events = f.repo->order_events("ord-2");
  REQUIRE(events->size() == 2);
  CHECK((*events)[1].from_state == "RESERVED");
  CHECK((*events)[1].to_state == "EXPIRED");
}
