// Private to the repository: the schema and the mapping of rows to structs.
#pragma once

#include <string>
#include <vector>

#include "core/agent_core.hpp"
#include "vend/sqlite.hpp"

namespace vend::agent::detail {

// Migration 1 creates every table; later versions append.
const std::vector<sql::Migration>& migrations();

// The columns of an order, in the order read_order() expects them.
inline constexpr const char* kOrderColumns =
    "id, device, slot, token, price_cents, state, created_ms, updated_ms, reserve_deadline_ms, "
    "dispatch_expires_at_ms, payment_id, reason, idempotency_key, client";

// Reads an order from the current row of a statement that selected
// kOrderColumns starting at column 0.
Order read_order(const sql::Statement& stmt);

// "" is stored as NULL (for UNIQUE columns that are often unset).
void bind_optional(sql::Statement& stmt, int index, const std::string& value);

}  // namespace vend::agent::detail
