// LeaseStore: the shared table of shard leases and live instances that
// several agents use to own shards (shard_map.hpp), kept by the database they
// share. LeaseKeeper (lease_keeper.hpp) decides what to ask for; a LeaseStore
// does it atomically in the store.
//
// Every time here is the STORE's clock (PostgreSQL's now()), never an
// instance's: instances with skewed clocks still agree on who holds what.
//
// A lease is (shard, owner, epoch, expires_at). The epoch rises by one each
// time a shard is granted after being free, expired or released: every write
// an owner makes carries (shard, epoch) and the store refuses it unless that
// epoch is the shard's current one and its lease has not expired (the fence,
// fence_ok()). A paused or partitioned instance can therefore never write
// after its lease ran out, whoever holds the shard now.
//
// Thread-safety: implementations say so.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vend/clock.hpp"
#include "vend/result.hpp"

namespace vend::agent {

struct Grant {
  int shard = 0;
  uint64_t epoch = 0;
  bool operator==(const Grant&) const = default;
};

struct LeaseRow {
  int shard = 0;
  std::string owner;  // "" = never granted or released
  uint64_t epoch = 0;
  bool live = false;  // held and not expired at the store's now
};

// What one heartbeat sees.
struct ClusterView {
  std::vector<std::string> members;  // live instances, sorted (the caller included)
  std::vector<LeaseRow> leases;      // one per shard, by shard
  // Live instance -> the HTTP base URL it advertised (advertise()); an
  // instance that gave none is absent.
  std::map<std::string, std::string> urls;
};

class LeaseStore {
 public:
  virtual ~LeaseStore() = default;

  // Binds one process (`session`, random per start) of `instance` to the
  // store: the store keeps one shard count for ever (set by the first
  // instance), and one live process per instance id. Fails "config" when
  // `shard_count` differs from the store's, and "conflict" while another
  // session of `instance` is a live member (a restarted instance retries
  // until its dead predecessor's membership expired; a second live process
  // with the same id never gets in).
  virtual Status join(const std::string& instance, const std::string& session, int shard_count) = 0;
  // Where other instances send HTTP requests about this instance's
  // machines (its base URL, e.g. http://10.0.0.5:8080), kept with its
  // membership. Call after join().
  virtual Status advertise(const std::string& instance, const std::string& url) = 0;
  // Records that `instance` is alive now (a member until member_ttl_ms from
  // now) and returns the live members and every lease. Fails "conflict" when
  // another session of `instance` joined since (this process was paused past
  // its membership and replaced: it must stop).
  virtual Result<ClusterView> heartbeat(const std::string& instance, const std::string& session,
                                        int64_t member_ttl_ms) = 0;
  // For each of `shards` that is free (never granted, released or expired):
  // grants it to `instance` with epoch + 1, until lease_ms from now. Returns
  // the grants won; a shard another instance holds live is left alone.
  virtual Result<std::vector<Grant>> acquire(const std::string& instance,
                                             const std::vector<int>& shards, int64_t lease_ms) = 0;
  // Extends, to lease_ms from now, each lease of `held` that `instance` still
  // holds live at that epoch; returns the shards extended.
  virtual Result<std::vector<int>> renew(const std::string& instance,
                                         const std::vector<Grant>& held, int64_t lease_ms) = 0;
  // Gives the shard up at once (its lease expires now), if `instance` still
  // holds it at that epoch.
  virtual Status release(const std::string& instance, const Grant& grant) = 0;
  // A graceful stop: the member row goes (its leases are released first).
  virtual Status leave(const std::string& instance) = 0;
};

// The store as a plain in-memory table on an injected clock: the model of
// the PostgreSQL store for unit tests and the deterministic simulation.
// Not thread-safe. `clock` (the store's clock) must outlive it.
class MemoryLeaseStore final : public LeaseStore {
 public:
  explicit MemoryLeaseStore(const Clock& clock) : clock_(clock) {}
  MemoryLeaseStore(const MemoryLeaseStore&) = delete;
  MemoryLeaseStore& operator=(const MemoryLeaseStore&) = delete;

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

  // The fence: would a write by `instance` at `epoch` on `shard` be accepted
  // now? Counts refusals.
  bool fence_ok(int shard, const std::string& instance, uint64_t epoch);
  uint64_t fence_refusals() const { return fence_refusals_; }

 private:
  struct Lease {
    std::string owner;
    uint64_t epoch = 0;
    int64_t expires_ms = 0;
  };
  struct Member {
    std::string session;
    int64_t expires_ms = 0;
    std::string url;
  };
  bool live(const Lease& lease, int64_t now) const {
    return !lease.owner.empty() && now < lease.expires_ms;
  }

  const Clock& clock_;
  int shard_count_ = 0;  // 0 = not set yet
  std::vector<Lease> leases_;
  std::map<std::string, Member> members_;
  uint64_t fence_refusals_ = 0;
};

}  // namespace vend::agent
