// Private to the invariant checker: the rows it reads, and the rules over
// them. Loading (fleet_records.cpp) and judging (invariant_rules.cpp) are
// separate so that the rules are plain functions over plain data.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "checker/invariant_checker.hpp"
#include "vend/sqlite.hpp"

namespace vend::sim::detail {

struct LedgerToken {
  int slot = 0;
  std::string state;  // AVAILABLE | CONSUMED | BURNED
  std::string order_id;
  bool replaced_away = false;  // only in a file a restore replaced
  // Spent by a dispense whose result was lost with a replaced file.
  bool lost_with_ledger = false;
};

struct LedgerDispense {
  std::string order_id;
  int slot = 0;
  std::string token;
  std::string state;  // ACCEPTED .. UNCERTAIN
  bool token_consumed = false;
  // Taken from a file a restore replaced, whose result never left it (still
  // in its outbox, or a rotation cut short): nothing could tell the agent.
  bool lost_with_ledger = false;
};

struct LedgerRecords {
  std::map<std::string, LedgerToken> tokens;  // token -> row
  std::vector<LedgerDispense> dispenses;      // by order id
  std::set<std::string> unreported_results;   // orders with a result in the outbox
  // Orders whose dispense_started is still in the outbox: unacknowledged,
  // so their motor never moved (it waits for that ack).
  std::set<std::string> unacked_starts;
};

struct AgentToken {
  std::string device;
  int slot = 0;
  std::string state;  // POOL | RESERVED | DISPATCHED | SOLD | BURNED
  std::string order_id;
};

struct AgentOrder {
  std::string id;
  std::string device;
  int slot = 0;
  std::string token;
  std::string state;
  std::string payment_id;
  std::string reason;
};

struct AgentRecords {
  bool present = false;
  std::map<std::string, AgentToken> tokens;               // token -> row
  std::map<std::string, AgentOrder> orders;               // id -> row
  std::map<std::string, std::string> applied_payments;    // payment id -> order id
  std::map<std::string, std::string> unapplied_payments;  // payment id -> order id
  std::map<std::string, std::string> refunds;             // payment id -> order id
};

struct FleetRecords {
  std::map<std::string, LedgerRecords> ledgers;  // device -> records (present files only)
  AgentRecords agent;
};

Status load_ledger(sql::Database& db, LedgerRecords& out);
// The orders whose dispense_result, and those whose dispense_started, is
// still in the ledger's outbox.
Status load_unreported_results(sql::Database& db, LedgerRecords& out);
Status load_agent(sql::Database& db, AgentRecords& out);

// What `replaced` (a ledger file a restore replaced) recorded, into
// `current` (the file that replaced it, or its successor): a dispense whose
// motor ran there and that the restore lost, or whose rotation ended there,
// is what happened and is taken with its token's state (lost_with_ledger
// when its result never left that file); a token the restore lost is added,
// flagged replaced_away.
void merge_replaced_ledger(const LedgerRecords& replaced, LedgerRecords& current);

// Every rule appends what it finds.
// A violation's evidence: its parts joined, allocated once (the rules build
// it in loops, where a + b + c would make a temporary string per +).
std::string evidence(std::initializer_list<std::string_view> parts);

void check_ledger_rules(const FleetRecords& records, std::vector<Violation>& out);
void check_token_conservation(const FleetRecords& records, CheckPhase phase,
                              std::vector<Violation>& out);
void check_order_rules(const FleetRecords& records, CheckPhase phase, std::vector<Violation>& out);
void check_rotations(const FleetRecords& records, const std::map<std::string, int64_t>& rotations,
                     std::vector<Violation>& out);

}  // namespace vend::sim::detail
