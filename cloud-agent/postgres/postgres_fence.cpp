// The write fence on PostgreSQL: the locking check that goes with the COMMIT,
// and whether a database can fence at all (docs/design-decisions.md, "The
// fence, built").
#include "postgres/postgres_fence.hpp"

#include <cstdlib>
#include <memory>
#include <utility>

#include "postgres/postgres_backend.hpp"
#include "postgres/postgres_changes.hpp"

namespace vend::agent::pg {

namespace {

template <typename T>
std::string number_array(const std::vector<T>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out + "}";
}

// `text` as a quoted SQL literal ("" when libpq cannot allocate).
std::string literal(PGconn* conn, const std::string& text) {
  std::unique_ptr<char, void (*)(void*)> quoted(PQescapeLiteral(conn, text.c_str(), text.size()),
                                                PQfreemem);
  return quoted ? std::string(quoted.get()) : std::string("''");
}

// vend_fence()'s DETAIL: the 1-based positions of the refused entries.
std::vector<size_t> refused_entries(const PGresult* r, size_t entries) {
  std::vector<size_t> out;
  const char* detail = PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL);
  for (const char* p = detail; p && *p;) {
    char* end = nullptr;
    long n = std::strtol(p, &end, 10);
    if (end == p) break;
    if (n >= 1 && static_cast<size_t>(n) <= entries) out.push_back(static_cast<size_t>(n - 1));
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

}  // namespace

void FenceArrays::add(const FenceClaim& claim, size_t owner) {
  for (const auto& [shard, epoch] : claim.shards) {
    instances_.push_back(claim.instance);
    shards_.push_back(shard);
    epochs_.push_back(epoch);
    owners_.push_back(owner);
  }
}

std::string FenceArrays::instances() const { return text_array(instances_); }
std::string FenceArrays::shards() const { return number_array(shards_); }
std::string FenceArrays::epochs() const { return number_array(epochs_); }

Error FenceArrays::refusal(size_t i) const {
  return make_error("fenced", "write fenced at commit: shard " + std::to_string(shards_[i]) +
                                  " is no longer held by " + instances_[i] + " at epoch " +
                                  std::to_string(epochs_[i]) + " (its lease moved or expired)");
}

std::vector<size_t> claimed(const std::vector<const Changeset*>& group) {
  std::vector<size_t> out;
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i]->fence_claim()) out.push_back(i);
  }
  return out;
}

// The claims are checked in the same simple-query message as the COMMIT:
// the server has the whole message before it runs it, so the FOR SHARE
// locks last from the check to the end of the commit and never wait on
// this process (a paused one included).
PostgresBackend::Held PostgresBackend::hold_and_commit(const std::vector<const Changeset*>& group,
                                                       const std::vector<Status>& results) {
  FenceArrays claims;
  for (size_t j = 0; j < group.size(); ++j) {
    const FenceClaim* claim = group[j]->fence_claim();
    bool fenced_already = !results[j].ok() && results[j].error().code == "fenced";
    if (claim && !fenced_already) claims.add(*claim, j);
  }
  PGconn* conn = write_.get();
  std::string sql = "COMMIT";
  if (!claims.empty()) {
    sql = "SELECT vend_fence(" + literal(conn, claims.instances()) + "::text[], " +
          literal(conn, claims.shards()) + "::integer[], " + literal(conn, claims.epochs()) +
          "::bigint[], true); COMMIT";
  }
  Held held;
  PgResult r(PQexec(conn, sql.c_str()));
  // COMMIT of an aborted transaction answers "ROLLBACK": not committed.
  if (r.status() == PGRES_COMMAND_OK && std::string(PQcmdStatus(r.get())) == "COMMIT") return held;
  if (!write_.ok()) {
    write_lost_ = true;
    held.what = Held::kLost;
    held.error = make_error("unavailable", std::string("the connection to PostgreSQL is lost "
                                                       "(COMMIT with the fence): ") +
                                               PQerrorMessage(conn));
    return held;
  }
  const char* state = r.get() ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
  std::string sqlstate = state ? state : "";
  held.error = r.status() == PGRES_COMMAND_OK
                   ? make_error("pg_error", "COMMIT with the fence rolled back")
                   : result_error(conn, r.get(), "COMMIT with the fence");
  held.what = sqlstate == "40P01" ? Held::kDeadlock : Held::kFailed;
  if (sqlstate == "VD002") {
    for (size_t i : refused_entries(r.get(), claims.size())) {
      size_t owner = claims.owner(i);
      bool known = false;
      for (size_t k : held.refused) known = known || k == owner;
      if (known) continue;
      held.refused.push_back(owner);
      held.refusals.push_back(claims.refusal(i));
    }
    if (!held.refused.empty()) held.what = Held::kRefused;
  }
  (void)write_.exec("ROLLBACK");
  return held;
}

Status PostgresBackend::check_fence(const WriteFence& fence) {
  std::lock_guard lock(read_mu_);
  auto tables = read(
      "SELECT to_regclass('vend_shard_leases') IS NOT NULL AND "
      "to_regclass('vend_cluster') IS NOT NULL",
      {});
  if (!tables.ok()) return tables.error();
  if (tables->text(0, 0) != "t") {
    return make_error("config",
                      "cannot fence writes: this database has no cluster tables (vend_cluster, "
                      "vend_shard_leases); the lease store (PgLeaseStore) creates them");
  }
  auto count = read("SELECT shard_count FROM vend_cluster WHERE id = 1", {});
  if (!count.ok()) return count.error();
  if (count->rows() == 0) {
    return make_error("config", "cannot fence writes: the database has no shard count yet");
  }
  if (count->int32(0, 0) != fence.shard_count) {
    return make_error("config", "the fence's shard count " + std::to_string(fence.shard_count) +
                                    " differs from the database's " + count->text(0, 0));
  }
  return {};
}

}  // namespace vend::agent::pg
