#include "cluster/pg_lease_store.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace vend::agent {

namespace {

// One transaction under an advisory lock: agents starting together would
// otherwise race in CREATE TABLE IF NOT EXISTS (a unique violation in the
// catalog).
constexpr const char* kSchema = R"sql(
BEGIN;
SELECT pg_advisory_xact_lock(7432001);
CREATE TABLE IF NOT EXISTS vend_cluster (
  id integer PRIMARY KEY CHECK (id = 1),
  shard_count integer NOT NULL CHECK (shard_count > 0));
CREATE TABLE IF NOT EXISTS vend_members (
  instance text PRIMARY KEY,
  session text NOT NULL,
  expires_at timestamptz NOT NULL);
CREATE TABLE IF NOT EXISTS vend_shard_leases (
  shard integer PRIMARY KEY,
  owner text NOT NULL DEFAULT '',
  epoch bigint NOT NULL DEFAULT 0,
  expires_at timestamptz NOT NULL DEFAULT '-infinity');
ALTER TABLE vend_members ADD COLUMN IF NOT EXISTS url text NOT NULL DEFAULT '';
COMMIT;
)sql";

// One result, cleared on scope exit.
class PgResult {
 public:
  explicit PgResult(PGresult* r) : r_(r) {}
  ~PgResult() { PQclear(r_); }
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;
  PGresult* get() const { return r_; }
  int rows() const { return PQntuples(r_); }
  std::string text(int row, int col) const { return PQgetvalue(r_, row, col); }
  int64_t number(int row, int col) const {
    return std::strtoll(PQgetvalue(r_, row, col), nullptr, 10);
  }

 private:
  PGresult* r_;
};

std::string int_array(const std::vector<int>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out + "}";
}

}  // namespace

struct PgLeaseStore::Conn {
  std::string url;
  PgLeaseStoreOptions options;
  PGconn* pg = nullptr;
  ~Conn() { PQfinish(pg); }

  // Connects (again): a bounded connect, keepalives and a TCP user timeout
  // (a silent server fails the connection instead of freezing the lease
  // thread), and every statement bounded by statement_timeout and
  // lock_timeout. The URL comes last: its own settings win.
  Status connect() {
    PQfinish(pg);
    std::string timeout = std::to_string(options.timeout_ms);
    std::string session = "-c statement_timeout=" + timeout + " -c lock_timeout=" + timeout;
    std::string connect_s = std::to_string(std::max<int64_t>(2, (options.timeout_ms + 999) / 1000));
    const char* keys[] = {"connect_timeout",  "application_name",
                          "keepalives_idle",  "keepalives_interval",
                          "keepalives_count", "tcp_user_timeout",
                          "options",          "gssencmode",
                          "dbname",           nullptr};
    const char* values[] = {
        connect_s.c_str(), "vend-agent leases", "1",       "1",         "2",
        timeout.c_str(),   session.c_str(),     "disable", url.c_str(), nullptr};
    pg = PQconnectdbParams(keys, values, 1);
    if (PQstatus(pg) != CONNECTION_OK) {
      std::string message = PQerrorMessage(pg);
      while (!message.empty() && message.back() == '\n') message.pop_back();
      return make_error("unavailable", "lease store: cannot connect: " + message);
    }
    PQsetNoticeProcessor(
        pg, [](void*, const char*) {}, nullptr);  // "already exists"
    return {};
  }

  // Runs `sql` with text parameters; an error names the statement's purpose.
  // A lost connection is connected again first (each call is one statement
  // or one transaction: nothing is left half done on the old one).
  Result<std::unique_ptr<PgResult>> run(const char* what, const std::string& sql,
                                        const std::vector<std::string>& params = {}) {
    if (PQstatus(pg) != CONNECTION_OK) {
      if (Status s = connect(); !s.ok()) return s.error();
    }
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p.c_str());
    auto result =
        std::make_unique<PgResult>(PQexecParams(pg, sql.c_str(), static_cast<int>(values.size()),
                                                nullptr, values.data(), nullptr, nullptr, 0));
    ExecStatusType status = PQresultStatus(result->get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      std::string message = PQresultErrorMessage(result->get());
      if (message.empty()) message = PQerrorMessage(pg);
      while (!message.empty() && message.back() == '\n') message.pop_back();
      return make_error(PQstatus(pg) == CONNECTION_OK ? "storage" : "unavailable",
                        std::string("lease store, ") + what + ": " + message);
    }
    return result;
  }
};

PgLeaseStore::PgLeaseStore(std::unique_ptr<Conn> conn) : conn_(std::move(conn)) {}
PgLeaseStore::~PgLeaseStore() = default;

Result<std::unique_ptr<PgLeaseStore>> PgLeaseStore::open(const std::string& url,
                                                         PgLeaseStoreOptions options) {
  auto conn = std::make_unique<Conn>();
  conn->url = url;
  conn->options = options;
  if (Status s = conn->connect(); !s.ok()) return s.error();
  // PQexec (not PQexecParams): several statements in one string.
  PgResult created(PQexec(conn->pg, kSchema));
  if (PQresultStatus(created.get()) != PGRES_COMMAND_OK) {
    return make_error("storage",
                      std::string("lease store: schema: ") + PQresultErrorMessage(created.get()));
  }
  return std::unique_ptr<PgLeaseStore>(new PgLeaseStore(std::move(conn)));
}

Status PgLeaseStore::join(const std::string& instance, const std::string& session,
                          int shard_count) {
  if (shard_count <= 0) return make_error("config", "shard count must be positive");
  std::string n = std::to_string(shard_count);
  auto set =
      conn_->run("shard count",
                 "INSERT INTO vend_cluster VALUES (1, $1::int) ON CONFLICT (id) DO NOTHING", {n});
  if (!set) return set.error();
  auto stored = conn_->run("shard count", "SELECT shard_count FROM vend_cluster WHERE id = 1");
  if (!stored) return stored.error();
  int64_t theirs = (*stored)->number(0, 0);
  if (theirs != shard_count) {
    return make_error("config",
                      "shard count " + n + " differs from the store's " + std::to_string(theirs));
  }
  auto rows =
      conn_->run("shard rows",
                 "INSERT INTO vend_shard_leases (shard) SELECT generate_series(0, $1::int - 1) "
                 "ON CONFLICT (shard) DO NOTHING",
                 {n});
  if (!rows) return rows.error();
  // Taken only when free: no row, the same session, or an expired member.
  auto member = conn_->run(
      "join",
      "INSERT INTO vend_members AS m VALUES ($1, $2, now()) ON CONFLICT (instance) DO UPDATE "
      "SET session = EXCLUDED.session, expires_at = now() "
      "WHERE m.session = EXCLUDED.session OR m.expires_at <= now() RETURNING instance",
      {instance, session});
  if (!member) return member.error();
  if ((*member)->rows() == 0) {
    return make_error("conflict", "instance id " + instance + " is in use by a live process");
  }
  return {};
}

Status PgLeaseStore::advertise(const std::string& instance, const std::string& url) {
  auto set = conn_->run("advertise", "UPDATE vend_members SET url = $2 WHERE instance = $1",
                        {instance, url});
  if (!set) return set.error();
  return {};
}

Result<ClusterView> PgLeaseStore::heartbeat(const std::string& instance, const std::string& session,
                                            int64_t member_ttl_ms) {
  auto beat =
      conn_->run("heartbeat",
                 "UPDATE vend_members SET expires_at = now() + $3::bigint * interval '1 ms' "
                 "WHERE instance = $1 AND session = $2",
                 {instance, session, std::to_string(member_ttl_ms)});
  if (!beat) return beat.error();
  if (std::string(PQcmdTuples((*beat)->get())) != "1") {
    return make_error("conflict", "instance id " + instance + " was taken by another process");
  }
  ClusterView view;
  auto members = conn_->run(
      "members",
      "SELECT instance, url FROM vend_members WHERE expires_at > now() ORDER BY instance");
  if (!members) return members.error();
  for (int r = 0; r < (*members)->rows(); ++r) {
    view.members.push_back((*members)->text(r, 0));
    if (std::string url = (*members)->text(r, 1); !url.empty())
      view.urls[view.members.back()] = url;
  }
  auto leases = conn_->run("leases",
                           "SELECT shard, owner, epoch, owner <> '' AND expires_at > now() "
                           "FROM vend_shard_leases ORDER BY shard");
  if (!leases) return leases.error();
  for (int r = 0; r < (*leases)->rows(); ++r) {
    view.leases.push_back(LeaseRow{static_cast<int>((*leases)->number(r, 0)), (*leases)->text(r, 1),
                                   static_cast<uint64_t>((*leases)->number(r, 2)),
                                   (*leases)->text(r, 3) == "t"});
  }
  return view;
}

Result<std::vector<Grant>> PgLeaseStore::acquire(const std::string& instance,
                                                 const std::vector<int>& shards, int64_t lease_ms) {
  std::vector<Grant> won;
  if (shards.empty()) return won;
  auto granted = conn_->run("acquire",
                            "UPDATE vend_shard_leases SET owner = $1, epoch = epoch + 1, "
                            "expires_at = now() + $3::bigint * interval '1 ms' "
                            "WHERE shard IN (SELECT shard FROM vend_shard_leases "
                            "WHERE shard = ANY($2::int[]) ORDER BY shard FOR UPDATE) "
                            "AND (owner = '' OR expires_at <= now()) "
                            "RETURNING shard, epoch",
                            {instance, int_array(shards), std::to_string(lease_ms)});
  if (!granted) return granted.error();
  for (int r = 0; r < (*granted)->rows(); ++r) {
    won.push_back(Grant{static_cast<int>((*granted)->number(r, 0)),
                        static_cast<uint64_t>((*granted)->number(r, 1))});
  }
  return won;
}

Result<std::vector<int>> PgLeaseStore::renew(const std::string& instance,
                                             const std::vector<Grant>& held, int64_t lease_ms) {
  std::vector<int> renewed;
  if (held.empty()) return renewed;
  std::vector<int> shards;
  std::string epochs = "{";
  for (size_t i = 0; i < held.size(); ++i) {
    shards.push_back(held[i].shard);
    epochs += (i ? "," : "") + std::to_string(held[i].epoch);
  }
  epochs += "}";
  auto extended = conn_->run(
      "renew",
      "UPDATE vend_shard_leases AS l SET expires_at = now() + $4::bigint * interval '1 ms' "
      "FROM unnest($2::int[], $3::bigint[]) AS h(shard, epoch) "
      "WHERE l.shard = h.shard AND l.owner = $1 AND l.epoch = h.epoch AND l.expires_at > now() "
      "AND l.shard IN (SELECT shard FROM vend_shard_leases WHERE shard = ANY($2::int[]) "
      "ORDER BY shard FOR UPDATE) "
      "RETURNING l.shard",
      {instance, int_array(shards), epochs, std::to_string(lease_ms)});
  if (!extended) return extended.error();
  for (int r = 0; r < (*extended)->rows(); ++r) {
    renewed.push_back(static_cast<int>((*extended)->number(r, 0)));
  }
  return renewed;
}

Status PgLeaseStore::release(const std::string& instance, const Grant& grant) {
  auto done = conn_->run("release",
                         "UPDATE vend_shard_leases SET expires_at = now() "
                         "WHERE shard = $2::int AND owner = $1 AND epoch = $3::bigint "
                         "AND expires_at > now()",
                         {instance, std::to_string(grant.shard), std::to_string(grant.epoch)});
  if (!done) return done.error();
  return {};
}

Status PgLeaseStore::leave(const std::string& instance) {
  auto released = conn_->run("leave",
                             "UPDATE vend_shard_leases SET expires_at = now() "
                             "WHERE shard IN (SELECT shard FROM vend_shard_leases WHERE owner = $1 "
                             "ORDER BY shard FOR UPDATE) AND owner = $1 AND expires_at > now()",
                             {instance});
  if (!released) return released.error();
  auto gone = conn_->run("leave", "DELETE FROM vend_members WHERE instance = $1", {instance});
  if (!gone) return gone.error();
  return {};
}

Result<bool> PgLeaseStore::fence_ok(int shard, const std::string& instance, uint64_t epoch) {
  auto row = conn_->run("fence",
                        "SELECT 1 FROM vend_shard_leases WHERE shard = $1::int AND owner = $2 "
                        "AND epoch = $3::bigint AND expires_at > now()",
                        {std::to_string(shard), instance, std::to_string(epoch)});
  if (!row) return row.error();
  return (*row)->rows() == 1;
}

}  // namespace vend::agent
