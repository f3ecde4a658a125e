// AlertBook, OrderEventBatch and ViewSchedule alone: said once, cleared
// once, bounded batches, views at most once per interval.
#include "ops/ops_feed.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using vend::agent::AlertBook;
using vend::agent::OrderEventBatch;
using vend::agent::ViewSchedule;

TEST_CASE("an alert is said once while active, again with a new message, cleared once") {
  AlertBook book;
  auto first = book.raise("vm-1", 2, "physical_mismatch", "warning", "holds 3", 100);
  REQUIRE(first.publish.has_value());
  CHECK(first.new_alert);
  CHECK(first.publish->state == "raised");
  CHECK(first.publish->device == "vm-1");
  CHECK(first.publish->slot == 2);
  CHECK(first.publish->severity == "warning");
  CHECK(first.publish->ts_ms == 100);
  CHECK(book.active("vm-1", 2, "physical_mismatch"));
  CHECK_FALSE(book.active("vm-1", 1, "physical_mismatch"));
  CHECK_FALSE(book.active("vm-2", 2, "physical_mismatch"));

  auto same = book.raise("vm-1", 2, "physical_mismatch", "warning", "holds 3", 200);
  CHECK_FALSE(same.publish.has_value());
  CHECK_FALSE(same.new_alert);

  auto changed = book.raise("vm-1", 2, "physical_mismatch", "critical", "holds 1", 300);
  REQUIRE(changed.publish.has_value());
  CHECK_FALSE(changed.new_alert);
  CHECK(changed.publish->message == "holds 1");
  CHECK(book.size() == 1);

  auto cleared = book.clear("vm-1", 2, "physical_mismatch", 400);
  REQUIRE(cleared.has_value());
  CHECK(cleared->state == "cleared");
  CHECK(cleared->ts_ms == 400);
  CHECK(cleared->message == "holds 1");
  CHECK_FALSE(book.clear("vm-1", 2, "physical_mismatch", 500).has_value());
  CHECK(book.size() == 0);
}

TEST_CASE("active alerts are counted per code") {
  AlertBook book;
  book.raise("vm-1", 0, "seq_gap", "warning", "a", 1);
  book.raise("vm-2", 0, "seq_gap", "warning", "b", 1);
  book.raise("vm-1", 3, "unknown_slot", "warning", "c", 1);
  const std::vector<std::pair<std::string, int64_t>> want = {{"seq_gap", 2}, {"unknown_slot", 1}};
  CHECK(book.counts_by_code() == want);
}

TEST_CASE("the active alerts are listed by device, slot and code, cleared ones gone") {
  AlertBook book;
  book.raise("vm-2", 0, "seq_gap", "critical", "gap", 10);
  book.raise("vm-1", 3, "unknown_slot", "warning", "c", 20);
  book.raise("vm-1", 0, "clock_skew", "warning", "late", 30);
  book.raise("vm-1", 0, "clock_skew", "warning", "later", 40);  // a new message: updated
  book.clear("vm-2", 0, "seq_gap", 50);
  std::vector<vend::ops::Alert> list = book.list();
  REQUIRE(list.size() == 2);
  CHECK(list[0] == vend::ops::Alert{"clock_skew", "warning", "raised", "vm-1", 0, "later", 40});
  CHECK(list[1] == vend::ops::Alert{"unknown_slot", "warning", "raised", "vm-1", 3, "c", 20});
}

TEST_CASE("order events go out in bounded batches, in order") {
  OrderEventBatch batch;
  CHECK_FALSE(batch.take().has_value());
  vend::ops::OrderEvents added;
  for (size_t i = 1; i <= OrderEventBatch::kMaxPerMessage; ++i) {
    vend::ops::OrderEvent e{i == OrderEventBatch::kMaxPerMessage ? "last" : "o" + std::to_string(i),
                            "vm-" + std::to_string(i % 7),
                            static_cast<int>(1 + i % 4),
                            i == 1 ? "" : "RESERVED",
                            "PAID",
                            150,
                            i % 5 == 0 ? "a \"quoted\" reason" : "",
                            static_cast<int64_t>(1000 + i)};
    added.events.push_back(e);
    bool full = batch.add(vend::ops::OrderEventView{e.order_id, e.device, e.slot, e.from_state,
                                                    e.to_state, e.price_cents, e.reason, e.ts_ms});
    CHECK(full == (i == OrderEventBatch::kMaxPerMessage));  // full: take it now
  }
  auto taken = batch.take();
  REQUIRE(taken.has_value());
  // The bytes encode() writes for the same events, and they decode back.
  CHECK(*taken == vend::ops::encode(added));
  auto decoded = vend::ops::decode_order_events(*taken);
  REQUIRE_MESSAGE(decoded.ok(), (decoded.ok() ? "" : decoded.error().to_string()));
  REQUIRE(decoded->events.size() == OrderEventBatch::kMaxPerMessage);
  CHECK(decoded->events.front().order_id == "o1");
  CHECK(decoded->events.back().order_id == "last");
  CHECK(*decoded == added);
  CHECK(batch.size() == 0);
  CHECK_FALSE(batch.take().has_value());
  // The next batch starts afresh.
  CHECK_FALSE(batch.add(vend::ops::OrderEventView{"next", "vm-1", 1, "", "RESERVED", 150, "", 5}));
  auto again = vend::ops::decode_order_events(*batch.take());
  REQUIRE(again.ok());
  REQUIRE(again->events.size() == 1);
  CHECK(again->events[0].order_id == "next");
  // No events: an empty list, as before the writer.
  CHECK(vend::ops::encode(vend::ops::OrderEvents{}) == R"({"events":[],"v":1})");
}

TEST_CASE("a changed device is published at once, then at most once per interval") {
  ViewSchedule views(1'000);
  views.device_changed("vm-1", 10);
  CHECK(views.take_due_devices(10) == std::vector<std::string>{"vm-1"});
  CHECK(views.take_due_devices(20).empty());  // nothing changed

  views.device_changed("vm-1", 500);
  views.device_changed("vm-2", 500);
  CHECK(views.take_due_devices(500) == std::vector<std::string>{"vm-2"});  // vm-1 waits
  CHECK(views.take_due_devices(1'009).empty());
  CHECK(views.take_due_devices(1'010) == std::vector<std::string>{"vm-1"});
  CHECK(views.take_due_devices(5'000).empty());
}

TEST_CASE("the fleet summary is due when anything changed, at most once per interval") {
  ViewSchedule views(1'000);
  CHECK(views.take_fleet_due(5));  // the first one
  CHECK_FALSE(views.take_fleet_due(6));
  views.fleet_changed();
  CHECK_FALSE(views.take_fleet_due(500));
  CHECK(views.take_fleet_due(1'005));
  views.device_changed("vm-1", 1'100);
  CHECK_FALSE(views.take_fleet_due(1'100));
  CHECK(views.take_fleet_due(2'005));
  CHECK_FALSE(views.take_fleet_due(9'000));
}
