// The rules of the promise over plain records (see invariant_checker.hpp).
#include <set>

#include "checker/fleet_records.hpp"

namespace vend::sim::detail {

namespace {

constexpr int kMaxListed = 3;  // tokens named per slot in one violation

std::string slot_name(const std::string& device, int slot) {
  return device + "/" + std::to_string(slot);
}

void add(std::vector<Violation>& out, const char* invariant, std::string evidence) {
  out.push_back(Violation{invariant, std::move(evidence)});
}

// The token state a dispense in `state` must leave behind ("" = none).
std::string expected_token_state(const std::string& state) {
  if (state == "ACCEPTED" || state == "MOTOR_RUNNING" || state == "DISPENSED") return "CONSUMED";
  if (state == "FAILED" || state == "UNCERTAIN") return "BURNED";
  return "";
}

void check_dispense_token(const std::string& device, const LedgerRecords& ledger,
                          const LedgerDispense& d, std::vector<Violation>& out) {
  std::string want = expected_token_state(d.state);
  std::string what = device + " order " + d.order_id + " " + d.state + " token " + d.token;
  if (want.empty()) {
    if (d.token_consumed)
      add(out, "dispense_without_token", what + ": REJECTED but token_consumed=1");
    return;
  }
  auto it = ledger.tokens.find(d.token);
  if (!d.token_consumed) {
    add(out, "dispense_without_token", what + ": token_consumed=0");
  } else if (it == ledger.tokens.end()) {
    add(out, "dispense_without_token", what + ": token never minted on this machine");
  } else if (it->second.slot != d.slot || it->second.state != want) {
    add(out, "dispense_without_token",
        what + ": token is " + it->second.state + " in slot " + std::to_string(it->second.slot) +
            ", expected " + want + " in slot " + std::to_string(d.slot));
  }
}

void check_one_ledger(const std::string& device, const LedgerRecords& ledger,
                      std::map<std::string, std::string>& consuming_device,
                      std::vector<Violation>& out) {
  std::map<std::string, int> spends;     // token -> consuming dispenses
  std::map<int, int> dispensed, minted;  // slot -> count
  std::map<int, int> spent_tokens;       // slot -> CONSUMED + BURNED tokens
  for (const auto& d : ledger.dispenses) {
    check_dispense_token(device, ledger, d, out);
    if (d.state == "DISPENSED") ++dispensed[d.slot];
    if (!d.token_consumed) continue;
    ++spends[d.token];
    auto [it, fresh] = consuming_device.emplace(d.order_id, device);
    if (!fresh && it->second != device) {
      add(out, "order_dispensed_twice",
          "order " + d.order_id + " spent a token on " + it->second + " and on " + device);
    }
  }
  for (const auto& [token, n] : spends) {
    if (n > 1) {
      add(out, "token_spent_twice",
          evidence({device, " token ", token, " consumed by ", std::to_string(n), " dispenses"}));
    }
  }
  for (const auto& [token, t] : ledger.tokens) {
    ++minted[t.slot];
    if (t.state != "AVAILABLE") ++spent_tokens[t.slot];
    if (t.state != "AVAILABLE" && spends.count(token) == 0) {
      add(out, "token_conservation",
          evidence({device, " token ", token, " is ", t.state, " but no dispense spent it"}));
    }
  }
  for (const auto& [slot, n] : dispensed) {
    if (n > minted[slot]) {
      add(out, "dispensed_over_restocked",
          slot_name(device, slot) + ": dispensed " + std::to_string(n) + ", restocked " +
              std::to_string(minted[slot]));
    }
  }
}

// Whether the agent may hold a token in `agent_state` while the device has it
// in `device_state`.
bool compatible(const std::string& device_state, const std::string& agent_state) {
  if (agent_state == "DISPATCHED") return true;  // in flight: anything on the device
  if (device_state == "AVAILABLE") return agent_state != "SOLD";
  if (device_state == "CONSUMED") return agent_state == "SOLD";
  return agent_state == "BURNED";  // device BURNED
}

// Per-slot tally of minted = available + reserved + in flight + consumed + burned.
struct Tally {
  int minted = 0, available = 0, reserved = 0, in_flight = 0, consumed = 0, burned = 0;
  std::string str() const {
    return "minted " + std::to_string(minted) + " = available " + std::to_string(available) +
           " + reserved " + std::to_string(reserved) + " + in flight " + std::to_string(in_flight) +
           " + consumed " + std::to_string(consumed) + " + burned " + std::to_string(burned);
  }
};

void tally_token(Tally& t, const std::string& device_state, const std::string& agent_state) {
  if (agent_state == "POOL" && device_state == "AVAILABLE")
    ++t.available;
  else if (agent_state == "RESERVED")
    ++t.reserved;
  else if (agent_state == "DISPATCHED" || agent_state.empty())
    ++t.in_flight;
  else if (agent_state == "SOLD")
    ++t.consumed;
  else
    ++t.burned;
}

}  // namespace

std::string evidence(std::initializer_list<std::string_view> parts) {
  size_t size = 0;
  for (std::string_view p : parts) size += p.size();
  std::string out;
  out.reserve(size);
  for (std::string_view p : parts) out.append(p);
  return out;
}

void check_ledger_rules(const FleetRecords& records, std::vector<Violation>& out) {
  std::map<std::string, std::string> consuming_device;  // order -> device
  for (const auto& [device, ledger] : records.ledgers) {
    check_one_ledger(device, ledger, consuming_device, out);
  }
}

void check_token_conservation(const FleetRecords& records, CheckPhase phase,
                              std::vector<Violation>& out) {
  if (!records.agent.present) return;
  const auto& agent_tokens = records.agent.tokens;
  for (const auto& [token, a] : agent_tokens) {
    auto ledger = records.ledgers.find(a.device);
    if (ledger == records.ledgers.end()) continue;  // a machine we do not see
    auto t = ledger->second.tokens.find(token);
    if (t == ledger->second.tokens.end() || t->second.slot != a.slot) {
      add(out, "token_conservation",
          "agent holds token " + token + " of " + slot_name(a.device, a.slot) +
              " that this slot of the machine never minted");
    }
  }
  for (const auto& [device, ledger] : records.ledgers) {
    std::map<int, Tally> tallies;
    std::map<int, std::string> breaches;
    std::map<int, int> breach_count;  // evidence lists the first kMaxListed tokens
    for (const auto& [token, t] : ledger.tokens) {
      auto a = agent_tokens.find(token);
      std::string agent_state = a == agent_tokens.end() ? "" : a->second.state;
      Tally& tally = tallies[t.slot];
      ++tally.minted;
      tally_token(tally, t.state, agent_state);
      bool listed = breach_count[t.slot] < kMaxListed;
      // A token minted in a file a restore replaced, whose event went with
      // it, never reaches the agent: its item is the operator's to count.
      if (agent_state.empty() && phase == CheckPhase::kSettled && !t.replaced_away) {
        ++breach_count[t.slot];
        if (!listed) continue;
        breaches[t.slot] += " token " + token + " device " + t.state + " never reached the agent;";
      } else if (!agent_state.empty() && !t.lost_with_ledger && !compatible(t.state, agent_state)) {
        ++breach_count[t.slot];
        if (!listed) continue;
        const std::string& order = a->second.order_id;
        breaches[t.slot] +=
            evidence({" token ", token, " device ", t.state, " agent ", agent_state,
                      order.empty() ? "" : " (order ", order, order.empty() ? ";" : ");"});
      }
    }
    for (const auto& [slot, what] : breaches) {
      int more = breach_count[slot] - kMaxListed;
      add(out, "token_conservation",
          slot_name(device, slot) + ": " + tallies[slot].str() + "; " +
              std::to_string(breach_count[slot]) + " tokens out of step:" + what +
              (more > 0 ? " and " + std::to_string(more) + " more" : ""));
    }
  }
}

}  // namespace vend::sim::detail
