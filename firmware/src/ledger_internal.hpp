// Helpers shared by the ledger's read and write halves. Internal.
#pragma once

#include <functional>
#include <string>

#include "vend/fw/ledger.hpp"

namespace vend::fw::detail {

inline constexpr const char* kTokenStates[] = {"AVAILABLE", "CONSUMED", "BURNED"};
inline constexpr const char* kDispenseStates[] = {"ACCEPTED", "MOTOR_RUNNING", "DISPENSED",
                                                  "FAILED",   "REJECTED",      "UNCERTAIN"};

inline DispenseState parse_dispense_state(const std::string& s) {
  for (int i = 0; i < 6; ++i) {
    if (s == kDispenseStates[i]) return static_cast<DispenseState>(i);
  }
  return DispenseState::kUncertain;  // unreachable: the schema CHECK forbids others
}

inline TokenState parse_token_state(const std::string& s) {
  for (int i = 0; i < 3; ++i) {
    if (s == kTokenStates[i]) return static_cast<TokenState>(i);
  }
  return TokenState::kBurned;
}

inline proto::DispenseStatus to_status(DispenseState state) {
  switch (state) {
    case DispenseState::kDispensed: return proto::DispenseStatus::kDispensed;
    case DispenseState::kFailed: return proto::DispenseStatus::kFailed;
    case DispenseState::kUncertain: return proto::DispenseStatus::kUncertain;
    default: return proto::DispenseStatus::kRejected;
  }
}

// Runs `body` inside BEGIN IMMEDIATE ... COMMIT; rolls back on any error.
template <typename T, typename F>
Result<T> in_transaction(sql::Database& db, F&& body) {
  auto tx = sql::Transaction::begin(db);
  if (!tx.ok()) return tx.error();
  Result<T> result = body();
  if (!result.ok()) return result;
  if (auto s = tx->commit(); !s.ok()) return s.error();
  return result;
}

inline Result<int> run(sql::Database& db, std::string_view sql_text,
                       const std::function<void(sql::Statement&)>& bind) {
  auto st = db.prepare(sql_text);
  if (!st.ok()) return st.error();
  bind(*st);
  return st->run();
}

inline DispenseRow read_dispense(const sql::Statement& st) {
  DispenseRow row;
  row.order_id = st.column_text(0);
  row.slot = st.column_int(1);
  row.token = st.column_text(2);
  row.state = parse_dispense_state(st.column_text(3));
  row.reason = st.column_text(4);
  row.expires_at_ms = st.column_int64(5);
  row.token_consumed = st.column_int(6) != 0;
  return row;
}

// The ledger's id as stored ("" before the first signing opener names it).
// Read in each event's transaction, so that a process that opened the ledger
// before the daemon started a new one signs its events with the new id.
inline Result<std::string> stored_ledger_id(sql::Database& db) {
  auto st = db.prepare("SELECT ledger_id FROM ledger_identity WHERE one = 1");
  if (!st.ok()) return st.error();
  auto row = st->step();
  if (!row.ok()) return row.error();
  if (!*row) return std::string();
  return st->column_text(0);
}

inline constexpr const char* kDispenseColumns =
    "order_id, slot, token, state, reason, expires_at_ms, token_consumed";

}  // namespace vend::fw::detail
