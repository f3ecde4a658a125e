// Private to vend_agent_postgres: one round trip of libpq pipeline mode.
// Commands are sent without waiting for their results, then one Sync; the
// results are read back in order. After the first failing command the
// server skips the rest up to the Sync (PGRES_PIPELINE_ABORTED).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "postgres/pg_connection.hpp"

namespace vend::agent::pg {

struct PipelineOutcome {
  bool lost = false;             // the connection broke: outcomes unknown
  std::optional<size_t> failed;  // index of the first command that failed
  Error error{"", ""};           // its error (or the connection's)
};

// Sends commands through one PGconn in pipeline mode. Non-copyable.
// REQUIRES: the connection is idle (no command in flight) when constructed.
class Pipeline {
 public:
  explicit Pipeline(PGconn* conn);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Queues a simple statement without parameters (BEGIN, SAVEPOINT, ...).
  void send_sql(const char* sql);
  // Queues a prepared statement with text parameters.
  void send_prepared(const char* name, const Params& params);
  size_t queued() const { return queued_; }
  // Sync, flush, and read every queued command's result. Resets the queue.
  PipelineOutcome run();

 private:
  bool flush();
  PGconn* conn_;
  bool entered_ = false;
  bool send_failed_ = false;
  size_t queued_ = 0;
};

}  // namespace vend::agent::pg
