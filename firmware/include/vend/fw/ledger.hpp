// The device ledger: the machine's durable truth, in SQLite (WAL,
// synchronous=FULL by default). Slots, sale tokens, dispenses, restocks, the
// persisted event seq and the outbox. Every state change that the cloud must
// hear about writes its signed event to the outbox in the same transaction.
//
// Several processes may open one ledger (the daemon and the operator's
// `vend-firmware restock`); SQLite's locking arbitrates. A Ledger object is
// not thread-safe. Non-copyable, movable.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vend/crypto.hpp"
#include "vend/fw/config.hpp"
#include "vend/protocol.hpp"
#include "vend/random.hpp"
#include "vend/sqlite.hpp"

namespace vend::fw {

enum class TokenState { kAvailable, kConsumed, kBurned };
const char* to_string(TokenState state);

// Dispense lifecycle; terminal states are DISPENSED, FAILED, REJECTED, UNCERTAIN.
enum class DispenseState { kAccepted, kMotorRunning, kDispensed, kFailed, kRejected, kUncertain };
const char* to_string(DispenseState state);

struct SlotRow {
  int slot = 0;
  std::string product;
  int capacity = 0;
  int physical_count = 0;  // what the ledger believes is in the slot
  int available_tokens = 0;
};

struct DispenseRow {
  std::string order_id;
  int slot = 0;
  std::string token;
  DispenseState state = DispenseState::kAccepted;
  std::string reason;
  int64_t expires_at_ms = 0;
  bool token_consumed = false;
};

struct OutboxRow {
  uint64_t seq = 0;
  std::string type;
  std::string payload;  // the signed wire JSON, ready to publish
};

// Who signs the events this process writes.
struct Identity {
  std::string device_id;
  crypto::Key key;
  std::string boot_id;  // "" for a process that only reads (it names no new ledger)
  // The ledger's own id, signed into every event: set by Ledger::open from
  // the file (a new ledger takes the boot_id of the session that creates
  // it, a fresh 128-bit random id). A reflashed SD card or a replacement
  // board is a new ledger: a new id, seq from 1.
  std::string ledger_id = {};
};

class Ledger {
 public:
  // Opens (creating and migrating) the ledger at `path`; identity.ledger_id
  // is filled in from it.
  static Result<Ledger> open(const std::string& path, Identity identity,
                             sql::Sync sync = sql::Sync::kFull);

  const Identity& identity() const { return identity_; }
  sql::Database& db() { return db_; }

  // Inserts configured slots that are missing and updates capacity/product.
  Status sync_slots(const std::vector<SlotConfig>& slots);

  // ---- reads ----
  Result<std::vector<SlotRow>> slots();
  Result<std::optional<SlotRow>> slot(int slot);
  Result<std::optional<DispenseRow>> find_dispense(const std::string& order_id);
  // {state, slot} of a token, or nullopt when unknown.
  Result<std::optional<std::pair<TokenState, int>>> find_token(const std::string& token);
  Result<std::vector<std::string>> available_tokens(int slot);
  Result<std::vector<DispenseRow>> dispenses_in(DispenseState state);
  Result<int64_t> outbox_depth();
  Result<std::vector<OutboxRow>> outbox_after(uint64_t seq, int limit);
  Result<uint64_t> last_seq();
  Result<uint64_t> acked_seq();
  // True when this file was ledger `ledger_id` before it started a new one
  // (start_new_ledger keeps every id it leaves).
  Result<bool> was_ledger(const std::string& ledger_id);

  // ---- writes: each is one transaction ----

  // A restock confirmed at the machine: `count` items loaded into `slot`.
  // Mints one token per item, appends them to the slot's queue, raises the
  // physical count and writes the `tokens` event. Refuses to exceed capacity.
  // Idempotent per restock_id (a confirmed restock is not minted twice).
  Result<proto::TokensMinted> confirm_restock(const std::string& restock_id, int slot, int count,
                                              int64_t now_ms, Random& random);
  // Records a restock ordered by the cloud, to be confirmed by the operator.
  Status record_pending_restock(const std::string& restock_id, int slot, int count, int64_t now_ms);

  // Consumes the token and records the dispense ACCEPTED, one transaction.
  // REQUIRES: the command was authenticated and validated by the caller.
  Status accept_dispense(const proto::DispenseCommand& command, int64_t now_ms);
  // ACCEPTED -> MOTOR_RUNNING (before the motor moves).
  Status mark_motor_running(const std::string& order_id, int64_t now_ms);
  // ACCEPTED -> MOTOR_RUNNING and its dispense_started event, one
  // transaction; returns the event's seq (the motor waits for its ack).
  Result<uint64_t> mark_motor_running_announced(const DispenseRow& dispense, int64_t now_ms);
  // Records a terminal state with its reason and writes the dispense_result
  // event. DISPENSED lowers the physical count; FAILED/UNCERTAIN burn the
  // token; a REJECTED of an accepted dispense (never ran) makes it available
  // again.
  Result<proto::DispenseResult> finish_dispense(const std::string& order_id, DispenseState state,
                                                const std::string& reason, int64_t now_ms);
  // Records a rejected, authenticated command (token not consumed) and its
  // event. Used for unknown_slot, unknown_token, token_consumed, expired.
  Result<proto::DispenseResult> record_rejection(const proto::DispenseCommand& command,
                                                 const std::string& reason, int64_t now_ms);

  // Writes any event to the outbox (next seq), in its own transaction.
  // Error `oversize_event` for one whose payload exceeds kMaxPayloadBytes.
  Result<uint64_t> append_event(const proto::EventBody& body, int64_t now_ms);
  // The cloud processed every event up to `upto_seq`: drop them. With
  // `upto_mac` (the mac of the event at upto_seq as the cloud processed it)
  // they are dropped only when this ledger's event there is that event.
  // Error `ledger_regressed`, nothing dropped, when the cloud has processed
  // an event this ledger does not hold: upto_seq beyond the last seq, or
  // another event at upto_seq (the file went back in time: a restored or
  // cloned SD card, a power loss at synchronous=normal). Returns the number
  // of events dropped.
  Result<int> acknowledge(uint64_t upto_seq, const std::string& upto_mac = "");
  // The cloud's view of this ledger (it processed `seq`, the event with
  // `mac`; "" = unknown) against the file, as acknowledge() checks it,
  // changing nothing: error `ledger_regressed` when the file does not hold
  // that event.
  Status check_cloud_view(uint64_t seq, const std::string& mac);
  // After `ledger_regressed`: this file becomes the new ledger `ledger_id`
  // (the board-replacement path of the cloud takes over), in one
  // transaction. The held events that are facts (dispense results, tokens,
  // faults) are signed again with the new id, in order, seqs from 1;
  // held snapshots and events_unavailable are dropped (the cloud asks a new
  // ledger for a full snapshot); `why` is appended last. acked_seq is 0.
  // identity().ledger_id is the new id once committed. Returns the new
  // last seq.
  Result<uint64_t> start_new_ledger(const std::string& ledger_id, const proto::Fault& why,
                                    int64_t now_ms);

  // A snapshot of every slot; full adds the token lists. The slot counts come
  // from `inventory` when there is one (read first, outside the transaction),
  // else from the ledger. Read in one transaction.
  Result<proto::Snapshot> snapshot(const std::string& request_id, bool full,
                                   InventorySensor* inventory);
  // The same snapshot appended to the outbox, read in the transaction that
  // allocates its seq: it holds every token of every event before that seq
  // (a restock committed by another process cannot fall in between). One
  // too large for a message is appended as its parts (proto::split_snapshot)
  // with consecutive seqs, all in that one transaction. Returns the seq of
  // the last part.
  Result<uint64_t> append_snapshot(const std::string& request_id, bool full,
                                   InventorySensor* inventory, int64_t now_ms);

 private:
  Ledger(sql::Database db, Identity identity)
      : db_(std::move(db)), identity_(std::move(identity)) {}
  Result<std::map<int, int>> sense_counts(InventorySensor* inventory);
  Result<proto::Snapshot> build_snapshot(const std::string& request_id, bool full,
                                         const std::map<int, int>& sensed);
  // Inside an open transaction: allocate the next seq and insert the signed
  // event (under the stored ledger id, which identity_ then holds).
  Result<uint64_t> append_event_in_tx(const proto::EventBody& body, int64_t now_ms);
  // The same, stamped `ts_ms` by session `boot_id` (an event carried over).
  Result<uint64_t> append_signed_in_tx(const proto::EventBody& body, int64_t ts_ms,
                                       const std::string& boot_id);

  sql::Database db_;
  Identity identity_;
};

}  // namespace vend::fw
