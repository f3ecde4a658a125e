// Order ids (cloud-agent/orders/order_ids.hpp): the shape new ones have, and
// the texts no order can have, which requests answer without reading the log.
#include "orders/order_ids.hpp"

#include <doctest/doctest.h>

#include "vend/random.hpp"

namespace vend::agent {
namespace {

constexpr int64_t kNow = 1'765'000'000'000;  // 2025-12-06, wall ms
constexpr int64_t kDay = 24 * 3600 * 1000;

TEST_CASE("a new order id: ord-, the creation time in 12 hex digits, 32 random hex digits") {
  SeededRandom random(7);
  std::string id = new_order_id(kNow, random);
  CHECK(id.size() == 48);
  CHECK(id.substr(0, 4) == "ord-");
  CHECK(std::stoll(id.substr(4, 12), nullptr, 16) == kNow);
  CHECK(new_order_id(kNow, random) != id);
  CHECK(new_order_id(-5, random).substr(4, 12) == "000000000000");  // a clock before 1970
  CHECK(could_be_order_id(id, kNow));
}

TEST_CASE("ids of the old shape (ord- and 32 hex digits) may exist; no other text can") {
  CHECK(could_be_order_id("ord-0123456789abcdef0123456789abcdef", kNow));
  CHECK_FALSE(could_be_order_id("ord-nope", kNow));
  CHECK_FALSE(could_be_order_id("ord-0123456789ABCDEF0123456789ABCDEF", kNow));  // upper case
  CHECK_FALSE(could_be_order_id("ord-0123456789abcdef0123456789abcde", kNow));   // 31 digits
  CHECK_FALSE(could_be_order_id("xyz-0123456789abcdef0123456789abcdef", kNow));
  CHECK_FALSE(could_be_order_id("", kNow));
  SeededRandom random(1);
  std::string id = new_order_id(kNow, random);
  CHECK_FALSE(could_be_order_id(id + "0", kNow));
  CHECK_FALSE(could_be_order_id(id.substr(0, 47), kNow));
  id[20] = 'g';
  CHECK_FALSE(could_be_order_id(id, kNow));
}

TEST_CASE("an id made more than a day after now cannot exist yet") {
  SeededRandom random(2);
  CHECK(could_be_order_id(new_order_id(kNow + kDay, random), kNow));  // a clock ahead
  CHECK_FALSE(could_be_order_id(new_order_id(kNow + kDay + 1, random), kNow));
  CHECK(could_be_order_id(new_order_id(kNow + 10, random), kNow, 10));
  CHECK_FALSE(could_be_order_id(new_order_id(kNow + 11, random), kNow, 10));
  CHECK_FALSE(could_be_order_id("ord-ffffffffffff0123456789abcdef0123456789abcdef", kNow));
}

}  // namespace
}  // namespace vend::agent
