// Private to vend_agent_postgres: each change record (repository_types.hpp)
// as the prepared statements (postgres_schema.cpp) that apply it.
#pragma once

#include <vector>

#include "postgres/pg_connection.hpp"
#include "repository/repository.hpp"

namespace vend::agent::pg {

struct Command {
  const char* statement;  // a write_statements() name
  Params params;
};

// Appends the commands of `change` to `out`. A change::Raw has none (the
// caller runs its function). `faults_max` bounds the faults table.
void commands_of(const Change& change, int64_t faults_max, std::vector<Command>& out);

// A text[] literal of `items` ({"a","b"}, quotes and backslashes escaped).
std::string text_array(const std::vector<std::string>& items);

}  // namespace vend::agent::pg
