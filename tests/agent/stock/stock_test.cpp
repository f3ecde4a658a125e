// Stock alone: take and put back, never beyond the pool, the counters in
// step through every move, the tokens memory knows, start-up loads,
// decommissioning.
#include "stock/stock.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using vend::agent::SlotSpec;
using vend::agent::Stock;
using vend::agent::StockSlot;

namespace {

const std::string kDev = "vm-1";

SlotSpec spec(int slot) { return SlotSpec{slot, "cola", 150, 10}; }

int64_t total(const StockSlot& s) {
  return static_cast<int64_t>(s.pool.size()) + s.reserved + s.dispatched + s.sold + s.burned;
}

// A stock with slot 1 holding tokens t1..tn.
void fill(Stock& stock, int n) {
  stock.define(kDev, spec(1));
  std::vector<std::string> tokens;
  for (int i = 1; i <= n; ++i) tokens.push_back("t" + std::to_string(i));
  stock.add_to_pool(kDev, 1, tokens);
}

}  // namespace

TEST_CASE("take hands out the pool front by front and never beyond it") {
  Stock stock;
  fill(stock, 2);
  CHECK(stock.take(*stock.find(kDev, 1)) == "t1");
  CHECK(stock.take(*stock.find(kDev, 1)) == "t2");
  CHECK_FALSE(stock.take(*stock.find(kDev, 1)).has_value());
  CHECK_FALSE(stock.take(*stock.find(kDev, 1)).has_value());
  const StockSlot& s = *stock.find(kDev, 1);
  CHECK(s.pool.empty());
  CHECK(s.reserved == 2);
  CHECK(total(s) == 2);
  CHECK(stock.known("t1"));  // held, still known
  CHECK(stock.known("t2"));
}

TEST_CASE("a token put back is the next one sold") {
  Stock stock;
  fill(stock, 3);
  auto t = stock.take(*stock.find(kDev, 1));
  REQUIRE(t.has_value());
  stock.put_back_reserved(kDev, 1, *t);
  CHECK(stock.known(*t));
  CHECK(stock.take(*stock.find(kDev, 1)) == *t);
  stock.dispatch(kDev, 1);
  stock.put_back_dispatched(kDev, 1, *t);  // the device says it is unconsumed
  const StockSlot& s = *stock.find(kDev, 1);
  CHECK(s.reserved == 0);
  CHECK(s.dispatched == 0);
  CHECK(s.pool.front() == *t);
  CHECK(s.pool.size() == 3);
}

TEST_CASE("the counters stay consistent through every move") {
  Stock stock;
  fill(stock, 6);
  const StockSlot& s = *stock.find(kDev, 1);
  for (int i = 1; i <= 5; ++i) {
    REQUIRE(stock.take(*stock.find(kDev, 1)).has_value());
    CHECK(total(s) == 6);
  }
  stock.dispatch(kDev, 1);
  stock.dispatch(kDev, 1);
  stock.dispatch(kDev, 1);
  stock.spend_sold(kDev, 1);
  stock.spend_burned(kDev, 1);
  stock.burned_to_sold(kDev, 1);
  stock.burn_reserved(kDev, 1);
  CHECK(total(s) == 6);
  CHECK(s.pool.size() == 1);
  CHECK(s.reserved == 1);
  CHECK(s.dispatched == 1);
  CHECK(s.sold == 2);
  CHECK(s.burned == 1);
  CHECK(stock.pool_total() == 1);
  CHECK(stock.pool_total(kDev) == 1);
  CHECK(stock.pool_total("vm-2") == 0);
}

TEST_CASE("burn_from_pool burns only pool tokens, in pool order, and forgets them") {
  Stock stock;
  fill(stock, 4);
  REQUIRE(stock.take(*stock.find(kDev, 1)) == "t1");
  auto burned = stock.burn_from_pool(kDev, 1, {"t4", "t1", "t2", "nope"});
  CHECK(burned == std::vector<std::string>{"t2", "t4"});
  const StockSlot& s = *stock.find(kDev, 1);
  CHECK(s.pool == std::deque<std::string>{"t3"});
  CHECK(s.burned == 2);
  CHECK(s.reserved == 1);
  CHECK(total(s) == 4);
  CHECK_FALSE(stock.known("t2"));
  CHECK(stock.known("t1"));  // held by o1, not in the pool
}

TEST_CASE("start-up: slots, pool tokens and held tokens of open orders") {
  Stock stock;
  stock.load_slot(kDev, spec(1), 4, 1);
  CHECK(stock.load_pool_token(kDev, 1, "p1"));
  CHECK_FALSE(stock.load_pool_token(kDev, 2, "p2"));  // no slot 2
  CHECK_FALSE(stock.known("p2"));
  stock.restore_held(kDev, 1, "r1", false);
  stock.restore_held(kDev, 1, "d1", true);
  stock.restore_held(kDev, 7, "x1", true);  // unknown slot: known only
  const StockSlot& s = *stock.find(kDev, 1);
  CHECK(s.sold == 4);
  CHECK(s.burned == 1);
  CHECK(s.reserved == 1);
  CHECK(s.dispatched == 1);
  CHECK(s.pool.size() == 1);
  CHECK(stock.known("x1"));
  CHECK(stock.known("d1"));
  CHECK(stock.find(kDev, 7) == nullptr);
}

TEST_CASE("slots_of: none before a slot, then the same object for good") {
  Stock stock;
  CHECK(stock.slots_of(kDev) == nullptr);
  stock.define(kDev, spec(1));
  Stock::Slots* kept = stock.slots_of(kDev);
  REQUIRE(kept != nullptr);
  for (int d = 2; d <= 500; ++d) stock.define("vm-" + std::to_string(d), spec(1));  // rehashes
  stock.define(kDev, spec(2));
  CHECK(stock.slots_of(kDev) == kept);
  CHECK(kept->size() == 2);
  CHECK(&kept->at(1) == stock.find(kDev, 1));
}

TEST_CASE("define changes the spec and keeps the pool") {
  Stock stock;
  fill(stock, 2);
  stock.define(kDev, SlotSpec{1, "water", 90, 12});
  const StockSlot& s = *stock.find(kDev, 1);
  CHECK(s.spec.product == "water");
  CHECK(s.spec.price_cents == 90);
  CHECK(s.pool.size() == 2);
  CHECK(s.physical_count == -1);
  CHECK(stock.slots(kDev).size() == 1);
  CHECK(stock.slots("vm-2").empty());
}

TEST_CASE("withdraw burns every pool of the device; its tokens stay known") {
  Stock stock;
  fill(stock, 3);
  stock.define(kDev, spec(2));
  stock.add_to_pool(kDev, 2, {"u1"});
  stock.define("vm-2", spec(1));
  stock.add_to_pool("vm-2", 1, {"v1"});
  REQUIRE(stock.take(*stock.find(kDev, 1)) == "t1");
  auto out = stock.withdraw(kDev);
  const std::vector<std::pair<int, std::string>> want = {{1, "t2"}, {1, "t3"}, {2, "u1"}};
  CHECK(out == want);
  CHECK(stock.pool_total(kDev) == 0);
  CHECK(stock.find(kDev, 1)->burned == 2);
  CHECK(stock.find(kDev, 1)->reserved == 1);
  CHECK(stock.find(kDev, 2)->burned == 1);
  CHECK(stock.known("t2"));
  CHECK(stock.pool_total("vm-2") == 1);
  CHECK(stock.withdraw("vm-9").empty());
}

TEST_CASE("a held token is forgotten with its holder; the others stay known") {
  Stock stock;
  fill(stock, 2);
  REQUIRE(stock.take(*stock.find(kDev, 1)) == "t1");
  stock.forget("t1");
  CHECK_FALSE(stock.known("t1"));
  CHECK(stock.known("t2"));
  CHECK(stock.find(kDev, 1)->reserved == 1);  // the counters are the slot's
}
