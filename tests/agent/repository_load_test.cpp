// The repository contract of the start-up load, on both backends: a load
// filtered to some machines (several agents: the shards an instance holds)
// reads those machines' rows and nothing of the others'; each slot's sold
// and burned counts are kept as its tokens move, whatever their history.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "repository/repository.hpp"
#include "repository_backends.hpp"

using namespace vend;
using namespace vend::agent;
using vend::test::Fixture;
using vend::test::OnPostgres;
using vend::test::OnSqlite;

namespace {

Order order_of(const std::string& id, const std::string& device, const std::string& token,
               int64_t at_ms) {
  Order o;
  o.id = id;
  o.device = device;
  o.slot = 1;
  o.token = token;
  o.price_cents = 150;
  o.created_ms = o.updated_ms = at_ms;
  o.reserve_deadline_ms = at_ms + 5000;
  return o;
}

// A machine with one slot of three tokens, a requested restock, a retired
// ledger, an open order (t1), a finished one (t2, expired, its late payment
// refunded) and a pending refund that names no machine (before schema v8).
void write_machine(Changeset& c, const std::string& vm) {
  c.insert_device(vm, std::string(64, 'a'), 1);
  c.upsert_slot(vm, SlotSpec{1, "cola", 150, 10});
  c.insert_pool_tokens(vm, 1, "r1", {vm + "-t1", vm + "-t2", vm + "-t3"});
  c.put_restock(StoredRestock{"r2", vm, 1, 4, false}, 1);
  c.switch_ledger(vm, "", 0, vm + "-ledger-2", 1);
  c.insert_order(order_of(vm + "-open", vm, vm + "-t1", 1000));
  c.move_token(vm + "-t1", TokenState::kPool, TokenState::kReserved, vm + "-open");
  Order done = order_of(vm + "-done", vm, vm + "-t2", 1000);
  c.insert_order(done);
  c.move_token(vm + "-t2", TokenState::kPool, TokenState::kReserved, vm + "-done");
  done.state = OrderState::kExpired;
  done.updated_ms = 3000;
  c.transition_order(done, OrderState::kReserved, "expired");
  c.move_token(vm + "-t2", TokenState::kReserved, TokenState::kPool, "");
  c.insert_payment(StoredPayment{vm + "-p1", vm + "-done", 150, "late_payment_refunded", 4000});
  c.insert_refund(new_refund(vm + "-p1", vm + "-done", 150, "late_payment", 4000, vm));
  c.insert_refund(new_refund(vm + "-p0", vm + "-done", 150, "late_payment", 3500));
}

template <typename B>
void write_fleet(Fixture<B>& f) {
  Changeset c;
  for (const char* vm : {"vm-1", "vm-2", "vm-3"}) write_machine(c, vm);
  // Payments for orders no agent had: owned by the owner of the order id.
  c.insert_payment(StoredPayment{"p-unknown-1", "ord-unknown-1", 99, "unknown_order_refunded", 1});
  c.insert_payment(StoredPayment{"p-unknown-2", "ord-unknown-2", 99, "unknown_order_refunded", 2});
  REQUIRE(f.submit(std::move(c)).get().ok());
}

template <typename Rows, typename Key>
std::set<std::string> keys(const Rows& rows, Key key) {
  std::set<std::string> out;
  for (const auto& row : rows) out.insert(key(row));
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("a filtered load reads the accepted machines and nothing of the others", B,
                   OnSqlite, OnPostgres) {
  Fixture<B> f;
  write_fleet(f);
  const std::set<std::string> owned = {"vm-1", "vm-3", "ord-unknown-2"};
  auto loaded = f.repo->load(10, [&](const std::string& key) { return owned.contains(key); });
  REQUIRE(loaded.ok());
  const std::set<std::string> machines = {"vm-1", "vm-3"};
  CHECK(keys(loaded->devices, [](const auto& d) { return d.id; }) == machines);
  CHECK(loaded->devices[0].retired_ledgers == std::vector<std::string>{""});
  CHECK(loaded->devices[0].ledger_id == "vm-1-ledger-2");
  CHECK(keys(loaded->slots, [](const auto& s) { return s.device; }) == machines);
  CHECK(keys(loaded->pool, [](const auto& t) { return t.token; }) ==
        std::set<std::string>{"vm-1-t2", "vm-1-t3", "vm-3-t2", "vm-3-t3"});
  CHECK(keys(loaded->requested, [](const auto& r) { return r.device; }) == machines);
  CHECK(keys(loaded->open_orders, [](const auto& o) { return o.id; }) ==
        std::set<std::string>{"vm-1-open", "vm-3-open"});
  CHECK(keys(loaded->recent_orders, [](const auto& o) { return o.id; }) ==
        std::set<std::string>{"vm-1-done", "vm-3-done"});
  CHECK(keys(loaded->payments, [](const auto& p) { return p.payment_id; }) ==
        std::set<std::string>{"vm-1-p1", "vm-3-p1", "p-unknown-2"});
  CHECK(keys(loaded->pending_refunds, [](const auto& r) { return r.payment_id; }) ==
        std::set<std::string>{"vm-1-p0", "vm-1-p1", "vm-3-p0", "vm-3-p1"});
  // The refund written without a machine is given its loaded order's.
  for (const auto& r : loaded->pending_refunds) CHECK(r.device == r.order_id.substr(0, 4));
  // Counted from what was loaded, not the log's.
  CHECK(loaded->order_counts[OrderState::kReserved] == 2);
  CHECK(loaded->order_counts[OrderState::kExpired] == 2);

  auto everything = f.repo->load(10);
  REQUIRE(everything.ok());
  CHECK(everything->devices.size() == 3);
  CHECK(everything->payments.size() == 5);
  CHECK(everything->order_counts[OrderState::kReserved] == 3);
}

TEST_CASE_TEMPLATE("a filtered load keeps the recent-orders bound over the accepted machines", B,
                   OnSqlite, OnPostgres) {
  Fixture<B> f;
  write_fleet(f);
  auto loaded = f.repo->load(1, [](const std::string& key) { return key != "vm-2"; });
  REQUIRE(loaded.ok());
  REQUIRE(loaded->recent_orders.size() == 1);
  CHECK(loaded->recent_orders[0].device != "vm-2");
  auto none = f.repo->load(10, [](const std::string&) { return false; });
  REQUIRE(none.ok());
  CHECK(none->devices.empty());
  CHECK(none->slots.empty());
  CHECK(none->pool.empty());
  CHECK(none->open_orders.empty());
  CHECK(none->recent_orders.empty());
  CHECK(none->payments.empty());
  CHECK(none->pending_refunds.empty());
  CHECK(none->requested.empty());
}

TEST_CASE_TEMPLATE("each slot's sold and burned counts follow its tokens' moves", B, OnSqlite,
                   OnPostgres) {
  Fixture<B> f;
  Changeset c;
  c.insert_device("vm-1", std::string(64, 'a'), 1);
  // Tokens minted before their slot is declared are counted when it is.
  c.insert_pool_tokens("vm-1", 2, "r0", {"early"});
  c.move_token("early", TokenState::kPool, TokenState::kBurned, "");
  c.upsert_slot("vm-1", SlotSpec{1, "cola", 150, 10});
  c.upsert_slot("vm-1", SlotSpec{2, "water", 100, 10});
  c.insert_pool_tokens("vm-1", 1, "r1", {"a", "b", "c", "d", "e"});
  for (const char* t : {"a", "b", "c"}) {
    c.move_token(t, TokenState::kPool, TokenState::kReserved, "o");
    c.move_token(t, TokenState::kReserved, TokenState::kDispatched, "o");
  }
  c.move_token("a", TokenState::kDispatched, TokenState::kSold, "o");
  c.move_token("b", TokenState::kDispatched, TokenState::kSold, "o");
  c.move_token("c", TokenState::kDispatched, TokenState::kBurned, "o");
  c.move_token("d", TokenState::kPool, TokenState::kBurned, "");
  REQUIRE(f.submit(std::move(c)).get().ok());
  // A later re-declaration (a new price) keeps the counts.
  Changeset price;
  price.upsert_slot("vm-1", SlotSpec{1, "cola", 180, 10});
  REQUIRE(f.submit(std::move(price)).get().ok());

  for (bool filtered : {false, true}) {
    CAPTURE(filtered);
    LoadFilter only;
    if (filtered) only = [](const std::string& key) { return key == "vm-1"; };
    auto loaded = f.repo->load(10, only);
    REQUIRE(loaded.ok());
    REQUIRE(loaded->slots.size() == 2);
    CHECK(loaded->slots[0].spec.price_cents == 180);
    CHECK(loaded->slots[0].sold == 2);
    CHECK(loaded->slots[0].burned == 2);
    CHECK(loaded->slots[1].sold == 0);
    CHECK(loaded->slots[1].burned == 1);
    REQUIRE(loaded->pool.size() == 1);
    CHECK(loaded->pool[0].token == "e");
  }
  // A write that fails is rolled back with its counts.
  Changeset bad;
  bad.move_token("e", TokenState::kPool, TokenState::kSold, "o");
  bad.move_token("a", TokenState::kPool, TokenState::kSold, "o");  // not in POOL: conflict
  CHECK(f.submit(std::move(bad)).get().error().code == "conflict");
  auto after = f.repo->load(10);
  REQUIRE(after.ok());
  CHECK(after->slots[0].sold == 2);
  CHECK(after->pool.size() == 1);
}
