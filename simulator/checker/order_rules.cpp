// Order and money rules of the promise: dispenses match orders, paid orders
// are never lost, refunds are recorded (see invariant_checker.hpp).
#include <set>

#include "checker/fleet_records.hpp"

namespace vend::sim::detail {

namespace {

void add(std::vector<Violation>& out, const char* invariant, std::string evidence) {
  out.push_back(Violation{invariant, std::move(evidence)});
}

// The ledger dispense of an order on its device, or null (also when the
// device's ledger is not visible).
const LedgerDispense* find_dispense(const FleetRecords& r, const AgentOrder& o) {
  auto ledger = r.ledgers.find(o.device);
  if (ledger == r.ledgers.end()) return nullptr;
  for (const auto& d : ledger->second.dispenses) {
    if (d.order_id == o.id) return &d;
  }
  return nullptr;
}

bool ledger_visible(const FleetRecords& r, const std::string& device) {
  return r.ledgers.count(device) != 0;
}

void check_dispensed_orders(const FleetRecords& r, CheckPhase phase, std::vector<Violation>& out) {
  for (const auto& [device, ledger] : r.ledgers) {
    for (const auto& d : ledger.dispenses) {
      // A result lost with a replaced ledger file never reached the agent:
      // the customer keeps the item whatever the agent decided.
      if (d.state != "DISPENSED" || d.lost_with_ledger) continue;
      std::string what = device + " dispensed order " + d.order_id;
      auto it = r.agent.orders.find(d.order_id);
      if (it == r.agent.orders.end()) {
        add(out, "dispense_order_mismatch", what + " that the agent does not know");
        continue;
      }
      const AgentOrder& o = it->second;
      bool ok_state =
          o.state == "COMPLETED" || (phase == CheckPhase::kRunning && o.state == "DISPATCHED");
      if (o.device != device || o.token != d.token || !ok_state) {
        add(out, "dispense_order_mismatch",
            what + " (token " + d.token + "); agent has it " + o.state + " on " + o.device +
                " with token " + o.token + (o.reason.empty() ? "" : " reason " + o.reason));
      }
    }
  }
}

void check_completed_orders(const FleetRecords& r, std::vector<Violation>& out) {
  for (const auto& [id, o] : r.agent.orders) {
    if (o.state != "COMPLETED" || !ledger_visible(r, o.device)) continue;
    const LedgerDispense* d = find_dispense(r, o);
    if (d == nullptr || d->state != "DISPENSED") {
      add(out, "completed_without_dispense",
          "order " + id + " COMPLETED at the agent; " + o.device + " has it " +
              (d ? d->state : std::string("not at all")));
    }
  }
}

bool is_paid(const AgentRecords& a, const AgentOrder& o) {
  if (!o.payment_id.empty()) return true;
  for (const auto& [payment, order] : a.applied_payments) {
    if (order == o.id) return true;
  }
  return false;
}

// Why a paid order in `o.state` breaks the promise, or "" when it does not.
std::string paid_order_problem(const FleetRecords& r, const AgentOrder& o, CheckPhase phase) {
  static const std::set<std::string> kInFlight = {"PAID", "DISPATCHED", "FAILED"};
  static const std::set<std::string> kFinal = {"COMPLETED", "REFUNDED", "NEEDS_REVIEW"};
  if (phase == CheckPhase::kRunning) {
    return kInFlight.count(o.state) || kFinal.count(o.state) ? "" : "paid but " + o.state;
  }
  if (!kFinal.count(o.state)) return "paid and still " + o.state + " after settling";
  if (o.state != "NEEDS_REVIEW") return "";
  if (!ledger_visible(r, o.device)) return o.reason.empty() ? "NEEDS_REVIEW without a cause" : "";
  const LedgerDispense* d = find_dispense(r, o);
  if (d != nullptr && d->state == "UNCERTAIN") return "";
  // The machine's ledger now says UNCERTAIN; what really happened went with
  // the file a restore replaced.
  if (d != nullptr && d->lost_with_ledger) return "";
  return "NEEDS_REVIEW but " + o.device + " has it " + (d ? d->state : std::string("not at all")) +
         ", not UNCERTAIN";
}

void check_paid_orders(const FleetRecords& r, CheckPhase phase, std::vector<Violation>& out) {
  for (const auto& [id, o] : r.agent.orders) {
    if (!is_paid(r.agent, o)) continue;
    std::string problem = paid_order_problem(r, o, phase);
    if (!problem.empty()) {
      add(out, "paid_order_lost",
          evidence({"order ", id, " on ", o.device, "/", std::to_string(o.slot), ": ", problem,
                    o.reason.empty() ? "" : " (reason ", o.reason, o.reason.empty() ? "" : ")"}));
    }
  }
}

void check_refunds(const FleetRecords& r, CheckPhase phase, std::vector<Violation>& out) {
  std::set<std::string> refunded_orders;
  for (const auto& [payment, order] : r.agent.refunds) refunded_orders.insert(order);
  for (const auto& [id, o] : r.agent.orders) {
    if (o.state == "COMPLETED" && !o.payment_id.empty() && r.agent.refunds.count(o.payment_id)) {
      add(out, "completed_and_refunded",
          "order " + id + " COMPLETED and its payment " + o.payment_id + " refunded");
    }
    if (phase == CheckPhase::kSettled && o.state == "REFUNDED" && !refunded_orders.count(id)) {
      add(out, "refund_missing", "order " + id + " REFUNDED without a refund row");
    }
  }
  if (phase != CheckPhase::kSettled) return;
  for (const auto& [payment, order] : r.agent.unapplied_payments) {
    if (!r.agent.refunds.count(payment)) {
      add(out, "refund_missing",
          evidence(
              {"payment ", payment, " for order ", order, " was not applied and not refunded"}));
    }
  }
}

}  // namespace

void check_order_rules(const FleetRecords& r, CheckPhase phase, std::vector<Violation>& out) {
  if (!r.agent.present) return;
  check_dispensed_orders(r, phase, out);
  check_completed_orders(r, out);
  check_paid_orders(r, phase, out);
  check_refunds(r, phase, out);
}

}  // namespace vend::sim::detail
