// AgentCore::State: what devices report — dispense results, minted tokens,
// snapshots, faults. Called for an authenticated event with the next seq;
// the writes go into the event's changeset (committed with its seq).
#include <algorithm>
#include <set>

#include "agent_state.hpp"

namespace vend::agent {

Status AgentCore::State::on_dispense_result(DeviceRecord& device, const proto::DispenseResult& r,
                                            Changeset& changes) {
  auto found = find_or_load_order(r.order_id);  // a settled order may have been evicted
  if (!found.ok()) return found.error();        // unacknowledged: it comes again
  OrderRec* rec = *found;
  std::string what = std::string(proto::to_string(r.status)) +
                     (r.reason.empty() ? "" : " (" + r.reason + ")") + " for order " + r.order_id;
  auto decision =
      rules::decide_result(rec == nullptr ? nullptr : &rec->order, device.id, r, clock.wall_ms());
  using Kind = rules::ResultDecision::Kind;
  switch (decision.kind) {
    case Kind::kIgnore: ignore_result(device, rec, what, decision.ignored); break;
    case Kind::kContradiction: report_contradiction(device, *rec, what, changes); break;
    case Kind::kRetry:
      schedule_resend(*rec, clock.wall_ms() + options.busy_retry_ms);
      log.info(detail::kLog, device.id + " busy; order " + rec->order.id + " re-sent soon");
      break;
    case Kind::kAwaitDeadline: break;  // past expiry: the dispatch deadline settles it
    case Kind::kSettle:
      if (counters.dispatch_latency_ms.size() < detail::kMaxLatencySamples) {
        counters.dispatch_latency_ms.push_back(
            static_cast<double>(clock.monotonic_ms() - rec->paid_mono_ms));
      }
      settle(*rec, decision.settlement, changes);
      log.info(detail::kLog, device.id + ": " + what + " -> " + to_string(rec->order.state));
      break;
  }
  return {};
}

void AgentCore::State::ignore_result(const DeviceRecord& device, const OrderRec* rec,
                                     const std::string& what, rules::ResultDecision::Ignored why) {
  switch (why) {
    case rules::ResultDecision::Ignored::kNoOrder:
      return log.info(detail::kLog, device.id + ": " + what + ": no such order, ignored");
    case rules::ResultDecision::Ignored::kSettled:
      return log.info(detail::kLog, device.id + ": " + what + " but the order is " +
                                        to_string(rec->order.state) + ": no transition");
    case rules::ResultDecision::Ignored::kOtherTokenOrSlot:
      return log.warn(detail::kLog,
                      device.id + ": " + what + " names another token or slot: ignored");
  }
}

// An item left the machine for an order the cloud settled otherwise
// (refunded, expired, cancelled, failed, under review): money and stock
// disagree with what happened. Nothing is changed automatically — the order
// keeps its state — but an operator must see it: an alert and a fault row.
void AgentCore::State::report_contradiction(DeviceRecord& device, const OrderRec& rec,
                                            const std::string& what, Changeset& changes) {
  ++counters.contradictions_total;
  std::string message = what + " but the order is " + to_string(rec.order.state) +
                        (rec.order.reason.empty() ? "" : " (" + rec.order.reason + ")") +
                        ": an item left the machine for an order settled otherwise";
  log.error(detail::kLog, device.id + ": " + message);
  changes.insert_fault(StoredFault{device.id, "dispense_contradiction", message.substr(0, 512),
                                   rec.order.slot, clock.wall_ms()});
  raise_alert(device.id, rec.order.slot, "dispense_contradiction", "critical", message);
}

Result<std::vector<std::string>> AgentCore::State::fresh_tokens(
    const std::vector<std::string>& tokens) {
  std::vector<std::string> unknown;
  for (const auto& t : tokens) {
    if (!stock.known(t)) unknown.push_back(t);
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

Status AgentCore::State::on_tokens(DeviceRecord& device, const proto::TokensMinted& minted,
                                   Changeset& changes) {
  Restocks::Known known = restocks.known(device.id, minted.restock_id);
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
  if (stock.find(device.id, minted.slot) == nullptr) {
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
    stock.add_to_pool(device.id, minted.slot, *fresh);
    restock.count = static_cast<int>(fresh->size());
    changes.insert_pool_tokens(device.id, minted.slot, minted.restock_id, *fresh);
    log.info(detail::kLog, device.id + " slot " + std::to_string(minted.slot) + ": +" +
                               std::to_string(restock.count) + " tokens (restock " +
                               minted.restock_id + ")");
  }
  changes.put_restock(restock, clock.wall_ms());
  restocks.put(restock);
  return {};
}

void AgentCore::State::on_fault(DeviceRecord& device, const proto::Fault& fault,
                                Changeset& changes) {
  changes.insert_fault(
      StoredFault{device.id, fault.code, fault.message, fault.slot, clock.wall_ms()});
  log.warn(detail::kLog, device.id + " fault " + fault.code + " (slot " +
                             std::to_string(fault.slot) + "): " + fault.message);
}

}  // namespace vend::agent
