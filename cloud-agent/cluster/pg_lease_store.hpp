// PgLeaseStore: the LeaseStore (lease_store.hpp) in the PostgreSQL database
// the agents share, through libpq. Tables (created if missing):
//
//   vend_cluster        (id = 1, shard_count)    the shard count, for ever
//   vend_members        (instance, session, expires_at, url)
//   vend_shard_leases   (shard, owner, epoch, expires_at)
//
// Each call is one statement or one transaction; every time comparison is
// the server's now(), never this process's clock. The repository's write
// transactions check the fence against vend_shard_leases (FOR SHARE, so a
// takeover waits for a group already under way and then sees its writes).
//
// The connection is bounded (PgLeaseStoreOptions): a connect, a statement
// or a lock wait that takes longer than timeout_ms fails, and so does a
// connection whose server stops answering (TCP keepalives every second, TCP
// user timeout of timeout_ms), so a lease round never hangs past its
// leases. A lost connection is connected again at the next call (a
// PostgreSQL restart costs the rounds that fall in it, not the store).
//
// Not thread-safe: one connection, used by the thread running the lease
// rounds. Non-copyable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cluster/lease_store.hpp"

namespace vend::agent {

struct PgLeaseStoreOptions {
  // Bound of every statement and lock wait (statement_timeout,
  // lock_timeout), of the TCP user timeout, and (rounded up to seconds, at
  // least 2) of a connect. The agent passes half its lease.
  int64_t timeout_ms = 1500;
};

class PgLeaseStore final : public LeaseStore {
 public:
  // Connects to `url` (postgresql://…) and creates the tables. Fails
  // "unavailable" naming the server's message when it cannot connect.
  static Result<std::unique_ptr<PgLeaseStore>> open(const std::string& url,
                                                    PgLeaseStoreOptions options = {});
  ~PgLeaseStore() override;
  PgLeaseStore(const PgLeaseStore&) = delete;
  PgLeaseStore& operator=(const PgLeaseStore&) = delete;

  Status join(const std::string& instance, const std::string& session, int shard_count) override;
  Status advertise(const std::string& instance, const std::string& url) override;
  Result<ClusterView> heartbeat(const std::string& instance, const std::string& session,
                                int64_t member_ttl_ms) override;
  Result<std::vector<Grant>> acquire(const std::string& instance, const std::vector<int>& shards,
                                     int64_t lease_ms) override;
  Result<std::vector<int>> renew(const std::string& instance, const std::vector<Grant>& held,
                                 int64_t lease_ms) override;
  Status release(const std::string& instance, const Grant& grant) override;
  Status leave(const std::string& instance) override;

  // The fence as the repository checks it: is `epoch` the current, unexpired
  // lease of `shard` held by `instance`?
  Result<bool> fence_ok(int shard, const std::string& instance, uint64_t epoch);

 private:
  struct Conn;
  explicit PgLeaseStore(std::unique_ptr<Conn> conn);
  std::unique_ptr<Conn> conn_;
};

}  // namespace vend::agent
