// Private to the agent core: the machines as operators manage them.
// Provisioning (a key, the slots), slot definitions and prices, restock
// orders (recorded, then sent; re-sent until minted), key rotation and
// decommissioning, the device views, and when each machine is asked for
// the snapshot that reconciles it (periodically, staggered by id; on demand).
#pragma once

#include <string>
#include <vector>

#include "core/core_env.hpp"
#include "deadlines/deadlines.hpp"
#include "devices/device_book.hpp"
#include "orders/order_book.hpp"
#include "stock/restocks.hpp"
#include "stock/stock.hpp"

namespace vend::agent {

class OrderDesk;
class Output;
class Writes;

class DeviceDesk : public CoreEnv {
 public:
  DeviceDesk(const CoreEnv& env, DeviceBook& devices, Stock& stock, Restocks& restocks,
             OrderBook& orders, Deadlines& deadlines, Writes& writes, Output& out,
             OrderDesk& order_desk)
      : CoreEnv(env),
        devices_(devices),
        stock_(stock),
        restocks_(restocks),
        orders_(orders),
        deadlines_(deadlines),
        writes_(writes),
        out_(out),
        order_desk_(order_desk) {}
  DeviceDesk(const DeviceDesk&) = delete;
  DeviceDesk& operator=(const DeviceDesk&) = delete;

  // ---- device_desk.cpp ----
  // The log's devices, slots, pools and requested restocks, into memory.
  Status load(const LoadedState& loaded);
  // Each device's periodic reconcile and its ops view (and, in cluster
  // mode, its subscription) after start-up; started(loaded): the same for
  // the devices of `loaded` only (several agents: shards just gained).
  void started();
  void started(const LoadedState& loaded);
  Result<detail::Durable<ProvisionedDevice>> provision_device(const std::string& id,
                                                              const std::vector<SlotSpec>& slots);
  std::vector<DeviceView> device_views() const;
  static DeviceView device_view(const DeviceRecord& d);
  Result<std::vector<SlotView>> slot_views(const std::string& device_id) const;
  Result<Ticket> set_slot(const std::string& device_id, const SlotSpec& slot);
  Result<detail::Durable<proto::RestockCommand>> request_restock(const std::string& device_id,
                                                                 int slot, int count);
  Result<std::string> publish_restock(const proto::RestockCommand& command);
  // The restocks not yet minted, of `device` ("" = every device), are sent
  // again: one whose command was lost (the broker was down, the agent
  // restarted) still reaches its machine, which keeps one restock per id
  // (a repeat is answered "duplicate" and changes nothing).
  void resend_restocks(const std::string& device);
  // A restock command to `device` was queued but the transport refused it
  // (while connected: Paho's queue full, the connection dropping): its
  // restocks are sent again after kRestockRetryBaseMs, doubling per failure
  // in a row up to kRestockRetryMaxMs, until one goes out or none is left
  // to send (minted, decommissioned, no longer served). A connect sends
  // them too (EventDesk's first presence probe).
  void restock_publish_failed(const std::string& device);
  static constexpr int64_t kRestockRetryBaseMs = 1000;
  static constexpr int64_t kRestockRetryMaxMs = 30'000;

  // ---- device_keys.cpp ----
  Result<detail::Durable<ProvisionedDevice>> rotate_key(const std::string& id);
  Result<detail::Durable<DecommissionedDevice>> decommission_device(const std::string& id);

  // ---- device_reconcile.cpp: when reconciliation runs ----
  // The device's periodic timer, or its restock retry, fell due (if it is
  // still its slot's).
  void fire_timer(const FiredTimer& timer);
  Result<std::string> request_reconcile(const std::string& device_id);
  // The audit row of an operator's request about the device that changes
  // nothing in the log (a reconcile request), committed alone and fenced by
  // the device; refused as request_reconcile() would be (not_found,
  // device_offline, not_owner) so no row names a request never made.
  Result<Ticket> record_audit(const std::string& device_id, const AuditEntry& audit);
  Result<std::string> reconcile_report(const std::string& device_id);

  // ---- device_update.cpp: firmware updates over the air ----
  // Sends an `update` command (v2 only) to an online device; returns its
  // update id. The signature is the release engineer's (update key), not
  // checked here: the device verifies it.
  Result<std::string> request_update(const std::string& device_id, const UpdateRequest& update);

 private:
  void start_device(const std::string& id, DeviceRecord& dev);
  void schedule_reconcile(DeviceRecord& device, int64_t at_ms);
  // The first periodic request: staggered over one interval by device id,
  // so a fleet's requests do not all go out at once.
  int64_t first_reconcile_at(const std::string& device_id) const;
  void on_reconcile_timer(DeviceRecord& device);
  void on_restock_timer(DeviceRecord& device);

  DeviceBook& devices_;
  Stock& stock_;
  Restocks& restocks_;
  OrderBook& orders_;
  Deadlines& deadlines_;
  Writes& writes_;
  Output& out_;
  OrderDesk& order_desk_;
};

}  // namespace vend::agent
