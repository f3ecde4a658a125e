// DeviceDesk: start-up of the devices, provisioning, slots and restock
// orders (operator calls), the device views.
#include "core/device_desk.hpp"

#include <algorithm>
#include <set>

#include "core/output.hpp"
#include "core/writes.hpp"
#include "vend/crypto.hpp"

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

Status DeviceDesk::load(const LoadedState& loaded) {
  for (const auto& d : loaded.devices) {
    auto key = crypto::Key::from_hex(d.key_hex);
    if (!key.ok())
      return make_error("corrupt", "key of device " + d.id + ": " + key.error().message);
    DeviceRecord& dev = devices_.add(d.id);
    dev.keys = DeviceKeys(std::move(key).value());
    dev.created_ms = d.created_ms;
    dev.acks.restore(d.last_processed_seq, d.last_mac);
    dev.ledger_id = d.ledger_id;
    dev.decommissioned_ms = d.decommissioned_ms;
    if (!d.next_key_hex.empty()) {
      auto next = crypto::Key::from_hex(d.next_key_hex);
      if (!next.ok())
        return make_error("corrupt", "next key of device " + d.id + ": " + next.error().message);
      dev.keys.issue_next(std::move(next).value());
    }
    dev.retired_ledgers.insert(d.retired_ledgers.begin(), d.retired_ledgers.end());
  }
  for (const auto& s : loaded.slots) {
    if (!devices_.contains(s.device)) continue;
    stock_.load_slot(s.device, s.spec, s.sold, s.burned);
  }
  for (const auto& t : loaded.pool) stock_.load_pool_token(t.device, t.slot, t.token);
  for (const auto& r : loaded.requested) restocks_.put(r);
  return {};
}

void DeviceDesk::started() {
  for (auto& [id, dev] : devices_) start_device(id, dev);
}

void DeviceDesk::started(const LoadedState& loaded) {
  for (const auto& d : loaded.devices) {
    if (DeviceRecord* dev = devices_.find(d.id)) start_device(d.id, *dev);
  }
}

void DeviceDesk::start_device(const std::string& id, DeviceRecord& dev) {
  schedule_reconcile(dev, first_reconcile_at(id));
  out_.mark_device_dirty(id);
  if (owns) out_.subscribe_device(id);
}

Result<detail::Durable<ProvisionedDevice>> DeviceDesk::provision_device(
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
  if (devices_.contains(id)) return make_error("conflict", "device " + id + " already exists");
  if (auto s = writes_.writable(); !s.ok()) return s.error();

  crypto::Key key = crypto::Key::generate();
  DeviceRecord& dev = devices_.add(id);
  dev.id = id;
  dev.keys = DeviceKeys(key);
  dev.created_ms = clock.wall_ms();
  Changeset changes;
  changes.insert_device(id, key.to_hex(), dev.created_ms);
  for (const auto& s : slots) {
    stock_.define(id, s);  // a new slot starts with an empty pool
    changes.upsert_slot(id, s);
  }
  Ticket t = writes_.commit(std::move(changes));
  schedule_reconcile(dev, first_reconcile_at(id));
  out_.mark_device_dirty(id);
  if (owns) out_.subscribe_device(id);
  log.info(detail::kLog, "provisioned " + id + " with " + std::to_string(slots.size()) + " slots");
  return detail::Durable<ProvisionedDevice>{ProvisionedDevice{id, key.to_hex()}, t};
}

std::vector<DeviceView> DeviceDesk::device_views() const {
  std::vector<DeviceView> out;
  out.reserve(devices_.size());
  for (const auto& [id, d] : devices_) out.push_back(device_view(d));
  return out;
}

DeviceView DeviceDesk::device_view(const DeviceRecord& d) {
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

Result<std::vector<SlotView>> DeviceDesk::slot_views(const std::string& device_id) const {
  if (auto owner = owner_check(device_id); !owner.ok()) return owner.error();
  auto* dev = devices_.find(device_id);
  if (dev == nullptr) return make_error("not_found", "no device '" + device_id + "'");
  std::vector<SlotView> out;
  for (const auto& [n, s] : stock_.slots(device_id)) {
    out.push_back(SlotView{device_id, n, s.spec.product, s.spec.price_cents, s.spec.capacity,
                           static_cast<int64_t>(s.pool.size()), s.reserved, s.dispatched, s.sold,
                           s.burned});
  }
  return out;
}

Result<Ticket> DeviceDesk::set_slot(const std::string& device_id, const SlotSpec& slot) {
  if (auto owner = owner_check(device_id); !owner.ok()) return owner.error();
  if (auto s = check_slot_spec(slot); !s.ok()) return s.error();
  auto* dev = devices_.find(device_id);
  if (dev == nullptr) return make_error("not_found", "no device '" + device_id + "'");
  if (auto s = writes_.writable(); !s.ok()) return s.error();
  // A new price applies to new reservations; open orders keep theirs.
  stock_.define(device_id, slot);
  out_.mark_device_dirty(device_id);
  Changeset changes;
  changes.upsert_slot(device_id, slot);
  return writes_.commit(std::move(changes));
}

Result<detail::Durable<proto::RestockCommand>> DeviceDesk::request_restock(
    const std::string& device_id, int slot, int count) {
  if (auto owner = owner_check(device_id); !owner.ok()) return owner.error();
  if (count < 1 || count > proto::kMaxRestockCount) {
    return make_error("bad_request", "count must be 1.." + std::to_string(proto::kMaxRestockCount));
  }
  auto* dev = devices_.find(device_id);
  if (dev == nullptr) return make_error("not_found", "no device '" + device_id + "'");
  if (stock_.find(device_id, slot) == nullptr) {
    return make_error("unknown_slot", device_id + " has no slot " + std::to_string(slot));
  }
  if (dev->decommissioned_ms != 0) {
    return make_error("decommissioned", device_id + " is decommissioned");
  }
  if (auto s = writes_.writable(); !s.ok()) return s.error();
  StoredRestock restock{"rst-" + random.id128(), device_id, slot, count, false};
  restocks_.put(restock);
  Changeset changes;
  changes.put_restock(restock, clock.wall_ms());
  Ticket t = writes_.commit(std::move(changes));
  return detail::Durable<proto::RestockCommand>{
      proto::RestockCommand{device_id, restock.restock_id, slot, count}, t};
}

Result<std::string> DeviceDesk::publish_restock(const proto::RestockCommand& command) {
  auto* dev = devices_.find(command.device);
  if (dev == nullptr) return make_error("not_found", "no device '" + command.device + "'");
  if (auto s = out_.publish_command(*dev, command); !s.ok()) {
    return make_error("unavailable", "restock " + command.restock_id + " recorded, not sent yet (" +
                                         s.error().message +
                                         "): it is sent when the broker connection returns");
  }
  log.info(detail::kLog, "restock " + command.restock_id + " sent to " + command.device);
  return command.restock_id;
}

void DeviceDesk::resend_restocks(const std::string& device) {
  for (const StoredRestock& r : restocks_.requested(device)) {
    const DeviceRecord* dev = devices_.find(r.device);
    if (dev == nullptr || dev->decommissioned_ms != 0 || !serves(r.device)) continue;
    proto::RestockCommand command{r.device, r.restock_id, r.slot, r.count};
    if (!out_.publish_command(*dev, command).ok()) return;  // not connected: the next connect
    ++counters.restocks_resent_total;
  }
}

void DeviceDesk::restock_publish_failed(const std::string& device) {
  DeviceRecord* dev = devices_.find(device);
  if (dev == nullptr || dev->restock_timer.pending()) return;  // one retry covers them all
  int64_t now = clock.monotonic_ms();
  // Failures long apart are not "in a row": the backoff starts over.
  if (now - dev->restock_failed_mono_ms > 2 * kRestockRetryMaxMs) dev->restock_publish_failures = 0;
  dev->restock_failed_mono_ms = now;
  int64_t delay = kRestockRetryBaseMs;
  for (uint32_t i = 0; i < dev->restock_publish_failures && delay < kRestockRetryMaxMs; ++i) {
    delay *= 2;
  }
  delay = std::min(delay, kRestockRetryMaxMs);
  ++dev->restock_publish_failures;
  log.warn(detail::kLog, "restock command to " + device + " not published; sent again in " +
                             std::to_string(delay) + " ms");
  deadlines_.schedule(dev->restock_timer, TimerKind::kRestockResend, dev->index, now + delay);
}

void DeviceDesk::on_restock_timer(DeviceRecord& dev) {
  if (dev.decommissioned_ms != 0 || !serves(dev.id)) return;
  // Minted meanwhile (or sent by a connect): nothing left, nothing sent.
  resend_restocks(dev.id);
}

}  // namespace vend::agent
