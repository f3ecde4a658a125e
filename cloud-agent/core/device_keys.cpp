// DeviceDesk: a device's key over its life. Rotation (a new key is issued
// and accepted beside the old one until the device signs with it;
// EventDesk::verify_signed) and decommissioning (out of sale for good, its
// key refused, its id kept).
#include "core/device_desk.hpp"
#include "core/order_desk.hpp"
#include "core/output.hpp"
#include "vend/crypto.hpp"
#include "core/writes.hpp"

namespace vend::agent {

Result<detail::Durable<ProvisionedDevice>> DeviceDesk::rotate_key(const std::string& id) {
  if (auto owner = owner_check(id); !owner.ok()) return owner.error();
  auto* it = devices_.find(id);
  if (it == nullptr) return make_error("not_found", "no device '" + id + "'");
  DeviceRecord& dev = *it;
  if (dev.decommissioned_ms != 0) {
    return make_error("decommissioned", id + " is decommissioned; its key is revoked");
  }
  if (auto s = writes_.writable(); !s.ok()) return s.error();
  crypto::Key key = crypto::Key::generate();
  Changeset changes;
  changes.set_next_key(id, key.to_hex());
  Ticket t = writes_.commit(std::move(changes));
  // A second rotation before the device took the first replaces it.
  dev.keys.issue_next(key);
  log.info(detail::kLog, id + ": new key issued; the current key stays valid until the device "
                              "signs with the new one");
  return detail::Durable<ProvisionedDevice>{ProvisionedDevice{id, key.to_hex()}, t};
}

Result<detail::Durable<DecommissionedDevice>> DeviceDesk::decommission_device(
    const std::string& id) {
  if (auto owner = owner_check(id); !owner.ok()) return owner.error();
  auto* it = devices_.find(id);
  if (it == nullptr) return make_error("not_found", "no device '" + id + "'");
  DeviceRecord& dev = *it;
  if (dev.decommissioned_ms != 0) return make_error("conflict", id + " is decommissioned already");
  DecommissionedDevice out{id, 0, 0};
  std::vector<OrderRef> reserved;
  int in_flight = 0;
  for (OrderRef ref : orders_.open_orders()) {
    const Order& o = orders_.at(ref)->order;  // open orders stay in memory
    if (o.device != id) continue;
    if (o.state == OrderState::kReserved) {
      reserved.push_back(ref);
    } else {
      ++in_flight;  // PAID or DISPATCHED: the machine may still dispense it
    }
  }
  if (in_flight > 0) {
    return make_error("conflict", id + " has " + std::to_string(in_flight) +
                                      " paid order(s) in flight; decommission once they settle");
  }
  if (auto s = writes_.writable(); !s.ok()) return s.error();
  Changeset changes;
  for (OrderRef ref : reserved) {  // their tokens return to the pool, burned below
    OrderRec& rec = *orders_.at(ref);
    order_desk_.settle(rec, *rules::decide_withdrawal(rec.order), changes);
    ++out.orders_cancelled;
  }
  for (const auto& [slot, token] : stock_.withdraw(id)) {
    changes.move_token(token, TokenState::kPool, TokenState::kBurned, "");
    ++out.tokens_withdrawn;
  }
  dev.decommissioned_ms = clock.wall_ms();
  dev.keys.drop_next();
  dev.online = false;
  changes.decommission_device(id, dev.decommissioned_ms);
  Ticket t = writes_.commit(std::move(changes));
  for (OrderRef ref : reserved) orders_.at(ref)->last_write = t;
  out_.mark_device_dirty(id);
  log.info(detail::kLog, id + " decommissioned: " + std::to_string(out.tokens_withdrawn) +
                             " token(s) withdrawn, " + std::to_string(out.orders_cancelled) +
                             " reservation(s) cancelled; its key is revoked");
  return detail::Durable<DecommissionedDevice>{out, t};
}

}  // namespace vend::agent
