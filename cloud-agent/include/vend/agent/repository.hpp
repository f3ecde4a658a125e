// Repository: the agent's durable log in SQLite (WAL). The agent core keeps
// its working state in memory; everything needed to rebuild that state is
// written here, and AgentCore::start() reads it back.
//
// Writes are GROUP-COMMITTED: submit() queues a write and returns at once
// with a Ticket; one writer thread owns the write connection, takes
// everything queued (up to batch_max writes) and runs it in ONE transaction,
// then fulfils every ticket of the group. A caller that needs durability
// waits on its ticket (outside its own locks); the others never wait for an
// fsync. Each write runs inside its own SAVEPOINT, so a failing write is
// rolled back alone and reported through its own ticket while the rest of
// the group commits. If the COMMIT itself fails, every write of the group is
// retried in a transaction of its own, and each ticket gets its own outcome.
//
// Tables (docs/design-decisions.md, "Cloud agent"): devices, slots,
// pool_tokens, restocks, orders, payments, refunds, device_seq, snapshots,
// faults (bounded), order_events (the order event log), reconcile_reports.
//
// Reads (start-up load, look-ups of data evicted from memory, audit) use a
// second connection of their own, guarded by a mutex. They see committed
// data only: a write still queued is invisible to them (flush() first when
// that matters).
//
// Thread-safety: every method is safe to call from any thread.
// Non-copyable, non-movable (owns a thread). The destructor stops accepting
// writes, lets the writer commit everything already queued, and joins it.
#pragma once

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
#include <unordered_map>
#include <vector>

#include "vend/agent/order.hpp"
#include "vend/log.hpp"
#include "vend/protocol.hpp"
#include "vend/result.hpp"
#include "vend/sqlite.hpp"

namespace vend::agent {

// A sale token as the agent sees it: in a slot's pool, held by an order, or
// gone (sold, or burned = spent without a sale).
enum class TokenState { kPool, kReserved, kDispatched, kSold, kBurned };
const char* to_string(TokenState state);
std::optional<TokenState> parse_token_state(std::string_view text);

struct RepositoryOptions {
  sql::Sync synchronous = sql::Sync::kFull;
  int busy_timeout_ms = 5000;
  size_t queue_max = 100'000;     // queued writes; beyond it submit() fails "unavailable"
  size_t batch_max = 1024;        // writes per group commit
  int64_t faults_max = 10'000;    // rows kept in `faults` (oldest deleted first)
  int64_t cache_kib = 64 * 1024;  // SQLite page cache per connection (two connections)
  // No writer thread: queued writes are applied on the caller's thread, by
  // wait() and flush() only, so what is committed at any instant depends on
  // the caller alone (the deterministic simulation). Group commit as usual.
  bool manual_commit = false;
};

// The writer's connection, as a write sees it. Statements prepared through
// statement() are cached for the connection's lifetime. Writer thread only.
class WriteContext {
 public:
  WriteContext(sql::Database& db, const RepositoryOptions& options) : db_(db), options_(options) {}
  WriteContext(const WriteContext&) = delete;
  WriteContext& operator=(const WriteContext&) = delete;

  sql::Database& db() { return db_; }
  const RepositoryOptions& options() const { return options_; }
  // A reset, unbound statement for `sql`, prepared once per connection.
  // The pointer stays valid for the connection's lifetime.
  Result<sql::Statement*> statement(const std::string& sql);

 private:
  sql::Database& db_;
  const RepositoryOptions& options_;
  std::unordered_map<std::string, std::unique_ptr<sql::Statement>> cache_;
};

// One write: runs on the writer thread inside the group's transaction. A
// non-ok Status rolls back everything this write did (its savepoint).
using WriteFn = std::function<Status(WriteContext&)>;

// The outcome of one write, ready once its group committed (or failed).
using Ticket = std::shared_future<Status>;

struct StoredPayment {
  std::string payment_id;
  std::string order_id;
  int64_t amount_cents = 0;
  std::string outcome;  // "applied", "duplicate_payment_refunded", "late_payment_refunded"
  int64_t at_ms = 0;
};

// A refund's delivery to the payment gateway (the refund outbox):
// PENDING until the gateway confirms it (DELIVERED) or it is given up
// (GAVE_UP: refused by the gateway, or too many failed attempts; alerted).
enum class RefundState { kPending, kDelivered, kGaveUp };
const char* to_string(RefundState state);
std::optional<RefundState> parse_refund_state(std::string_view text);

// One refund per payment; its id, sent to the gateway, is refund_id_of().
struct StoredRefund {
  std::string payment_id;
  std::string order_id;
  int64_t amount_cents = 0;
  std::string reason;
  int64_t at_ms = 0;
  RefundState state = RefundState::kPending;
  int attempts = 0;        // deliveries tried
  std::string last_error;  // of the latest failed attempt
  int64_t updated_ms = 0;
};

// A new PENDING refund of `payment_id`, recorded at `at_ms`.
StoredRefund new_refund(std::string payment_id, std::string order_id, int64_t amount_cents,
                        std::string reason, int64_t at_ms);

// "rfd-<payment id>": the idempotency key of a refund at the gateway.
std::string refund_id_of(const std::string& payment_id);

struct StoredRestock {
  std::string restock_id;
  std::string device;
  int slot = 0;
  int count = 0;
  bool minted = false;  // REQUESTED until the device reports its tokens
};

struct OrderEvent {
  std::string order_id;
  std::string from_state;  // "" for the creation
  std::string to_state;
  int64_t at_ms = 0;
  std::string detail;
};

struct StoredFault {
  std::string device;
  std::string code;
  std::string message;
  int slot = 0;
  int64_t at_ms = 0;
};

struct StoredSnapshot {
  std::string payload;  // the event's canonical JSON
  int64_t at_ms = 0;
};

// A set of changes applied atomically: all of them or none (one savepoint).
// Building one does no I/O; the SQL runs on the writer thread at commit.
// Every order transition and token move is conditional on its from-state
// and must change exactly one row, else the whole changeset fails with
// "conflict" (a bug or a race: the caller's memory disagrees with the log).
class Changeset {
 public:
  bool empty() const { return writes_.empty(); }
  size_t size() const { return writes_.size(); }
  // Any write; runs in order with the others.
  void add(WriteFn write) { writes_.push_back(std::move(write)); }

  void insert_device(const std::string& id, const std::string& key_hex, int64_t created_ms);
  void upsert_slot(const std::string& device, const SlotSpec& slot);
  // Inserts the order and its creation event (from "" to its state).
  void insert_order(const Order& order, const std::string& detail);
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
  // (conditional, like a transition).
  void advance_device_seq(const std::string& device, uint64_t from, uint64_t to);
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

 private:
  friend class Repository;
  std::vector<WriteFn> writes_;
};

// Everything AgentCore::start() needs, read in one transaction.
struct LoadedState {
  struct Device {
    std::string id;
    std::string key_hex;
    int64_t created_ms = 0;
    uint64_t last_processed_seq = 0;
    std::string next_key_hex;                  // pending rotation, "" = none
    int64_t decommissioned_ms = 0;             // 0 = in service
    std::string ledger_id;                     // whose seqs last_processed_seq counts
    std::vector<std::string> retired_ledgers;  // replaced ones: their events are refused
  };
  struct Slot {
    std::string device;
    SlotSpec spec;
    int64_t sold = 0;    // SOLD tokens
    int64_t burned = 0;  // BURNED tokens
  };
  struct PoolToken {
    std::string token;
    std::string device;
    int slot = 0;
  };
  std::vector<Device> devices;
  std::vector<Slot> slots;
  std::vector<PoolToken> pool;                // POOL tokens, in mint order
  std::vector<Order> open_orders;             // RESERVED, PAID, DISPATCHED
  std::vector<Order> recent_orders;           // finished, most recently updated first
  std::vector<StoredPayment> payments;        // of every loaded order
  std::vector<StoredRestock> requested;       // restocks not minted yet
  std::vector<StoredRefund> pending_refunds;  // PENDING, oldest first
  std::map<OrderState, int64_t> order_counts;
};

struct WriterStats {
  uint64_t writes = 0;         // writes finished (ok or not)
  uint64_t failed_writes = 0;  // writes whose ticket holds an error
  uint64_t batches = 0;        // group commits
  uint64_t largest_batch = 0;
  uint64_t rejected_full = 0;  // submit() refused: queue full or stopped
};

class Repository {
 public:
  // Opens (creating if needed) and migrates the database at `path`, and
  // starts the writer thread. `log` must outlive the repository.
  static Result<std::unique_ptr<Repository>> open(const std::string& path,
                                                  const RepositoryOptions& options, Logger& log);
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
  // Blocks until every write submitted before this call has finished.
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
  bool accepting() const;
  WriterStats stats() const;

  // ---- reads (committed data) ----
  // REQUIRES: recent_orders_max >= 0.
  Result<LoadedState> load(size_t recent_orders_max);
  Result<std::optional<Order>> find_order(const std::string& order_id);
  Result<std::optional<Order>> find_order_by_idempotency_key(const std::string& key);
  Result<std::optional<StoredPayment>> find_payment(const std::string& payment_id);
  // Restock ids are per device (a machine may confirm restocks of its own).
  Result<std::optional<StoredRestock>> find_restock(const std::string& device,
                                                    const std::string& restock_id);
  // The subset of `tokens` the database already holds (any state).
  Result<std::vector<std::string>> known_tokens(const std::vector<std::string>& tokens);
  Result<std::map<TokenState, int64_t>> token_counts(const std::string& device, int slot);
  Result<std::optional<TokenState>> token_state(const std::string& token);
  Result<std::vector<OrderEvent>> order_events(const std::string& order_id);
  Result<std::vector<StoredPayment>> payments_of(const std::string& order_id);
  Result<std::vector<StoredRefund>> refunds_of(const std::string& order_id);
  // Refunds in `state` (any state if none), most recently updated first.
  Result<std::vector<StoredRefund>> refunds(std::optional<RefundState> state, size_t limit);
  Result<std::optional<StoredSnapshot>> snapshot(const std::string& device);
  // The JSON of the device's latest reconciliation report, if any.
  Result<std::optional<std::string>> reconcile_report(const std::string& device);
  // Most recent first.
  Result<std::vector<StoredFault>> faults(const std::string& device, size_t limit);

 private:
  struct Pending {
    WriteFn write;
    std::promise<Status> done;
    // after_durable(): no SQL; `after` runs once the group is fulfilled.
    bool marker = false;
    std::function<void()> after;
  };

  Repository(sql::Database write_db, sql::Database read_db, const RepositoryOptions& options,
             Logger& log);
  Result<Ticket> enqueue(WriteFn write, bool bounded);
  void writer_loop();
  // REQUIRES: mu_ held, by the one thread that applies groups. Moves the
  // markers at the queue's front to `ready` and the next group to `group`.
  void take_group(std::vector<Pending>& ready, std::vector<Pending>& group);
  static void run_ready(std::vector<Pending>& ready);
  void apply_group(std::vector<Pending>& group);
  bool apply_together(std::vector<Pending>& group, std::vector<Status>& results);
  Status apply_alone(Pending& pending);
  Status run_in_savepoint(Pending& pending);

  RepositoryOptions options_;
  Logger& log_;
  sql::Database write_db_;  // writer thread only
  WriteContext write_ctx_;  // writer thread only

  std::mutex read_mu_;  // guards read_db_
  sql::Database read_db_;

  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  WriterStats stats_;

  void apply_queued();    // manual_commit: the caller's thread is the writer
  std::mutex manual_mu_;  // manual_commit: one caller applies at a time

  std::thread writer_;  // last: started once everything above exists (not with manual_commit)
};

}  // namespace vend::agent
