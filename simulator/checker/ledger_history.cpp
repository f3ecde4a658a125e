// Ledgers that went back in time: what a replaced file recorded stays the
// physical truth, and the motor's own count of rotations is checked against
// the dispenses that reached it (see invariant_checker.hpp).
#include <map>
#include <set>

#include "checker/fleet_records.hpp"

namespace vend::sim::detail {

namespace {

// The motor ran (or was about to) for a dispense in this state.
bool reached_motor(const std::string& state) {
  return state == "MOTOR_RUNNING" || state == "DISPENSED" || state == "FAILED" ||
         state == "UNCERTAIN";
}

// A rotation that ended, one way or the other: what happened to the item.
bool rotation_ended(const std::string& state) {
  return state == "DISPENSED" || state == "FAILED" || state == "UNCERTAIN";
}

}  // namespace

void merge_replaced_ledger(const LedgerRecords& replaced, LedgerRecords& current) {
  std::map<std::string, size_t> index;  // order id -> position in current.dispenses
  std::set<std::string> taken_tokens;
  for (size_t i = 0; i < current.dispenses.size(); ++i) {
    index[current.dispenses[i].order_id] = i;
  }
  // A dispense whose motor ran there, that the copy lost or whose rotation
  // ended there, is what happened (the copy's MOTOR_RUNNING recovers as
  // UNCERTAIN without a rotation); its token goes with it.
  for (const auto& d : replaced.dispenses) {
    if (!reached_motor(d.state)) continue;  // nothing left the machine
    // Armed, its start never acknowledged: the motor waited, nothing moved.
    if (d.state == "MOTOR_RUNNING" && replaced.unacked_starts.count(d.order_id) != 0) continue;
    auto it = index.find(d.order_id);
    bool take = it == index.end();
    if (!take) {
      const std::string& now = current.dispenses[it->second].state;
      take = !reached_motor(now) || (rotation_ended(d.state) && d.state != now);
    }
    if (!take) continue;
    LedgerDispense taken = d;
    // Its result never left that file: still in the outbox, or not written
    // (a rotation the replacing power cut interrupted).
    taken.lost_with_ledger =
        d.state == "MOTOR_RUNNING" || replaced.unreported_results.count(d.order_id) != 0;
    if (it == index.end()) {
      current.dispenses.push_back(taken);
    } else {
      current.dispenses[it->second] = taken;
    }
    taken_tokens.insert(d.token);
    auto token = replaced.tokens.find(d.token);
    if (token != replaced.tokens.end()) {
      LedgerToken& t = current.tokens[d.token];
      t.slot = token->second.slot;
      t.state = token->second.state;
      t.order_id = token->second.order_id;
      t.lost_with_ledger = taken.lost_with_ledger;
    }
  }
  for (const auto& [token, t] : replaced.tokens) {
    if (current.tokens.count(token)) continue;
    LedgerToken lost = t;
    lost.replaced_away = true;
    if (!taken_tokens.count(token)) {  // spent by no rotation: its item stayed
      lost.state = "AVAILABLE";
      lost.order_id.clear();
    }
    current.tokens.emplace(token, lost);
  }
}

void check_rotations(const FleetRecords& records, const std::map<std::string, int64_t>& rotations,
                     std::vector<Violation>& out) {
  for (const auto& [device, ran] : rotations) {
    auto ledger = records.ledgers.find(device);
    if (ledger == records.ledgers.end()) continue;
    int64_t orders = 0;
    for (const auto& d : ledger->second.dispenses) orders += reached_motor(d.state) ? 1 : 0;
    if (ran > orders) {
      out.push_back(
          {"motor_ran_unaccounted", device + "'s motor ran " + std::to_string(ran) +
                                        " times, for " + std::to_string(orders) +
                                        " orders whose dispense reached the motor in its ledger"});
    }
  }
}

}  // namespace vend::sim::detail
