// Private to the invariant checker: the rows it reads, and the rules over
// them. Loading (fleet_records.cpp) and judging (invariant_rules.cpp) are
// separate so that the rules are plain functions over plain data.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checker/invariant_checker.hpp"
#include "vend/sqlite.hpp"

namespace vend::sim::detail {

struct LedgerToken {
  int slot = 0;
  std::string state;  // AVAILABLE | CONSUMED | BURNED
  std::string order_id;
};

struct LedgerDispense {
  std::string order_id;
  int slot = 0;
  std::string token;
  std::string state;  // ACCEPTED .. UNCERTAIN
  bool token_consumed = false;
};

struct LedgerRecords {
  std::map<std::string, LedgerToken> tokens;  // token -> row
  std::vector<LedgerDispense> dispenses;      // by order id
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
Status load_agent(sql::Database& db, AgentRecords& out);

// Every rule appends what it finds.
void check_ledger_rules(const FleetRecords& records, std::vector<Violation>& out);
void check_token_conservation(const FleetRecords& records, CheckPhase phase,
                              std::vector<Violation>& out);
void check_order_rules(const FleetRecords& records, CheckPhase phase, std::vector<Violation>& out);

}  // namespace vend::sim::detail
