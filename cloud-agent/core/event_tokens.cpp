// EventDesk: minted tokens (a restock arriving in the pool) and faults.
#include <set>

#include "core/event_desk.hpp"
#include "core/writes.hpp"

namespace vend::agent {

Result<std::vector<std::string>> EventDesk::fresh_tokens(const std::vector<std::string>& tokens) {
  std::vector<std::string> unknown;
  for (const auto& t : tokens) {
    if (!stock_.known(t)) unknown.push_back(t);
  }
  if (unknown.empty()) return unknown;
  // Tokens of orders evicted from memory are only in the database.
  auto known = repo.known_tokens(unknown);
  if (!known.ok()) return known.error();
  std::set<std::string> seen(known->begin(), known->end());
  std::vector<std::string> fresh;
  for (auto& t : unknown) {
    if (seen.count(t) == 0) fresh.push_back(std::move(t));
  }
  return fresh;
}

Status EventDesk::on_tokens(DeviceRecord& device, const proto::TokensMinted& minted,
                            Changeset& changes) {
  Restocks::Known known = restocks_.known(device.id, minted.restock_id);
  bool done = known == Restocks::Known::kMinted;
  if (known == Restocks::Known::kUnknown) {  // minted before a restart, or never requested here
    auto stored = repo.find_restock(device.id, minted.restock_id);
    if (!stored.ok()) return stored.error();
    done = stored->has_value() && (*stored)->minted;
  }
  if (done) {
    log.info(detail::kLog, device.id + ": restock " + minted.restock_id + " already minted");
    return {};
  }
  StoredRestock restock{minted.restock_id, device.id, minted.slot, 0, true};
  if (stock_.find(device.id, minted.slot) == nullptr) {
    // Unsellable until an operator defines the slot; the device keeps the
    // tokens and reconciliation reports the difference.
    std::string message = std::to_string(minted.tokens.size()) + " tokens of restock " +
                          minted.restock_id + " for unknown slot " + std::to_string(minted.slot);
    log.error(detail::kLog, device.id + ": " + message);
    changes.insert_fault(
        StoredFault{device.id, "tokens_for_unknown_slot", message, minted.slot, clock.wall_ms()});
  } else {
    auto fresh = fresh_tokens(minted.tokens);
    if (!fresh.ok()) return fresh.error();
    if (fresh->size() != minted.tokens.size()) {
      log.warn(detail::kLog, device.id + ": restock " + minted.restock_id + " repeats " +
                                 std::to_string(minted.tokens.size() - fresh->size()) +
                                 " known tokens: skipped");
    }
    stock_.add_to_pool(device.id, minted.slot, *fresh);
    restock.count = static_cast<int>(fresh->size());
    changes.insert_pool_tokens(device.id, minted.slot, minted.restock_id, *fresh);
    log.info(detail::kLog, device.id + " slot " + std::to_string(minted.slot) + ": +" +
                               std::to_string(restock.count) + " tokens (restock " +
                               minted.restock_id + ")");
  }
  changes.put_restock(restock, clock.wall_ms());
  restocks_.put(restock);
  return {};
}

void EventDesk::on_fault(DeviceRecord& device, const proto::Fault& fault, Changeset& changes) {
  changes.insert_fault(
      StoredFault{device.id, fault.code, fault.message, fault.slot, clock.wall_ms()});
  log.warn(detail::kLog, device.id + " fault " + fault.code + " (slot " +
                             std::to_string(fault.slot) + "): " + fault.message);
}

}  // namespace vend::agent
