// Repository: the agent's durable log. The agent core keeps its working
// state in memory; everything needed to rebuild that state is written here,
// and AgentCore::start() reads it back. The storage engine is a
// RepositoryBackend: SQLite (WAL, embedded, the default: Repository::open)
// or PostgreSQL (postgres/postgres_repository.hpp, its own target).
//
// Writes are GROUP-COMMITTED: submit() queues a write and returns at once
// with a Ticket; one writer thread owns the backend's write connection,
// takes everything queued (up to batch_max writes) and hands it to the
// backend as ONE group, applied in one transaction; then it fulfils every
// ticket of the group. A caller that needs durability waits on its ticket
// (outside its own locks); the others never wait for an fsync. Each write
// (a Changeset) is applied atomically and alone: a failing write is rolled
// back by itself and reported through its own ticket while the rest of the
// group commits. If the COMMIT itself fails, the backend retries every write
// of the group in a transaction of its own, and each ticket gets its own
// outcome (backends: RepositoryBackend::apply_group).
//
// Tables (docs/design-decisions.md, "Cloud agent"): devices, slots,
// pool_tokens, restocks, orders, payments, refunds, device_seq, snapshots,
// faults (bounded), order_events (the order event log), reconcile_reports,
// retired_ledgers; the operators' accounts, api_tokens and audit.
//
// Reads (start-up load, look-ups of data evicted from memory, audit) use a
// second connection of the backend's own. They see committed data only: a
// write still queued is invisible to them (flush() first when that matters).
//
// Thread-safety: every method is safe to call from any thread.
// Non-copyable, non-movable (owns a thread). The destructor stops accepting
// writes, lets the writer commit everything already queued, and joins it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "contracts/repository_types.hpp"
#include "vend/log.hpp"

namespace vend::agent {

// A set of changes applied atomically: all of them or none (one savepoint).
// Building one does no I/O: it records typed changes (repository_types.hpp)
// that the backend turns into its own SQL on the writer thread at commit.
// Every order transition and token move is conditional on its from-state
// and must change exactly one row, else the whole changeset fails with
// "conflict" (a bug or a race: the caller's memory disagrees with the log).
//
// Fencing (cluster mode, Repository::set_fence()): a changeset names the
// devices whose data it writes (fence_device(); every builder method that
// takes a device calls it), and commits only while this instance holds the
// shards of all of them at the fence's epochs; otherwise it fails "fenced".
class Changeset {
 public:
  bool empty() const { return changes_.empty(); }
  size_t size() const { return changes_.size(); }
  const std::vector<Change>& changes() const { return changes_; }
  // Room for `n` changes (a hot path that knows how many it writes).
  void reserve(size_t n) { changes_.reserve(n); }
  // A raw write, run in order with the others (tests: see WriteContext).
  void add(WriteFn write) { changes_.push_back(change::Raw{std::move(write)}); }

  void insert_device(const std::string& id, const std::string& key_hex, int64_t created_ms);
  void upsert_slot(const std::string& device, const SlotSpec& slot);
  // Inserts a new reservation (state RESERVED). Its creation event is not
  // stored: order_events() derives it from the row (kCreationDetail).
  void insert_order(const Order& order);
  // UPDATE orders SET <after's mutable fields> WHERE id = after.id AND
  // state = from; plus an order_events row.
  void transition_order(const Order& after, OrderState from, const std::string& detail);
  // Moves a token from `from` to `to`; order_id "" stores NULL.
  void move_token(const std::string& token, TokenState from, TokenState to,
                  const std::string& order_id);
  // New POOL tokens (token ids must be new).
  void insert_pool_tokens(const std::string& device, int slot, const std::string& restock_id,
                          const std::vector<std::string>& tokens);
  // Inserts or updates (state, count) of a restock.
  void put_restock(const StoredRestock& restock, int64_t at_ms);
  void insert_payment(const StoredPayment& payment);
  void insert_refund(const StoredRefund& refund);
  // A delivery attempt's outcome: state, attempts and last_error.
  void update_refund(const std::string& payment_id, RefundState state, int attempts,
                     const std::string& last_error, int64_t at_ms);
  // The device's last processed event seq goes from `from` to `to`
  // (conditional, like a transition); `mac`: the event at `to`'s, kept to
  // tell a duplicate from another event under that seq ("" = unknown).
  void advance_device_seq(const std::string& device, uint64_t from, uint64_t to,
                          const std::string& mac = "");
  // The device's events now come from ledger `to` (seq from 1): ledger `from`
  // (at seq `from_seq`; conditional, like a transition) is retired.
  void switch_ledger(const std::string& device, const std::string& from, uint64_t from_seq,
                     const std::string& to, int64_t at_ms);
  // Key rotation: `key_hex` is the device's pending new key.
  void set_next_key(const std::string& device, const std::string& key_hex);
  // The device signed with its pending key `key_hex`: it replaces the key
  // (conditional on still being the pending one).
  void promote_next_key(const std::string& device, const std::string& key_hex);
  // Out of service from at_ms; a pending key is dropped.
  void decommission_device(const std::string& device, int64_t at_ms);
  void put_snapshot(const std::string& device, const std::string& payload, int64_t at_ms);
  // The device's latest reconciliation report (replaces the previous one).
  void put_reconcile_report(const std::string& device, const std::string& report, int64_t at_ms);
  // Appends a fault and trims the table to faults_max rows.
  void insert_fault(const StoredFault& fault);
  // Operators (contracts/accounts.hpp). Inserts the account, or replaces
  // its role, machines, password hash and disabled_ms.
  void put_account(const StoredAccount& account);
  void insert_api_token(const StoredApiToken& token);
  // Revokes a live token (conditional: "conflict" when it is unknown or
  // revoked already).
  void revoke_api_token(const std::string& id, int64_t at_ms);
  // Appends an audit row (its id is the log's). In the changeset of the
  // action it records: both commit or neither.
  void insert_audit(const AuditEntry& entry);

  // This changeset writes data of `device` (kept once). For changesets that
  // name no device themselves (move_token, insert_payment, insert_refund,
  // update_refund): the caller names the device the data belongs to.
  void fence_device(const std::string& device);
  const std::vector<std::string>& fenced_devices() const { return fenced_devices_; }
  // For backends: what to check before this changeset commits, or nullptr
  // when it is not fenced (no fence, or no device). Set by Repository.
  const FenceClaim* fence_claim() const { return claim_ ? &*claim_ : nullptr; }

 private:
  friend class Repository;
  std::vector<Change> changes_;
  std::vector<std::string> fenced_devices_;
  std::optional<FenceClaim> claim_;
};

// A storage engine under the Repository: applies groups of writes (on the
// writer thread only) and answers reads (any thread; the backend serialises
// its read connection). Non-copyable.
class RepositoryBackend {
 public:
  virtual ~RepositoryBackend() = default;
  RepositoryBackend() = default;
  RepositoryBackend(const RepositoryBackend&) = delete;
  RepositoryBackend& operator=(const RepositoryBackend&) = delete;

  // Applies every changeset of `group`, in order, in one transaction when it
  // can; each one atomically (all its changes or none), so one failing
  // changeset is rolled back alone. Returns one Status per changeset, each
  // final: ok means durably committed (with the backend's durability
  // setting). When the group's transaction cannot commit, each changeset is
  // retried in a transaction of its own. Writer thread only.
  virtual std::vector<Status> apply_group(const std::vector<const Changeset*>& group) = 0;

  // Fencing: true when apply_group() honours Changeset::fence_claim(): a
  // claimed changeset commits only if, when its transaction commits, every
  // claimed shard's lease is held by the claim's instance at its epoch and
  // unexpired (the store's clock); else it fails "fenced" and the rest of
  // the group commits.
  virtual bool supports_fence() const { return false; }
  // Whether this database can check `fence` (its lease tables exist, its
  // shard count is the fence's): "config" when not. Any thread.
  virtual Status check_fence(const WriteFence& fence) {
    (void)fence;
    return {};
  }

  // Connects the write side again after its connection was lost (a backend
  // without a connection: nothing to do, ok). Called by Repository::recover()
  // while no group is being applied. "unavailable" while it cannot.
  virtual Status reconnect() { return {}; }

  // The reads of Repository (same contracts).
  virtual Result<LoadedState> load(size_t recent_orders_max, const LoadFilter& only) = 0;
  virtual Result<std::optional<Order>> find_order(const std::string& order_id) = 0;
  virtual Result<std::optional<Order>> find_order_by_idempotency_key(const std::string& key) = 0;
  virtual Result<std::optional<StoredPayment>> find_payment(const std::string& payment_id) = 0;
  virtual Result<std::optional<StoredRestock>> find_restock(const std::string& device,
                                                            const std::string& restock_id) = 0;
  virtual Result<std::vector<std::string>> known_tokens(const std::vector<std::string>& tokens) = 0;
  virtual Result<std::map<TokenState, int64_t>> token_counts(const std::string& device,
                                                             int slot) = 0;
  virtual Result<std::optional<TokenState>> token_state(const std::string& token) = 0;
  virtual Result<std::vector<OrderEvent>> order_events(const std::string& order_id) = 0;
  virtual Result<std::vector<StoredPayment>> payments_of(const std::string& order_id) = 0;
  virtual Result<std::vector<StoredRefund>> refunds_of(const std::string& order_id) = 0;
  virtual Result<std::vector<StoredRefund>> refunds(std::optional<RefundState> state,
                                                    size_t limit) = 0;
  virtual Result<std::optional<StoredSnapshot>> snapshot(const std::string& device) = 0;
  virtual Result<std::optional<std::string>> reconcile_report(const std::string& device) = 0;
  virtual Result<std::vector<StoredFault>> faults(const std::string& device, size_t limit) = 0;
  // Operators' accounts, tokens and the audit trail. Not pure: a backend
  // that decorates another forwards them or answers "unsupported".
  virtual Result<std::optional<StoredAccount>> find_account(const std::string& name);
  virtual Result<std::vector<StoredAccount>> accounts();
  virtual Result<std::optional<StoredApiToken>> find_api_token(const std::string& sha256_hex);
  virtual Result<std::vector<StoredApiToken>> api_tokens(const std::string& account);
  virtual Result<std::vector<AuditEntry>> audit(const AuditQuery& query);
};

class Repository {
 public:
  // Opens (creating if needed) and migrates the SQLite database at `path`,
  // and starts the writer thread. `log` must outlive the repository.
  static Result<std::unique_ptr<Repository>> open(const std::string& path,
                                                  const RepositoryOptions& options, Logger& log);
  // The SQLite backend of open() alone, for a backend that decorates it
  // (the deterministic simulation's shared database with a fence).
  static Result<std::unique_ptr<RepositoryBackend>> open_sqlite_backend(
      const std::string& path, const RepositoryOptions& options, Logger& log);
  // A repository over any backend (open() is this with SQLite's); starts
  // the writer thread unless options.manual_commit.
  Repository(std::unique_ptr<RepositoryBackend> backend, const RepositoryOptions& options,
             Logger& log);
  ~Repository();
  Repository(const Repository&) = delete;
  Repository& operator=(const Repository&) = delete;

  // ---- writes ----
  // Queues one write (or one changeset, applied atomically). Fails fast
  // with "unavailable" when queue_max writes are already waiting or the
  // repository is stopping; otherwise the ticket resolves after the group
  // commit. Writes are applied in submission order.
  Result<Ticket> submit(WriteFn write);
  Result<Ticket> submit(Changeset changes);
  // Blocks until every write submitted before this call has finished and
  // the after_durable() callbacks of those writes have returned.
  // REQUIRES: not called from inside a write (the writer would wait for
  // itself).
  void flush();
  // The outcome of `ticket`, once its group committed. Use this, not
  // ticket.get(): with manual_commit it applies the queue first.
  Status wait(const Ticket& ticket);
  // Calls `fn` with the outcome of `ticket` once it is known, without
  // waiting: at once when it is already fulfilled, else on the writer
  // thread right after the group that fulfils it (so `fn` must be quick and
  // must not block: hand the work on). With manual_commit it runs when the
  // queue is next applied. Never dropped: after abandon() it gets the
  // "abandoned" outcome.
  void after_durable(const Ticket& ticket, std::function<void(Status)> fn);
  // Process death (kill -9) for tests and the simulation: writes queued and
  // not yet applied are dropped (their tickets fail "abandoned"), nothing is
  // accepted any more, and the destructor commits nothing further. A group
  // the writer thread is applying at that moment still completes, as it
  // would in a dying process whose COMMIT already reached the disk.
  void abandon();
  // True when submit() would accept a write now (not stopping, queue below
  // queue_max). Exact for a sole submitter that checks and submits under one
  // lock of its own (the agent core): only the writer drains the queue.
  // Lock-free (read on every reservation by the core thread, while the
  // writer holds the queue's lock): mirrors the queue's size and state.
  bool accepting() const;
  // True once a write failed since the repository opened or last
  // recovered; lock-free.
  bool has_failed_writes() const { return failed_any_.load(std::memory_order_acquire); }
  // After failed writes (a lost database connection, a lock timeout): the
  // backend connects its write side again and has_failed_writes() turns
  // false. Writes whose outcome was unknown (a COMMIT unanswered) are not
  // retried: the caller must rebuild its state from what committed (the
  // agent core's rebuild) before it writes again. "unavailable" while the
  // database cannot be reached (nothing changes; call again later).
  Status recover();
  WriterStats stats() const;

  // Cluster mode: every changeset SUBMITTED after this call carries `fence`
  // (nullptr: none); changesets already queued keep the fence they had. A
  // fenced changeset with at least one device (fence_device()) fails
  // "fenced" without touching the database when one of its devices' shards
  // (shard_of(device, shard_count)) is not in fence->epochs, and through the
  // backend's check when the lease moved or expired before its commit.
  // Fenced tickets count in stats().fenced_writes, not in failed_writes.
  // "config" when the backend cannot fence (SQLite) or the fence is
  // malformed (no instance, shard_count <= 0) or does not fit the database.
  Status set_fence(std::shared_ptr<const WriteFence> fence);

  // ---- reads (committed data; the backend's RepositoryBackend reads) ----
  // Everything start-up needs, in one consistent snapshot. With `only`
  // (several agents), the machines it accepts and their data alone: their
  // slots (with their sold and burned counts), POOL tokens, requested
  // restocks, open orders, the recent_orders_max most recently finished of
  // their orders, those orders' payments; the payments of unknown orders and
  // the pending refunds whose owner key it accepts (keep_accepted()); and
  // order_counts counts the loaded orders, not the log's. Filtered in the
  // queries: the cost is the accepted machines' live rows, not the fleet's
  // or its history (docs/agent.md, "Loading a shard"), apart from one read
  // of the fleet's device ids. REQUIRES: recent_orders_max >= 0.
  Result<LoadedState> load(size_t recent_orders_max, const LoadFilter& only = nullptr) {
    return backend_->load(recent_orders_max, only);
  }
  Result<std::optional<Order>> find_order(const std::string& order_id) {
    return backend_->find_order(order_id);
  }
  Result<std::optional<Order>> find_order_by_idempotency_key(const std::string& key) {
    return backend_->find_order_by_idempotency_key(key);
  }
  Result<std::optional<StoredPayment>> find_payment(const std::string& payment_id) {
    return backend_->find_payment(payment_id);
  }
  // Restock ids are per device (a machine may confirm restocks of its own).
  Result<std::optional<StoredRestock>> find_restock(const std::string& device,
                                                    const std::string& restock_id) {
    return backend_->find_restock(device, restock_id);
  }
  // The subset of `tokens` the database already holds (any state).
  Result<std::vector<std::string>> known_tokens(const std::vector<std::string>& tokens) {
    return backend_->known_tokens(tokens);
  }
  Result<std::map<TokenState, int64_t>> token_counts(const std::string& device, int slot) {
    return backend_->token_counts(device, slot);
  }
  Result<std::optional<TokenState>> token_state(const std::string& token) {
    return backend_->token_state(token);
  }
  // The order's events, oldest first, its creation first (derived from the
  // order row when not stored, kCreationDetail); empty: no such order.
  Result<std::vector<OrderEvent>> order_events(const std::string& order_id);
  Result<std::vector<StoredPayment>> payments_of(const std::string& order_id) {
    return backend_->payments_of(order_id);
  }
  Result<std::vector<StoredRefund>> refunds_of(const std::string& order_id) {
    return backend_->refunds_of(order_id);
  }
  // Refunds in `state` (any state if none), most recently updated first.
  Result<std::vector<StoredRefund>> refunds(std::optional<RefundState> state, size_t limit) {
    return backend_->refunds(state, limit);
  }
  Result<std::optional<StoredSnapshot>> snapshot(const std::string& device) {
    return backend_->snapshot(device);
  }
  // The JSON of the device's latest reconciliation report, if any.
  Result<std::optional<std::string>> reconcile_report(const std::string& device) {
    return backend_->reconcile_report(device);
  }
  // Most recent first.
  Result<std::vector<StoredFault>> faults(const std::string& device, size_t limit) {
    return backend_->faults(device, limit);
  }
  // Operators (contracts/accounts.hpp).
  Result<std::optional<StoredAccount>> find_account(const std::string& name) {
    return backend_->find_account(name);
  }
  // Sorted by name.
  Result<std::vector<StoredAccount>> accounts() { return backend_->accounts(); }
  // The token whose text hashes to `sha256_hex` (any state).
  Result<std::optional<StoredApiToken>> find_api_token(const std::string& sha256_hex) {
    return backend_->find_api_token(sha256_hex);
  }
  // Of `account` ("" = every account), newest first.
  Result<std::vector<StoredApiToken>> api_tokens(const std::string& account) {
    return backend_->api_tokens(account);
  }
  // Oldest first (by id), as AuditQuery says.
  Result<std::vector<AuditEntry>> audit(const AuditQuery& query) { return backend_->audit(query); }

 private:
  // An after_durable() callback and the ticket whose outcome it gets.
  struct After {
    Ticket ticket;
    std::function<void(Status)> fn;
  };
  struct Pending {
    Changeset changes;
    std::promise<Status> done;
    std::shared_ptr<const WriteFence> fence;  // the fence when it was submitted
    // A marker (after_durable() with nothing queued): no SQL.
    bool marker = false;
    // after_durable() callbacks: run, in order, once this entry's group is
    // fulfilled (every ticket queued before it is then fulfilled too).
    std::vector<After> after;
    // A flush(): fulfilled only after its group's callbacks have run.
    bool barrier = false;
  };
  static void run_after(Pending& pending);

  Result<Ticket> enqueue(Changeset changes, bool bounded, bool barrier = false);
  void writer_loop();
  // REQUIRES: mu_ held, by the one thread that applies groups. Moves the
  // markers at the queue's front to `ready` and the next group to `group`.
  void take_group(std::vector<Pending>& ready, std::vector<Pending>& group);
  static void run_ready(std::vector<Pending>& ready);
  void apply_group(std::vector<Pending>& group);
  // Sets the claim of a fenced changeset; an error when one of its shards
  // is not held (refused before the database).
  static Status claim_fence(Pending& pending);

  RepositoryOptions options_;
  Logger& log_;
  std::unique_ptr<RepositoryBackend> backend_;

  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  // Written under mu_ (the writer's wait reads it there); accepting()
  // reads it without.
  std::atomic<bool> stopping_{false};
  WriterStats stats_;
  // Written under mu_ with the fields they mirror; read without it.
  std::atomic<size_t> queued_{0};        // queue_.size()
  std::atomic<bool> failed_any_{false};  // a write failed since open or recover()
  std::mutex apply_mu_;                  // held while the backend applies a group
  std::shared_ptr<const WriteFence> fence_;

  void apply_queued();    // manual_commit: the caller's thread is the writer
  std::mutex manual_mu_;  // manual_commit: one caller applies at a time

  std::thread writer_;  // last: started once everything above exists (not with manual_commit)
};

}  // namespace vend::agent
