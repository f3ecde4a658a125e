// The order book alone: look-ups by id and key, the open orders in id order
// through states and reuse of places, the counts, the client cap, and
// eviction (oldest finished first, never before its write is durable).
#include "orders/order_book.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <future>
#include <set>
#include <string>
#include <vector>

using vend::Status;
using vend::agent::Order;
using vend::agent::OrderBook;
using vend::agent::OrderRec;
using vend::agent::OrderRef;
using vend::agent::OrderState;
using vend::agent::Ticket;

namespace {

Order order(const std::string& id, OrderState state = OrderState::kReserved,
            const std::string& key = "") {
  Order o;
  o.id = id;
  o.device = "vm-1";
  o.slot = 1;
  o.token = "tok-" + id;
  o.state = state;
  o.idempotency_key = key;
  return o;
}

Ticket ready() {
  std::promise<Status> p;
  p.set_value(Status{});
  return p.get_future().share();
}

std::vector<std::string> open_ids(OrderBook& book) {
  std::vector<std::string> out;
  for (OrderRef ref : book.open_orders()) out.push_back(book.at(ref)->order.id);
  return out;
}

int64_t count(const OrderBook& book, OrderState s) {
  return book.state_counts()[static_cast<size_t>(s)];
}

void finish(OrderBook& book, const std::string& id) {
  OrderRec* rec = book.find(id);
  REQUIRE(rec != nullptr);
  CHECK(book.set_state(*rec, OrderState::kCancelled));
  rec->last_write = ready();
}

}  // namespace

TEST_CASE("orders are found by id and by idempotency key") {
  OrderBook book;
  OrderRec& a = book.add_open(order("ord-a", OrderState::kReserved, "c\nk1"), true);
  book.add_open(order("ord-b"), true);
  CHECK(book.find("ord-a") == &a);
  CHECK(book.find("ord-b")->order.token == "tok-ord-b");
  CHECK(book.find("ord-c") == nullptr);
  CHECK(book.find_by_key("c\nk1") == &a);
  CHECK(book.find_by_key("c\nk2") == nullptr);
  CHECK(book.find_by_key("") == nullptr);
  CHECK(book.at(a.ref) == &a);
  CHECK(a.holds_token);
  CHECK(book.size() == 2);
  CHECK(book.created() == 2);
  CHECK(count(book, OrderState::kReserved) == 2);
}

TEST_CASE("a record never moves while the book grows") {
  OrderBook book;
  OrderRec& first = book.add_open(order("ord-0000"), true);
  for (int i = 1; i < 5000; ++i) book.add_open(order("ord-" + std::to_string(10000 + i)), true);
  CHECK(&first == book.find("ord-0000"));
  for (int i = 1; i < 5000; i += 499) {
    REQUIRE(book.find("ord-" + std::to_string(10000 + i)) != nullptr);
  }
  CHECK(book.open_count() == 5000);
}

TEST_CASE("open orders come in id order, whatever the order they were added in") {
  OrderBook book;
  for (const char* id : {"ord-3", "ord-1", "ord-5", "ord-2", "ord-4"}) {
    book.add_open(order(id), false);
  }
  CHECK(open_ids(book) == std::vector<std::string>{"ord-1", "ord-2", "ord-3", "ord-4", "ord-5"});
  book.add_open(order("ord-0"), false);
  book.add_open(order("ord-9"), false);
  finish(book, "ord-3");
  CHECK(open_ids(book) ==
        std::vector<std::string>{"ord-0", "ord-1", "ord-2", "ord-4", "ord-5", "ord-9"});
  CHECK(book.open_count() == 6);
}

TEST_CASE("set_state keeps the counts and moves finished orders to the eviction queue") {
  OrderBook book;
  OrderRec& rec = book.add_open(order("ord-1"), true);
  CHECK_FALSE(book.set_state(rec, OrderState::kPaid));
  CHECK_FALSE(book.set_state(rec, OrderState::kDispatched));
  CHECK(book.set_state(rec, OrderState::kFailed));
  CHECK_FALSE(book.set_state(rec, OrderState::kRefunded));  // finished already
  CHECK(count(book, OrderState::kReserved) == 0);
  CHECK(count(book, OrderState::kRefunded) == 1);
  CHECK(book.open_count() == 0);
  CHECK(open_ids(book).empty());
}

TEST_CASE("the client cap counts RESERVED orders until they leave RESERVED") {
  OrderBook book;
  OrderRec& a = book.add_open(order("ord-1"), true);
  OrderRec& b = book.add_open(order("ord-2"), true);
  book.hold_for(a, "alice");
  book.hold_for(b, "alice");
  CHECK(book.reservations_of("alice") == 2);
  CHECK(book.reservations_of("bob") == 0);
  book.set_state(a, OrderState::kPaid);
  CHECK(book.reservations_of("alice") == 1);
  CHECK(a.client.empty());
  book.set_state(b, OrderState::kExpired);
  CHECK(book.reservations_of("alice") == 0);
}

TEST_CASE("eviction: oldest finished first, never before its last write is durable") {
  OrderBook book;
  book.add_finished(order("ord-old", OrderState::kCompleted, "c\nold")).last_write = ready();
  book.add_open(order("ord-1"), true);
  book.add_open(order("ord-2"), true);
  finish(book, "ord-1");
  OrderRec* two = book.find("ord-2");
  book.set_state(*two, OrderState::kExpired);
  std::promise<Status> pending;
  two->last_write = pending.get_future().share();
  std::vector<std::string> gone;
  auto leaving = [&](const OrderRec& r) { gone.push_back(r.order.id); };
  book.evict_finished(3, leaving);
  CHECK(gone.empty());
  CHECK(book.all_in_memory());
  book.evict_finished(0, leaving);
  CHECK(gone == std::vector<std::string>{"ord-old", "ord-1"});  // ord-2 is not durable
  CHECK(book.find("ord-old") == nullptr);
  CHECK(book.find_by_key("c\nold") == nullptr);
  CHECK(book.find("ord-2") != nullptr);
  CHECK_FALSE(book.all_in_memory());
  pending.set_value(Status{});
  book.evict_finished(0, leaving);
  CHECK(gone.size() == 3);
  CHECK(book.size() == 0);
}

TEST_CASE("a place freed by eviction is reused without reviving old entries") {
  OrderBook book;
  book.add_open(order("ord-1"), true);
  finish(book, "ord-1");
  book.evict_finished(0, [](const OrderRec&) {});
  OrderRec& again = book.add_open(order("ord-2"), true);
  CHECK(again.ref == 0);  // the same place
  CHECK(again.holds_token);
  CHECK(open_ids(book) == std::vector<std::string>{"ord-2"});
  book.set_state(again, OrderState::kCancelled);
  again.last_write = ready();
  std::vector<std::string> gone;
  book.evict_finished(0, [&](const OrderRec& r) { gone.push_back(r.order.id); });
  CHECK(gone == std::vector<std::string>{"ord-2"});
}

TEST_CASE("many orders through open, finished and evicted keep the indexes exact") {
  OrderBook book;
  std::set<std::string> in_memory;
  for (int i = 0; i < 20000; ++i) {
    std::string id = "ord-" + std::to_string(100000 + i);
    OrderRec& rec = book.add_open(order(id, OrderState::kReserved, "k" + std::to_string(i)), true);
    in_memory.insert(id);
    if (i % 3 != 0) {
      book.set_state(rec, OrderState::kCancelled);
      rec.last_write = ready();
    }
    book.evict_finished(1000, [&](const OrderRec& r) { in_memory.erase(r.order.id); });
  }
  CHECK(book.size() == in_memory.size());
  for (const auto& id : in_memory) REQUIRE(book.find(id) != nullptr);
  CHECK(book.find("ord-100001") == nullptr);  // evicted long ago
  CHECK(book.find_by_key("k0") != nullptr);   // open, never evicted
  CHECK(book.open_count() == 6667);
  auto open = open_ids(book);
  CHECK(open.size() == 6667);
  CHECK(std::is_sorted(open.begin(), open.end()));
  CHECK(count(book, OrderState::kCancelled) == 13333);
}
