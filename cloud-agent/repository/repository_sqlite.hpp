// Private to the repository: the SQLite backend (WAL; one write connection
// owned by the writer thread, one read connection behind a mutex, and with a
// writer thread a checkpointer with a connection and thread of its own).
// Non-copyable.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "repository/repository.hpp"
#include "repository/repository_checkpointer.hpp"
#include "vend/log.hpp"
#include "vend/sqlite.hpp"

namespace vend::agent::detail {

// The write connection with its statement cache. Writer thread only.
class SqliteWriter {
 public:
  SqliteWriter(sql::Database db, const RepositoryOptions& options)
      : db_(std::move(db)), options_(options), raw_ctx_(&db_) {}
  sql::Database& db() { return db_; }
  const RepositoryOptions& options() const { return options_; }
  WriteContext& raw_context() { return raw_ctx_; }
  // A reset, unbound statement for `sql`, prepared once per connection.
  // The pointer stays valid for the connection's lifetime.
  Result<sql::Statement*> statement(const std::string& sql);

 private:
  sql::Database db_;
  const RepositoryOptions& options_;
  WriteContext raw_ctx_;
  std::unordered_map<std::string, std::unique_ptr<sql::Statement>> cache_;
};

// Applies one change with SQLite's SQL (repository_changes.cpp).
Status apply_change(SqliteWriter& writer, const Change& change);

class SqliteBackend final : public RepositoryBackend {
 public:
  // `checkpointer` null: SQLite's auto-checkpoint (manual_commit).
  SqliteBackend(sql::Database write_db, sql::Database read_db,
                std::unique_ptr<SqliteCheckpointer> checkpointer, const RepositoryOptions& options,
                Logger& log);
  ~SqliteBackend() override;

  std::vector<Status> apply_group(const std::vector<const Changeset*>& group) override;

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
  // Operators' accounts, tokens and audit (repository_account_reads.cpp).
  Result<std::optional<StoredAccount>> find_account(const std::string& name) override;
  Result<std::vector<StoredAccount>> accounts() override;
  Result<std::optional<StoredApiToken>> find_api_token(const std::string& sha256_hex) override;
  Result<std::vector<StoredApiToken>> api_tokens(const std::string& account) override;
  Result<std::vector<AuditEntry>> audit(const AuditQuery& query) override;

 private:
  bool apply_together(const std::vector<const Changeset*>& group, std::vector<Status>& results);
  Status apply_alone(const Changeset& changes);
  Status apply_changes(const Changeset& changes);
  Status run_in_savepoint(const Changeset& changes);
  Status run_savepoint_statement(const std::string& sql);

  RepositoryOptions options_;
  Logger& log_;
  // Before writer_: destroyed after the connection whose commits it hears.
  std::unique_ptr<SqliteCheckpointer> checkpointer_;
  SqliteWriter writer_;  // writer thread only

  std::mutex read_mu_;  // guards read_db_
  sql::Database read_db_;
};

}  // namespace vend::agent::detail
