// Private to vend_agent_postgres: the PostgreSQL RepositoryBackend. One
// write connection (the writer thread's; statements prepared once) and one
// read connection behind a mutex. Non-copyable.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "postgres/pg_connection.hpp"
#include "repository/repository.hpp"
#include "vend/log.hpp"

namespace vend::agent::pg {

// The writer's connection to `url`: connected, its session configured
// (synchronous_commit, the RepositoryOptions' pg_* timeouts) and the write
// statements prepared; the schema migrated first when `migrate_schema`.
Result<PgConnection> open_writer(const std::string& url, const RepositoryOptions& options,
                                 Logger& log, bool migrate_schema);

class PostgresBackend final : public RepositoryBackend {
 public:
  // `url`: where reconnect() connects the writer again.
  PostgresBackend(std::string url, PgConnection write, PgConnection read,
                  const RepositoryOptions& options, Logger& log);

  // One transaction per group, its writes pipelined (pg_pipeline.hpp), a
  // SAVEPOINT per changeset; see postgres_group.cpp.
  std::vector<Status> apply_group(const std::vector<const Changeset*>& group) override;
  // Fenced changesets: a check before their changes and a locking one with
  // the COMMIT (postgres_fence.cpp).
  bool supports_fence() const override { return true; }
  Status check_fence(const WriteFence& fence) override;
  // A new write connection (configured, statements prepared) once the old
  // one was lost; ok at once when it was not.
  Status reconnect() override;

  Result<LoadedState> load(size_t recent_orders_max, const LoadFilter& only) override;
  Result<std::optional<Order>> find_order(const std::string& order_id) override;
  Result<std::optional<Order>> find_order_by_idempotency_key(const std::string& key) override;
  Result<std::optional<StoredPayment>> find_payment(const std::string& payment_id) override;
  Result<std::optional<StoredRestock>> find_restock(const std::string& device,
                                                    const std::string& restock_id) override;
  Result<std::vector<std::string>> known_tokens(const std::vector<std::string>& tokens) override;
  Result<std::map<TokenState, int64_t>> token_counts(const std::string& device, int slot) override;
  Result<std::optional<TokenState>> token_state(const std::string& token) override;
  Result<std::vector<OrderEvent>> order_events(const std::string& order_id) override;
  Result<std::vector<StoredPayment>> payments_of(const std::string& order_id) override;
  Result<std::vector<StoredRefund>> refunds_of(const std::string& order_id) override;
  Result<std::vector<StoredRefund>> refunds(std::optional<RefundState> state,
                                            size_t limit) override;
  Result<std::optional<StoredSnapshot>> snapshot(const std::string& device) override;
  Result<std::optional<std::string>> reconcile_report(const std::string& device) override;
  Result<std::vector<StoredFault>> faults(const std::string& device, size_t limit) override;
  // Operators' accounts, tokens and audit (postgres_account_reads.cpp).
  Result<std::optional<StoredAccount>> find_account(const std::string& name) override;
  Result<std::vector<StoredAccount>> accounts() override;
  Result<std::optional<StoredApiToken>> find_api_token(const std::string& sha256_hex) override;
  Result<std::vector<StoredApiToken>> api_tokens(const std::string& account) override;
  Result<std::vector<AuditEntry>> audit(const AuditQuery& query) override;

 private:
  // One pipelined try of `group` in one transaction; `results` gets each
  // changeset's outcome. kHold: every changeset is applied (or rolled back
  // to its savepoint), the transaction is open, and its fence must be held
  // with the COMMIT. `savepoints` false: no savepoint per changeset, and
  // kAborted when one failed (the transaction is aborted; roll it back and
  // try again with savepoints).
  enum class Together { kDone, kRetryAlone, kHold, kAborted };
  Together apply_together(const std::vector<const Changeset*>& group, std::vector<Status>& results,
                          bool savepoints);
  Status apply_alone(const Changeset& changes);
  // The outcome of hold_and_commit(). kRefused: positions in the group of
  // the changesets whose claims failed (their errors in `refusals`).
  struct Held {
    enum What { kCommitted, kRefused, kDeadlock, kFailed, kLost } what = kCommitted;
    std::vector<size_t> refused;
    std::vector<Status> refusals;
    Status error;
  };
  // One message: lock and check the claims of `group` (except changesets
  // already fenced), then COMMIT. Rolls back unless committed.
  Held hold_and_commit(const std::vector<const Changeset*>& group,
                       const std::vector<Status>& results);
  // After hold_and_commit() rolled back: the refused changesets' errors into
  // `sub`; past two deadlocks, every claiming changeset of `subset` is
  // refused as fenced (its owner answers by rebuilding).
  void note_rollback(Held& held, const std::vector<const Changeset*>& subset,
                     std::vector<Status>& sub, int& deadlocks);
  Status lost_status() const;
  Result<PgResult> read(const std::string& sql, const Params& params);

  const std::string url_;
  RepositoryOptions options_;
  Logger& log_;
  PgConnection write_;       // writer thread only (or reconnect(), between groups)
  bool write_lost_ = false;  // every write fails until reconnect() (outcomes were unknown)
  WriteContext raw_ctx_{nullptr};

  std::mutex read_mu_;  // guards read_
  PgConnection read_;
};

}  // namespace vend::agent::pg
