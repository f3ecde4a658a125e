// The agent's durable log in PostgreSQL (target vend_agent_postgres, libpq):
// a Repository over the PostgreSQL backend, selected with
// `vend-agent --db postgresql://...`. Same tables and meaning as SQLite's,
// same contract (repository/repository.hpp), and group commit too: one
// transaction per group, its writes pipelined (libpq pipeline mode), a
// SAVEPOINT per changeset. synchronous_commit is set on for the writer's
// session, so a ticket resolves ok only once its COMMIT is durable.
//
// A lost connection stops the writes: the group's undecided tickets and
// every later write fail "unavailable" (nothing is retried: an unanswered
// COMMIT may or may not have committed), and the core stops changing state
// until it is rebuilt from what committed: Repository::recover() connects
// the writer again (cluster mode does so in process, then rebuilds the
// core; a single agent is restarted). Reads reconnect once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "repository/repository.hpp"
#include "vend/log.hpp"

namespace vend::agent {

// True for "postgresql://..." and "postgres://..." (libpq's URI schemes).
bool is_postgres_url(std::string_view db);

// Connects (writer and reader), migrates the schema and prepares the write
// statements. Errors name the redacted URL and the cause: host unknown or
// unreachable, authentication failed, database missing ("unavailable"), a
// schema newer than this agent's ("schema_version"). RepositoryOptions'
// SQLite fields (synchronous, busy_timeout_ms, cache_kib) do not apply;
// manual_commit, queue_max, batch_max and faults_max do.
Result<std::unique_ptr<Repository>> open_postgres_repository(const std::string& url,
                                                             const RepositoryOptions& options,
                                                             Logger& log);

}  // namespace vend::agent
