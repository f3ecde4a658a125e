// DeviceBook alone: records by id, by hash and by number; a record never
// moves, so what points at it stays valid as the book grows.
#include "devices/device_book.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using vend::agent::DeviceBook;
using vend::agent::DeviceRecord;

TEST_CASE("a device added once is found by id and by number, in id order") {
  DeviceBook book;
  CHECK(book.find("vm-1") == nullptr);
  CHECK(book.at_index(0) == nullptr);
  DeviceRecord& b = book.add("vm-b");
  DeviceRecord& a = book.add("vm-a");
  CHECK(b.id == "vm-b");
  CHECK(b.index == 0);
  CHECK(a.index == 1);
  CHECK(&book.add("vm-b") == &b);  // again: the same record, not renumbered
  CHECK(book.size() == 2);
  CHECK(book.find("vm-a") == &a);
  CHECK(book.contains("vm-b"));
  CHECK_FALSE(book.contains("vm-c"));
  CHECK(book.at_index(1) == &a);
  CHECK(book.at_index(2) == nullptr);
  std::vector<std::string> order;
  for (const auto& [id, rec] : book) order.push_back(rec.id);
  CHECK(order == std::vector<std::string>{"vm-a", "vm-b"});
}

TEST_CASE("records never move while thousands more are added") {
  DeviceBook book;
  DeviceRecord& first = book.add("vm-00000");
  first.online = true;
  for (int i = 1; i < 5000; ++i) book.add("vm-" + std::to_string(100000 + i));
  CHECK(book.find("vm-00000") == &first);
  CHECK(book.at_index(0) == &first);
  CHECK(first.online);
  for (uint32_t i = 0; i < 5000; ++i) {
    const DeviceRecord* r = book.at_index(i);
    REQUIRE(r != nullptr);
    CHECK(r->index == i);
    CHECK(book.find(r->id) == r);
  }
}
