// The data of the agent's durable log (Repository): tokens, payments,
// refunds, restocks, events, faults, snapshots, what start-up loads, and the
// change records a Changeset is made of. Backend-neutral: SQLite and
// PostgreSQL store the same things.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "contracts/accounts.hpp"
#include "contracts/order.hpp"
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
  // PostgreSQL: the write connection's idle_in_transaction_session_timeout
  // (0 = off). A writer paused between two round trips of a group (SIGSTOP)
  // keeps its transaction's row locks; past this the server ends its
  // session, and the writer, finding its connection lost, fails every later
  // write until Repository::recover(). Cluster mode sets it below the lease.
  int64_t pg_idle_in_transaction_timeout_ms = 0;
  // PostgreSQL: the write connection's lock_timeout and statement_timeout
  // (0 = off). A write that waits longer for a row lock (another agent,
  // paused, holds it) or runs longer fails (its changeset is rolled back to
  // its savepoint, the rest of the group commits): the core answers it
  // "unavailable" and, in cluster mode, is rebuilt from the database.
  int64_t pg_lock_timeout_ms = 0;
  int64_t pg_statement_timeout_ms = 0;
};

// Cluster mode (several agents on one PostgreSQL): the shards this instance
// holds and their epochs (cloud-agent/cluster). Repository::set_fence().
struct WriteFence {
  std::string instance;
  int shard_count = 0;
  std::map<int, uint64_t> epochs;  // shard held -> its epoch
};

// What the backend checks before one fenced changeset may commit: the
// shards of its devices, each with the epoch `instance` holds it at, in
// ascending shard order. Repository fills it from the changeset's fence.
struct FenceClaim {
  std::string instance;
  std::vector<std::pair<int, uint64_t>> shards;  // (shard, epoch)
};

// What a raw write (WriteFn) sees of the writer's connection: the SQLite
// database when the backend is SQLite, nullptr on any other backend. Raw
// writes are an escape hatch for tests (a gate holding the writer, a disk
// filling up); the core writes only through Changeset's named methods.
class WriteContext {
 public:
  explicit WriteContext(sql::Database* sqlite) : sqlite_(sqlite) {}
  WriteContext(const WriteContext&) = delete;
  WriteContext& operator=(const WriteContext&) = delete;
  sql::Database* sqlite() { return sqlite_; }

 private:
  sql::Database* sqlite_;
};

// One write: runs on the writer thread inside the group's transaction. A
// non-ok Status rolls back everything this write did (its savepoint).
using WriteFn = std::function<Status(WriteContext&)>;

// The outcome of one write, ready once its group committed (or failed).
using Ticket = std::shared_future<Status>;

// True when `ticket` is set and its group is done (never waits).
inline bool is_ready(const Ticket& ticket) {
  return ticket.valid() && ticket.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

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
  // Its order's machine ("" for an order the agent never had, and for a
  // refund written before schema v8). Several agents: the refund is
  // delivered by the machine's owner, else by the owner of the order id.
  std::string device;
};

// Which instance of several holds the refund (ownership key, and the fence
// of its writes): its machine, else its order id.
inline const std::string& owner_key(const StoredRefund& r) {
  return r.device.empty() ? r.order_id : r.device;
}

// A new PENDING refund of `payment_id`, recorded at `at_ms`.
inline StoredRefund new_refund(std::string payment_id, std::string order_id, int64_t amount_cents,
                               std::string reason, int64_t at_ms, std::string device = "") {
  StoredRefund r;
  r.payment_id = std::move(payment_id);
  r.order_id = std::move(order_id);
  r.device = std::move(device);
  r.amount_cents = amount_cents;
  r.reason = std::move(reason);
  r.at_ms = r.updated_ms = at_ms;
  return r;
}

// "rfd-<payment id>": the idempotency key of a refund at the gateway.
inline std::string refund_id_of(const std::string& payment_id) { return "rfd-" + payment_id; }

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

// The creation event's detail. The creation event is not written (it only
// repeated the order row: from "" to RESERVED at created_ms, a third of a
// reservation's SQL); Repository::order_events() puts it first. Orders of
// agents that still wrote it keep their stored one.
inline constexpr const char* kCreationDetail = "reserved";

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
    std::string last_mac;                      // of the event at last_processed_seq ("" = unknown)
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

// Which part of the log a load reads (several agents: the machines of the
// shards this instance holds). Asked about machine ids, and about order ids
// for what names no machine (a payment for an order the agent never had, a
// refund written before schema v8 whose order is not loaded): owner keys,
// as AgentCore::Ownership. Null: everything (one agent).
using LoadFilter = std::function<bool(const std::string& key)>;

// For backends, after a filtered load read the rows of the accepted
// machines: keeps the payments of unknown orders and the pending refunds
// whose owner key `only` accepts (a refund without a machine first gets
// its loaded order's), and makes order_counts count the loaded orders.
void keep_accepted(LoadedState& loaded, const LoadFilter& only);

struct WriterStats {
  uint64_t writes = 0;         // writes finished (ok or not)
  uint64_t failed_writes = 0;  // writes whose ticket holds an error
  uint64_t batches = 0;        // group commits
  uint64_t largest_batch = 0;
  uint64_t rejected_full = 0;  // submit() refused: queue full or stopped
  int64_t fenced_writes = 0;   // changesets refused by the fence (not in failed_writes)
};

// The change records a Changeset holds, one per named method of
// Changeset (whose comments say what each does). Plain data: every backend
// applies them with its own SQL.
namespace change {
struct InsertDevice {
  std::string id, key_hex;
  int64_t created_ms = 0;
};
struct UpsertSlot {
  std::string device;
  SlotSpec slot;
};
struct InsertOrder {
  Order order;
};
struct TransitionOrder {
  Order after;
  OrderState from;
  std::string detail;
};
struct MoveToken {
  std::string token;
  TokenState from, to;
  std::string order_id;  // "" = none (NULL)
};
struct InsertPoolTokens {
  std::string device;
  int slot = 0;
  std::string restock_id;
  std::vector<std::string> tokens;
};
struct PutRestock {
  StoredRestock restock;
  int64_t at_ms = 0;
};
struct InsertPayment {
  StoredPayment payment;
};
struct InsertRefund {
  StoredRefund refund;
};
struct UpdateRefund {
  std::string payment_id;
  RefundState state;
  int attempts = 0;
  std::string last_error;
  int64_t at_ms = 0;
};
struct AdvanceDeviceSeq {
  std::string device;
  uint64_t from = 0, to = 0;
  std::string mac;  // of the event at `to` ("" = unknown: a skipped gap)
};
struct SwitchLedger {
  std::string device, from;
  uint64_t from_seq = 0;
  std::string to;
  int64_t at_ms = 0;
};
struct SetNextKey {
  std::string device, key_hex;
};
struct PromoteNextKey {
  std::string device, key_hex;
};
struct DecommissionDevice {
  std::string device;
  int64_t at_ms = 0;
};
struct PutSnapshot {
  std::string device, payload;
  int64_t at_ms = 0;
};
struct PutReconcileReport {
  std::string device, report;
  int64_t at_ms = 0;
};
struct InsertFault {
  StoredFault fault;
};
struct PutAccount {
  StoredAccount account;
};
struct InsertApiToken {
  StoredApiToken token;
};
struct RevokeApiToken {
  std::string id;
  int64_t at_ms = 0;
};
struct InsertAudit {
  AuditEntry entry;
};
struct Raw {  // Changeset::add()
  WriteFn write;
};
}  // namespace change

using Change = std::variant<
    change::InsertDevice, change::UpsertSlot, change::InsertOrder, change::TransitionOrder,
    change::MoveToken, change::InsertPoolTokens, change::PutRestock, change::InsertPayment,
    change::InsertRefund, change::UpdateRefund, change::AdvanceDeviceSeq, change::SwitchLedger,
    change::SetNextKey, change::PromoteNextKey, change::DecommissionDevice, change::PutSnapshot,
    change::PutReconcileReport, change::InsertFault, change::PutAccount, change::InsertApiToken,
    change::RevokeApiToken, change::InsertAudit, change::Raw>;

// The state a conditional change (transition, token move, seq advance, ...)
// names in its "conflict" error, e.g. "order ord-1 RESERVED -> PAID".
std::string describe_conflict(const Change& change);

}  // namespace vend::agent
