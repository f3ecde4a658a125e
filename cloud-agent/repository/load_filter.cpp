// keep_accepted() (repository_types.hpp): the part of a filtered load that
// names no machine, filtered by its owner key after the queries.
#include <string>
#include <unordered_map>

#include "contracts/repository_types.hpp"

namespace vend::agent {

void keep_accepted(LoadedState& loaded, const LoadFilter& only) {
  // A payment's order may be evicted from the load (finished long ago) or
  // unknown: then its order id decides. A refund names its machine (schema
  // v8); one written before is given its order's, if loaded.
  std::unordered_map<std::string, std::string> device_of;
  for (const auto* orders_of : {&loaded.open_orders, &loaded.recent_orders}) {
    for (const Order& o : *orders_of) device_of[o.id] = o.device;
  }
  std::erase_if(loaded.payments, [&](const StoredPayment& p) {
    return !device_of.contains(p.order_id) && !only(p.order_id);
  });
  for (StoredRefund& r : loaded.pending_refunds) {
    if (!r.device.empty()) continue;
    if (auto it = device_of.find(r.order_id); it != device_of.end()) r.device = it->second;
  }
  std::erase_if(loaded.pending_refunds, [&](const StoredRefund& r) { return !only(owner_key(r)); });
  // The log's counts are the fleet's; a filtered load counts what it holds.
  loaded.order_counts.clear();
  for (const auto* orders_of : {&loaded.open_orders, &loaded.recent_orders}) {
    for (const Order& o : *orders_of) ++loaded.order_counts[o.state];
  }
}

}  // namespace vend::agent
