// AgentCore::State: provisioning, slots and restock orders (operator calls).

#include <algorithm>
#include <set>

#include "agent_state.hpp"

namespace vend::agent {

namespace {

constexpr size_t kMaxProduct = 128;
constexpr int kMaxCapacity = 1000;

Status check_slot_spec(const SlotSpec& s) {
  std::string at = "slot " + std::to_string(s.slot);
  if (s.slot < 1 || s.slot > proto::kMaxSlot) {
    return make_error("bad_request", "slot must be 1.." + std::to_string(proto::kMaxSlot));
  }
  if (s.price_cents < 0) return make_error("bad_request", at + ": price_cents is negative");
  if (s.capacity < 1 || s.capacity > kMaxCapacity) {
    return make_error("bad_request", at + ": capacity must be 1.." + std::to_string(kMaxCapacity));
  }
  if (s.product.size() > kMaxProduct) {
    return make_error("bad_request",
                      at + ": product is longer than " + std::to_string(kMaxProduct));
  }
  return {};
}

}  // namespace

void AgentCore::State::add_slot(DeviceRecord& device, const SlotSpec& spec) {
  stock.define(device.id, spec);  // a new slot starts with an empty pool
}

Result<detail::Durable<ProvisionedDevice>> AgentCore::State::provision_device(
    const std::string& id, const std::vector<SlotSpec>& slots) {
  if (!proto::is_valid_id(id)) {
    return make_error("bad_request", "device id must be 1..64 chars of [A-Za-z0-9._-]");
  }
  if (auto owner = owner_check(id); !owner.ok()) return owner.error();
  std::set<int> seen;
  for (const auto& s : slots) {
    if (auto st = check_slot_spec(s); !st.ok()) return st.error();
    if (!seen.insert(s.slot).second) {
      return make_error("bad_request", "slot " + std::to_string(s.slot) + " given twice");
    }
  }
  if (devices.contains(id)) return make_error("conflict", "device " + id + " already exists");
  if (auto s = writable(); !s.ok()) return s.error();

  crypto::Key key = crypto::Key::generate();
  DeviceRecord& dev = devices.add(id);
  dev.id = id;
  dev.keys = DeviceKeys(key);
  dev.created_ms = clock.wall_ms();
  Changeset changes;
  changes.insert_device(id, key.to_hex(), dev.created_ms);
  for (const auto& s : slots) {
    add_slot(dev, s);
    changes.upsert_slot(id, s);
  }
  Ticket t = commit(std::move(changes));
  schedule_reconcile(dev, first_reconcile_at(id));
  mark_device_dirty(id);
  if (owns) subscribe_device(id);
  log.info(detail::kLog, "provisioned " + id + " with " + std::to_string(slots.size()) + " slots");
  return detail::Durable<ProvisionedDevice>{ProvisionedDevice{id, key.to_hex()}, t};
}

std::vector<DeviceView> AgentCore::State::device_views() {
  std::vector<DeviceView> out;
  out.reserve(devices.size());
  for (const auto& [id, d] : devices) out.push_back(device_view(d));
  return out;
}

DeviceView AgentCore::State::device_view(const DeviceRecord& d) {
  return DeviceView{d.id,
                    d.online,
                    d.boot_id,
                    d.last_seen_ms,
                    d.acks.last_processed(),
                    d.ledger_id,
                    d.keys.next().has_value(),
                    d.decommissioned_ms != 0,
                    d.clock_skew.skew_ms()};
}

// The estimate and its alert are ClockSkew's (device_link.hpp).
void AgentCore::State::observe_clock(DeviceRecord& device, int64_t device_ts_ms) {
  if (device.clock_skew.observe(clock.monotonic_ms(), device_ts_ms, clock.wall_ms(),
                                options.clock_skew_window_ms)) {
    mark_device_dirty(device.id);
  }
  int64_t skew = device.clock_skew.skew_ms().value_or(0);
  int64_t size = skew < 0 ? -skew : skew;
  ClockSkew::Alert verdict = device.clock_skew.judge(options.clock_skew_alert_ms);
  if (verdict == ClockSkew::Alert::kRaise) {
    if (alert_active(device.id, 0, "clock_skew")) return;  // said once, not per event
    raise_alert(device.id, 0, "clock_skew", "warning",
                "device clock " + std::string(skew > 0 ? "ahead" : "behind") + " by about " +
                    std::to_string(size) + " ms (alert above " +
                    std::to_string(options.clock_skew_alert_ms) +
                    " ms; commands are checked with a " + std::to_string(options.expiry_skew_ms) +
                    " ms tolerance)");
  } else if (verdict == ClockSkew::Alert::kClear) {
    clear_alert(device.id, 0, "clock_skew");
  }
}

Result<std::vector<SlotView>> AgentCore::State::slot_views(const std::string& device_id) {
  if (auto owner = owner_check(device_id); !owner.ok()) return owner.error();
  auto* dev = devices.find(device_id);
  if (dev == nullptr) return make_error("not_found", "no device '" + device_id + "'");
  std::vector<SlotView> out;
  for (const auto& [n, s] : stock.slots(device_id)) {
    out.push_back(SlotView{device_id, n, s.spec.product, s.spec.price_cents, s.spec.capacity,
                           static_cast<int64_t>(s.pool.size()), s.reserved, s.dispatched, s.sold,
                           s.burned});
  }
  return out;
}

Result<Ticket> AgentCore::State::set_slot(const std::string& device_id, const SlotSpec& slot) {
  if (auto owner = owner_check(device_id); !owner.ok()) return owner.error();
  if (auto s = check_slot_spec(slot); !s.ok()) return s.error();
  auto* dev = devices.find(device_id);
  if (dev == nullptr) return make_error("not_found", "no device '" + device_id + "'");
  if (auto s = writable(); !s.ok()) return s.error();
  // A new price applies to new reservations; open orders keep theirs.
  add_slot(*dev, slot);
  mark_device_dirty(device_id);
  Changeset changes;
  changes.upsert_slot(device_id, slot);
  return commit(std::move(changes));
}

Result<detail::Durable<proto::RestockCommand>> AgentCore::State::request_restock(
    const std::string& device_id, int slot, int count) {
  if (auto owner = owner_check(device_id); !owner.ok()) return owner.error();
  if (count < 1 || count > proto::kMaxRestockCount) {
    return make_error("bad_request", "count must be 1.." + std::to_string(proto::kMaxRestockCount));
  }
  auto* dev = devices.find(device_id);
  if (dev == nullptr) return make_error("not_found", "no device '" + device_id + "'");
  if (stock.find(device_id, slot) == nullptr) {
    return make_error("unknown_slot", device_id + " has no slot " + std::to_string(slot));
  }
  if (dev->decommissioned_ms != 0) {
    return make_error("decommissioned", device_id + " is decommissioned");
  }
  if (auto s = writable(); !s.ok()) return s.error();
  StoredRestock restock{"rst-" + random.id128(), device_id, slot, count, false};
  restocks.put(restock);
  Changeset changes;
  changes.put_restock(restock, clock.wall_ms());
  Ticket t = commit(std::move(changes));
  return detail::Durable<proto::RestockCommand>{
      proto::RestockCommand{device_id, restock.restock_id, slot, count}, t};
}

Result<std::string> AgentCore::State::publish_restock(const proto::RestockCommand& command) {
  auto* dev = devices.find(command.device);
  if (dev == nullptr) return make_error("not_found", "no device '" + command.device + "'");
  if (auto s = publish_command(*dev, command); !s.ok()) {
    return make_error("unavailable", "restock " + command.restock_id + " recorded, not sent yet (" +
                                         s.error().message +
                                         "): it is sent when the broker connection returns");
  }
  log.info(detail::kLog, "restock " + command.restock_id + " sent to " + command.device);
  return command.restock_id;
}

void AgentCore::State::resend_restocks(const std::string& device) {
  for (const StoredRestock& r : restocks.requested(device)) {
    const DeviceRecord* dev = devices.find(r.device);
    if (dev == nullptr || dev->decommissioned_ms != 0 || !serves(r.device)) continue;
    proto::RestockCommand command{r.device, r.restock_id, r.slot, r.count};
    if (!publish_command(*dev, command).ok()) return;  // not connected: the next connect
    ++counters.restocks_resent_total;
  }
}

}  // namespace vend::agent
