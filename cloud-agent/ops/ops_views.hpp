// The retained ops views (vend/ops.hpp: a device's status, the fleet
// summary), built from the records the components own. Pure functions: the
// time and the instance are passed in; the core encodes and publishes.
#pragma once

#include <cstdint>
#include <string>

#include "devices/device_book.hpp"
#include "ops/ops_feed.hpp"
#include "orders/order_book.hpp"
#include "stock/stock.hpp"
#include "vend/ops.hpp"

namespace vend::agent::ops_views {

// `slots`: the device's stock (Stock::slots). `owner`: the instance that
// serves it ("" for one agent).
ops::DeviceStatus device_status(const DeviceRecord& device, const Stock::Slots& slots,
                                int64_t now_ms, const std::string& owner);

// What a fleet summary counts besides the records.
struct FleetFacts {
  bool storage_ok = true;
  int64_t now_ms = 0;
  std::string instance;  // "" for one agent
};
ops::FleetSummary fleet_summary(const DeviceBook& devices, const Stock& stock,
                                const OrderBook& orders, const AlertBook& alerts,
                                const FleetFacts& facts);

}  // namespace vend::agent::ops_views
