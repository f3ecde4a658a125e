// Private to vend_agent_postgres: the PostgreSQL schema, its migrations and
// the named statements every write connection prepares.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "postgres/pg_connection.hpp"

namespace vend::agent::pg {

// Brings the database to this agent's schema version (table
// vend_schema_version), each step in one transaction under an advisory
// lock, so two agents starting together migrate once. Refuses a database
// whose schema is newer than this agent's ("schema_version").
Status migrate(PgConnection& conn);

// The write statements, by name (see postgres_changes.cpp). Prepared once
// per write connection by prepare_statements().
struct NamedStatement {
  const char* name;
  const char* sql;
};
std::span<const NamedStatement> write_statements();
Status prepare_statements(PgConnection& conn);

// The columns of an order, as read_order() expects them from column 0.
inline constexpr const char* kOrderColumns =
    "id, device, slot, token, price_cents, state, created_ms, updated_ms, reserve_deadline_ms, "
    "dispatch_expires_at_ms, payment_id, reason, idempotency_key, client";

}  // namespace vend::agent::pg
