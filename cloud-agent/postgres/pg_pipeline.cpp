// One pipelined round trip: send everything, one Sync, read in order.
#include "postgres/pg_pipeline.hpp"

#include <poll.h>

namespace vend::agent::pg {

Pipeline::Pipeline(PGconn* conn) : conn_(conn) {
  // Non-blocking sends: libpq buffers what the socket cannot take yet, and
  // flush() reads the server's results meanwhile, so a large group cannot
  // deadlock with both sides' socket buffers full.
  entered_ = PQenterPipelineMode(conn_) == 1 && PQsetnonblocking(conn_, 1) == 0;
}

Pipeline::~Pipeline() {
  if (!entered_) return;
  (void)PQexitPipelineMode(conn_);
  (void)PQsetnonblocking(conn_, 0);
}

void Pipeline::send_sql(const char* sql) {
  ++queued_;
  if (!entered_ || send_failed_) return;
  if (PQsendQueryParams(conn_, sql, 0, nullptr, nullptr, nullptr, nullptr, 0) != 1) {
    send_failed_ = true;
  }
}

void Pipeline::send_prepared(const char* name, const Params& params) {
  ++queued_;
  if (!entered_ || send_failed_) return;
  auto values = param_values(params);
  if (PQsendQueryPrepared(conn_, name, static_cast<int>(params.size()), values.data(), nullptr,
                          nullptr, 0) != 1) {
    send_failed_ = true;
  }
}

bool Pipeline::flush() {
  while (true) {
    int r = PQflush(conn_);
    if (r == 0) return true;
    if (r < 0) return false;
    pollfd p{PQsocket(conn_), POLLIN | POLLOUT, 0};
    if (poll(&p, 1, 10'000) <= 0) return false;  // 10 s without progress: treat as lost
    if ((p.revents & POLLIN) && PQconsumeInput(conn_) != 1) return false;
  }
}

PipelineOutcome Pipeline::run() {
  PipelineOutcome out;
  size_t n = queued_;
  queued_ = 0;
  auto lose = [&](const std::string& why) {
    out.lost = true;
    out.error = make_error("unavailable", "the connection to PostgreSQL is lost (" + why +
                                              "): " + PQerrorMessage(conn_));
    return out;
  };
  if (!entered_) return lose("cannot enter pipeline mode");
  if (send_failed_ || PQpipelineSync(conn_) != 1 || !flush()) return lose("sending");
  for (size_t i = 0; i < n; ++i) {
    PgResult r(PQgetResult(conn_));
    if (!r.get()) return lose("no result");
    ExecStatusType st = r.status();
    if (st == PGRES_FATAL_ERROR && !out.failed) {
      if (PQstatus(conn_) != CONNECTION_OK) return lose("during the group");
      out.failed = i;
      out.error = result_error(conn_, r.get(), "");
    } else if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_PIPELINE_ABORTED &&
               st != PGRES_FATAL_ERROR) {
      return lose("unexpected result " + std::string(PQresStatus(st)));
    }
    if (PGresult* end = PQgetResult(conn_)) {  // each command's results end with NULL
      PQclear(end);
      return lose("extra result");
    }
  }
  PgResult sync(PQgetResult(conn_));
  if (!sync.get() || sync.status() != PGRES_PIPELINE_SYNC) return lose("no sync");
  return out;
}

}  // namespace vend::agent::pg
