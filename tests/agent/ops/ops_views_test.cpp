// The retained ops views alone, built from records made by hand: a device's
// status with its slots, the fleet summary's counts.
#include "ops/ops_views.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace vend::agent;

TEST_CASE("a device's status shows its record and every slot's stock") {
  DeviceBook devices;
  DeviceRecord& d = devices.add("vm-1");
  d.online = true;
  d.boot_id = "b1";
  d.last_seen_ms = 900;
  d.outbox_depth = 3;
  d.last_verdict = "consistent";
  d.clock_skew.observe(0, 1'250, 1'000, 60'000);  // 250 ms ahead
  Stock stock;
  stock.define("vm-1", SlotSpec{2, "water", 100, 8});
  stock.define("vm-1", SlotSpec{1, "cola", 150, 10});
  stock.add_to_pool("vm-1", 1, {"t1", "t2", "t3"});
  StockSlot* cola = stock.find("vm-1", 1);
  REQUIRE(cola != nullptr);
  REQUIRE(stock.take(*cola).has_value());  // one reserved

  vend::ops::DeviceStatus s = ops_views::device_status(d, stock.slots("vm-1"), 5'000, "agent-b");
  CHECK(s.device == "vm-1");
  CHECK(s.online);
  CHECK(s.boot_id == "b1");
  CHECK(s.last_seen_ms == 900);
  CHECK(s.outbox_depth == 3);
  CHECK(s.last_verdict == "consistent");
  CHECK(s.ts_ms == 5'000);
  CHECK(s.owner == "agent-b");
  CHECK(s.clock_skew_ms == 250);
  REQUIRE(s.slots.size() == 2);
  CHECK(s.slots[0].slot == 1);  // in slot order
  CHECK(s.slots[0].product == "cola");
  CHECK(s.slots[0].pool == 2);
  CHECK(s.slots[0].reserved == 1);
  CHECK(s.slots[1].slot == 2);
  CHECK(s.slots[1].pool == 0);
  CHECK(s.slots[1].physical_count == -1);  // no snapshot yet
}

TEST_CASE("the fleet summary counts machines online, the stock, orders by state and alerts") {
  DeviceBook devices;
  devices.add("vm-1").online = true;
  devices.add("vm-2");
  Stock stock;
  stock.define("vm-1", SlotSpec{1, "cola", 150, 10});
  stock.add_to_pool("vm-1", 1, {"t1", "t2"});
  stock.define("vm-2", SlotSpec{1, "cola", 150, 10});
  stock.add_to_pool("vm-2", 1, {"t3"});
  OrderBook orders;
  Order o;
  o.id = "ord-1";
  o.device = "vm-1";
  o.slot = 1;
  o.state = OrderState::kReserved;
  orders.add_open(o, true);
  AlertBook alerts;
  alerts.raise("vm-2", 0, "seq_gap", "critical", "gone", 1);

  vend::ops::FleetSummary f =
      ops_views::fleet_summary(devices, stock, orders, alerts, {false, 7'000, "agent-a"});
  CHECK(f.devices == 2);
  CHECK(f.online == 1);
  CHECK(f.stock_total == 3);
  CHECK(f.orders_by_state["RESERVED"] == 1);
  CHECK(f.orders_by_state["COMPLETED"] == 0);
  CHECK(f.orders_total == 1);
  CHECK(f.alerts_active == 1);
  CHECK_FALSE(f.storage_ok);
  CHECK(f.ts_ms == 7'000);
  CHECK(f.instance == "agent-a");
}
