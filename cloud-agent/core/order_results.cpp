// OrderDesk: what a machine reports of an order — its dispense result —
// applied with the event that carried it (rules::decide_result).
#include "core/order_desk.hpp"
#include "core/output.hpp"
#include "core/writes.hpp"

namespace vend::agent {

Status OrderDesk::on_result(const DeviceRecord& device, const proto::DispenseResult& r,
                            Changeset& changes) {
  auto found = find_or_load_order(r.order_id);  // a settled order may have been evicted
  if (!found.ok()) return found.error();        // unacknowledged: it comes again
  OrderRec* rec = *found;
  std::string what = std::string(proto::to_string(r.status)) +
                     (r.reason.empty() ? "" : " (" + r.reason + ")") + " for order " + r.order_id;
  auto decision = rules::decide_result(rec == nullptr ? nullptr : &rec->order, device.id, r,
                                       rec == nullptr ? clock.wall_ms() : order_now(*rec));
  using Kind = rules::ResultDecision::Kind;
  switch (decision.kind) {
    case Kind::kIgnore: ignore_result(device, rec, what, decision.ignored); break;
    case Kind::kContradiction: report_contradiction(device, *rec, what, changes); break;
    case Kind::kRetry:
      schedule_resend(*rec, options.busy_retry_ms);
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

size_t OrderDesk::mark_ledger_replaced(const std::string& device, Changeset& changes) {
  size_t marked = 0;
  for (OrderRef ref : orders_.open_orders()) {
    OrderRec& rec = *orders_.at(ref);
    if (rec.order.device != device) continue;
    auto after = rules::decide_ledger_replaced(rec.order);
    if (!after) continue;
    rec.order = std::move(*after);
    rec.order.updated_ms = clock.wall_ms();
    changes.transition_order(rec.order, OrderState::kDispatched,
                             "the device's ledger was replaced: token never sold again");
    writes_.touch(rec.ref);
    log.warn(detail::kLog, device + ": order " + rec.order.id +
                               " was dispatched under a replaced ledger: its command is no "
                               "longer sent, its token never sold again");
    ++marked;
  }
  return marked;
}

void OrderDesk::ignore_result(const DeviceRecord& device, const OrderRec* rec,
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
void OrderDesk::report_contradiction(const DeviceRecord& device, const OrderRec& rec,
                                     const std::string& what, Changeset& changes) {
  ++counters.contradictions_total;
  std::string message = what + " but the order is " + to_string(rec.order.state) +
                        (rec.order.reason.empty() ? "" : " (" + rec.order.reason + ")") +
                        ": an item left the machine for an order settled otherwise";
  log.error(detail::kLog, device.id + ": " + message);
  changes.insert_fault(StoredFault{device.id, "dispense_contradiction", message.substr(0, 512),
                                   rec.order.slot, clock.wall_ms()});
  out_.raise_alert(device.id, rec.order.slot, "dispense_contradiction", "critical", message);
}

}  // namespace vend::agent
