// AgentCore: the cloud agent's core. Orders (reserve -> pay -> dispatch ->
// settle), device events, presence, restock orders and provisioning, on an
// injected Clock, Random, Transport and Repository. No httplib, no Paho, no
// threads of its own, no mutex.
//
// Steps and effects: the core's state changes only inside steps, which run
// one at a time on the core's thread (CoreRunner, core/core_runner.hpp).
// A step does no network I/O: what it wants published (commands, acks, ops
// views, subscriptions) it returns as values, and AgentCore carries them out
// through the Transport right after the step (a dispense command that fails
// to go out is handed back to the core, which re-sends it later). The writes
// of a step are submitted to the Repository's group-commit queue.
//
// Thread-safety: with a threaded runner (the vend-agent core thread) every
// public method may be called from any thread; with InlineRunner (the
// default) from one thread only. Reservations and payments are answered
// through a callback once durable (create_order_async, pay_async: nobody
// waits; core/order_calls.hpp drives them to their answer for tests, the
// benchmarks and the simulation); the other methods that promise durability
// (resolve_review, provision_device, set_slot, request_restock) wait for
// their group commit on the caller's thread, between two steps, never
// inside one.
//
// Promise kept here: a reservation takes one token from the slot's pool (the
// one stock truth: a check-and-take on the in-memory pool, made durable by
// the order's conditional token move in the repository), so the cloud never
// sells more than the device minted tokens for; a dispense command is
// published only after the DISPATCHED state is durable; a paid order ends COMPLETED, REFUNDED or
// NEEDS_REVIEW, never lost; every transition is conditional on its
// from-state, so duplicates and races are harmless.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "contracts/accounts.hpp"
#include "contracts/order.hpp"
#include "contracts/refund.hpp"
#include "core/core_runner.hpp"
#include "devices/known_devices.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"
#include "vend/ops.hpp"
#include "vend/random.hpp"
#include "vend/result.hpp"
#include "vend/transport.hpp"

namespace vend::agent {

class Coordinator;
class Repository;
struct StoredRefund;
struct StoredPayment;
struct StoredFault;
struct OrderEvent;
enum class RefundState;

struct SlotView {
  std::string device;
  int slot = 0;
  std::string product;
  int64_t price_cents = 0;
  int capacity = 0;
  int64_t pool = 0;        // tokens for sale
  int64_t reserved = 0;    // held by RESERVED/PAID orders
  int64_t dispatched = 0;  // held by DISPATCHED orders
  int64_t sold = 0;        // COMPLETED
  int64_t burned = 0;      // consumed without a sale (FAILED, NEEDS_REVIEW)
};

// What a customer's app may see of a machine: presence and its slots.
struct CatalogView {
  std::string device;
  bool online = false;
  std::vector<SlotView> slots;
};

struct DeviceView {
  std::string id;
  bool online = false;
  std::string boot_id;
  int64_t last_seen_ms = 0;  // wall clock of the last message from it
  uint64_t last_processed_seq = 0;
  std::string ledger_id;              // of its current ledger ("" before one is named)
  bool key_rotation_pending = false;  // a new key is issued, not yet used by the device
  bool decommissioned = false;
  // Its clock minus the agent's, ms, estimated from its messages' ts_ms
  // (AgentOptions::clock_skew_*); nullopt before the first sample.
  std::optional<int64_t> clock_skew_ms;
};

// GET /v1/orders/{id}/history (AgentCore::order_history). Its element types
// are contracts/repository_types.hpp's: include it to use one.
struct OrderHistory {
  std::vector<OrderEvent> events;
  std::vector<StoredPayment> payments;
  std::vector<StoredRefund> refunds;
};

struct ProvisionedDevice {
  std::string id;
  std::string key_hex;  // returned once, at provisioning
};

// What decommission_device did.
struct DecommissionedDevice {
  std::string id;
  int64_t tokens_withdrawn = 0;  // pool tokens burned (out of sale for good)
  int64_t orders_cancelled = 0;  // RESERVED orders cancelled
};

struct AgentOptions {
  int64_t reservation_ttl_ms = 5 * 60 * 1000;
  // A client (X-Client-Id, else its address) may hold at most this many
  // RESERVED orders at once; one more is refused ("too_many_reservations",
  // HTTP 429), so nobody reserves a machine empty without paying. 0 = off.
  size_t max_open_reservations_per_client = 20;
  int64_t dispatch_ttl_ms = 60 * 1000;  // an order's expires_at = dispatch + this
  // The clock skew tolerated between agent and device, one bound for both:
  // a v2 dispense command carries expires_at + this as its hard bound, and
  // the agent decides "never dispensed" only on a device timestamp past it.
  int64_t expiry_skew_ms = 5000;
  // Commands go out in this protocol version: 2 (every command expires), or
  // 1 for a fleet with firmware older than v2 (docs/protocol.md, Versioning).
  int command_version = 2;
  // A v2 command other than a dispense expires this long (plus
  // expiry_skew_ms) after it is sent: the device refuses it after that.
  int64_t command_ttl_ms = 30 * 1000;
  int64_t sweep_interval_ms = 30 * 1000;  // backstop scan of stored deadlines
  int64_t busy_retry_ms = 2000;           // re-send a command a busy device refused
  // A published dispense command without a result is sent again
  // command_resend_ms after its first send, then after twice that, and so
  // on up to command_resend_max_ms, until a result arrives or the command
  // expires (the device deduplicates by order id). It is also sent again at
  // once on every connect of the agent to the broker and when its machine
  // comes online: a command the broker accepted may still be lost. Such a
  // re-send starts the backoff again from command_resend_ms. No re-send
  // waits more than half the command's remaining life (busy_retry_ms at
  // least), so a copy lost near the expiry is followed by another.
  int64_t command_resend_ms = 5000;
  int64_t command_resend_max_ms = 20 * 1000;
  int64_t ack_interval_ms = 50;  // cumulative acks are batched this long
  // A DISPATCHED order past expires_at + expiry_skew with no result: a full
  // snapshot is requested, and asked again this often while it stays so.
  int64_t dispatch_recheck_ms = 30 * 1000;
  // A DISPATCHED order still without a result this long after its dispatch
  // (the device never came back) goes to NEEDS_REVIEW, reason "no_result",
  // for an operator to resolve; its token is burned, never sold again.
  int64_t dispatch_review_ms = 30 * 60 * 1000;
  // Finished orders kept in memory (get_order/list_orders/idempotency
  // answers); older ones are read back from the repository on demand.
  size_t finished_orders_max = 100'000;
  // Several agents (an Ownership): start() and every rebuild load at most
  // this many of the owned machines' most recently finished orders instead.
  // There memory is never complete (a miss is read from the repository), and
  // a failover must cost in proportion to the moved machines, not to their
  // history (bench_fleet_scale: 100,000 made each rebuild take seconds).
  size_t cluster_finished_orders_max = 1'000;
  // Reconciliation: every device is asked for a (digest) snapshot this often,
  // staggered across the fleet by device id; 0 = only the snapshots the
  // devices send on their own and on-demand requests.
  int64_t reconcile_interval_ms = 10 * 60 * 1000;
  // An event seq beyond the next expected one: the device is asked to resend
  // from the first missing seq, at most this often per device (below the
  // devices' own retransmit interval, 10 s). The gap is skipped only when
  // the device answers that it no longer holds those events (a restored
  // database): then the seq_gap alert and a full snapshot repair.
  int64_t resend_interval_ms = 2000;
  // Operator views on vend/v1/ops/...: off, or at most one fleet summary and
  // one status per device per ops_interval_ms (order events and alerts are
  // published as they happen).
  bool ops_enabled = true;
  int64_t ops_interval_ms = 1000;
  // The refund outbox: a failed delivery is retried after base * 2^(n-1)
  // (at most max_ms, with jitter), and given up (alert refund_undeliverable)
  // after max_attempts.
  int refund_max_attempts = 20;
  int64_t refund_retry_base_ms = 1000;
  int64_t refund_retry_max_ms = 5 * 60 * 1000;
  // Rejected device messages are all counted (events_rejected_total) but
  // logged once per (device, reason) per this interval, with the number
  // suppressed (vend/log_limiter.hpp); 0 logs every one.
  int64_t reject_log_interval_ms = 60 * 1000;
  // Presence is only what a verified status says, and a device is asked to
  // publish its status again (status_request, at most once per device per
  // status_request_interval_ms) when the agent cannot trust what it has: a
  // status that failed verification (junk or a forgery over the retained
  // one), an `offline` of its current session (a replayed will is answered
  // at once by the live device), and, status_probe_delay_ms after each
  // connect, every device still not online (no retained status at all), in
  // up to three rounds status_request_interval_ms apart. Only a request
  // that goes out counts against the interval (none while disconnected).
  int64_t status_request_interval_ms = 5000;
  int64_t status_probe_delay_ms = 3000;
  // Device clock skew: every verified event and live status gives a sample
  // ts_ms - agent wall clock (= skew - delivery delay); the estimate is the
  // largest sample of the last clock_skew_window_ms (at most 32 samples),
  // so delay and re-sent old events never inflate it. Beyond
  // clock_skew_alert_ms either way the `clock_skew` alert is raised (cleared
  // below 80% of it): below expiry_skew_ms, so it warns before commands
  // start expiring early or running late.
  int64_t clock_skew_alert_ms = 2000;
  int64_t clock_skew_window_ms = 10 * 60 * 1000;
  // Several agents: this instance's id, named in the ops views (the owner of
  // each machine's status; the fleet summary goes to
  // vend/v1/ops/fleet/{instance}). "" for one agent.
  std::string instance_id;
};

// Counters for /metrics: a copy taken on the core thread (take_metrics()),
// rendered by the HTTP side.
struct AgentMetrics {
  std::vector<std::pair<std::string, int64_t>> orders_by_state;  // current counts
  int64_t reservations_total = 0;
  int64_t reservations_rejected_total = 0;            // sold out / offline / no broker
  int64_t reservations_broker_unreachable_total = 0;  // of those: no broker connection
  int64_t events_processed_total = 0;
  int64_t events_rejected_total = 0;  // bad MAC, unknown device, malformed
  int64_t duplicate_events_total = 0;
  std::vector<double> dispatch_latency_ms;  // paid -> result, since the last take
  int64_t stock_total = 0;                  // sum of pools
  int devices_online = 0;
  bool storage_failed = false;  // see AgentCore::health()
  // Reconciliation.
  int64_t reconcile_runs_total = 0;
  int64_t tokens_added_total = 0;             // tokens the cloud lacked, added to pools
  int64_t tokens_removed_total = 0;           // tokens the devices no longer had
  int64_t seq_gaps_total = 0;                 // gaps skipped on the device's events_unavailable
  int64_t ledgers_replaced_total = 0;         // new device ledgers (reflash, new board)
  int64_t retired_ledger_events_total = 0;    // events of a replaced ledger (results judged)
  int64_t diverged_events_total = 0;          // events under a seq processed with other content
  int64_t key_rotations_total = 0;            // devices that took their new key
  int64_t decommissioned_messages_total = 0;  // messages of decommissioned devices, refused
  int64_t resend_requests_total = 0;          // resend commands sent for a seq gap
  int64_t status_requests_total = 0;          // status_request commands sent
  int64_t restocks_resent_total = 0;          // restock commands sent again (not minted yet)
  // DISPENSED results for orders already settled otherwise (alerted).
  int64_t contradictions_total = 0;
  // device -> clock skew estimate (ms), for devices with one.
  std::vector<std::pair<std::string, int64_t>> device_clock_skew_ms;
  int64_t alerts_raised_total = 0;
  // The refund outbox.
  int64_t refunds_pending = 0;  // current
  int64_t refund_attempts_total = 0;
  int64_t refunds_delivered_total = 0;
  int64_t refunds_given_up_total = 0;
  std::vector<std::pair<std::string, int64_t>> alerts_active;  // code -> active count
};

// Error codes (they become HTTP errors in the shell): not_found,
// device_offline, sold_out, unknown_slot, invalid_state, conflict,
// bad_request, unavailable.
class AgentCore {
 public:
  // `runner`: where the steps run; nullptr = InlineRunner (one caller
  // thread). `reader`: where the log is read for clients' requests that
  // memory cannot answer (an order id not in memory in cluster mode or
  // after eviction), off the core's thread; `key_reader` the same for the
  // idempotency keys of reservations (nullptr: `reader`). Their steps are
  // bounded (a refused one is answered "unavailable"); nullptr = the
  // caller's thread (InlineRunner). All must outlive the core.
  AgentCore(Repository& repo, Transport& transport, const Clock& clock, Random& random, Logger& log,
            AgentOptions options = {}, CoreRunner* runner = nullptr, CoreRunner* reader = nullptr,
            CoreRunner* key_reader = nullptr);
  ~AgentCore();
  AgentCore(const AgentCore&) = delete;
  AgentCore& operator=(const AgentCore&) = delete;

  // Which devices this core serves, when several agents share the fleet
  // (docs/deployment.md, "Several agents"): true for the ids of the devices
  // whose shards this instance holds. A record without a device (a payment
  // or refund of an order nobody knows) is asked about by its order id.
  using Ownership = std::function<bool(const std::string& key)>;

  // Loads devices, slots, pools, open orders and processed seqs from the
  // repository, and schedules every
  // stored deadline. Call once before anything else. With `owns` (cluster
  // mode) only what it accepts is loaded and served: a request or message
  // about another device is answered "not_owner" (its message is the
  // device id; the HTTP front redirects to the owner) and the core
  // subscribes to the topics of its own devices only, not to the fleet's.
  Status start(Ownership owns = nullptr);

  // ---- several agents (cluster mode) ----
  // Stops serving what `owns` rejects (shards about to be released), at
  // once, and returns once every write submitted before it is final.
  void restrict(Ownership owns);
  // Rebuilds the whole state from the repository for what `owns` accepts
  // (shards gained or lost): the old state takes no new write, its queued
  // writes commit and their answers go out, `drained` runs (the shell sets
  // the repository's new fence there), the log is read on the caller's
  // thread (the core meanwhile answers from the old state and refuses
  // writes), then the new state — open orders, pools, deadlines, refunds —
  // replaces the old in one step. Presence, clock skew and counters of
  // devices kept carry over; subscriptions follow.
  Status rebuild(Ownership owns, const std::function<void()>& drained = {});
  // Shards gained, none lost and every kept one at the same epoch: only the
  // machines `gained` accepts are read from the repository (on the caller's
  // thread, after `fenced` ran: the shell sets the new fence there, a
  // superset of the old), then added to memory in one step, and `owns`
  // becomes what the core serves. The kept machines are served throughout:
  // their writes go on, nothing of theirs is read again. A failover costs
  // the moved machines, not the instance's share of the fleet.
  Status gain(Ownership owns, const Ownership& gained, const std::function<void()>& fenced = {});
  // True once a write was refused by the fence (the lease of its shard
  // moved): the core changes nothing more until rebuild().
  bool fenced();
  // True once a repository write failed (see health()): asking latches it,
  // so that the core changes nothing more until rebuild() even after
  // Repository::recover(). nullopt when the step was refused (a full
  // queue): ask again later.
  std::optional<bool> storage_failed();

  // ---- orders (HTTP) ----
  Result<Order> get_order(const std::string& order_id);

  // Reservations and payments are answered later: `done` is called exactly
  // once, once the answer is durable — from the core thread or the
  // repository's writer thread, so it must be quick (complete an HTTP
  // reply). No thread waits for the commit meanwhile. With InlineRunner
  // `done` may run before the call returns, and a payment's second step
  // runs on the thread that commits (the writer, unless manual_commit):
  // tests and the simulation use CallerRunner (core/order_calls.hpp).
  using OrderCallback = std::function<void(Result<Order>)>;
  // Reserves one item: one token leaves the pool. Idempotency keys are
  // scoped per `client` (1..128 printable ASCII, required with a key): the
  // same non-empty key from the same client returns the same order, from
  // another client it is another order. Stored as "<client>\n<key>" (no
  // printable byte is '\n', so two scopes never meet); keys stored before
  // scoping match no client.
  void create_order_async(const std::string& device, int slot, const std::string& client,
                          const std::string& idempotency_key, OrderCallback done);
  // A verified payment notification. Idempotent per payment_id. RESERVED ->
  // PAID -> DISPATCHED (durable, then the command is published); EXPIRED ->
  // REFUNDED. Every notification is recorded, for an unknown order too, and
  // one that cannot be honoured gets a refund (payment_outcome says which).
  // Two steps: the first commits, the second (posted after that commit)
  // publishes the dispense and answers.
  void pay_async(const std::string& order_id, const std::string& payment_id, int64_t amount_cents,
                 OrderCallback done);
  Result<Order> cancel(const std::string& order_id);
  // An operator's decision on a NEEDS_REVIEW order: `dispensed` -> COMPLETED
  // (the token counts as sold), otherwise -> REFUNDED (a refund of the
  // payment is recorded). `by` and `note` are kept in the order's history.
  // Answers after the commit; a repeat of the same decision is answered
  // from the order, the other decision is invalid_state.
  Result<Order> resolve_review(const std::string& order_id, bool dispensed, const std::string& by,
                               const std::string& note, const AuditEntry& audit = {});
  // Newest first, at most `limit` (0: 100; at most 1000); of one device
  // when `device` is not empty. From memory: the open orders and the most
  // recent finished ones (AgentOptions::finished_orders_max).
  Result<std::vector<Order>> list_orders(std::optional<OrderState> state, size_t limit,
                                         const std::string& device = {});
  // Everything the log holds about one order, oldest first: its state
  // changes (with who resolved a review and why), payments and refunds.
  // not_found when the log has no event of it (from the log: committed).
  Result<OrderHistory> order_history(const std::string& order_id);
  // Refunds and their delivery state, most recently updated first (from the
  // log: what is committed).
  Result<std::vector<StoredRefund>> list_refunds(std::optional<RefundState> state, size_t limit);

  // ---- operator actions ----
  // Every method below that changes something (resolve_review above too)
  // takes the operator's `audit` row (contracts/accounts.hpp: who, what,
  // about which machine or order, from where; the core stamps the time):
  // it is written in the changeset of the action, so both commit or
  // neither, before the answer. An `audit` without an account writes no
  // row (callers other than the HTTP API: tests, the simulation). A
  // reconcile request changes nothing in the log: its row is made durable
  // first, then the request goes to the machine.

  // ---- devices and slots (HTTP, operator) ----
  Result<ProvisionedDevice> provision_device(const std::string& device_id,
                                             const std::vector<SlotSpec>& slots,
                                             const AuditEntry& audit = {});
  // Key rotation: a new key for the device (returned once), accepted beside
  // its current key until the device signs a message with it; from then on
  // the old key is refused and commands are signed with the new one. A
  // second rotation before that replaces the pending key. not_found,
  // decommissioned.
  Result<ProvisionedDevice> rotate_key(const std::string& device_id, const AuditEntry& audit = {});
  // Takes the device out of service for good: its pool tokens are burned,
  // its RESERVED orders cancelled, its key revoked (its events and statuses
  // are refused, reason `decommissioned`), and its id stays taken. conflict
  // while a PAID or DISPATCHED order of it is open (the machine may still
  // dispense it), or when decommissioned already; not_found.
  Result<DecommissionedDevice> decommission_device(const std::string& device_id,
                                                   const AuditEntry& audit = {});
  std::vector<DeviceView> devices();
  // One device of devices(); not_found.
  Result<DeviceView> device(const std::string& device_id);
  // The device's faults (dispense contradictions, jams reported...), most
  // recent first, at most `limit` (from the log); not_found for an unknown
  // device.
  Result<std::vector<StoredFault>> faults(const std::string& device_id, size_t limit);
  // The alerts raised and not cleared, by device, slot and code.
  std::vector<ops::Alert> active_alerts();
  // Every device as the ops topics show it (vend/ops.hpp DeviceStatus:
  // slots, outbox, last verdict), in one step: the fleet summary and the
  // paged fleet table (GET /v1/fleet).
  std::vector<ops::DeviceStatus> device_statuses();
  Result<std::vector<SlotView>> slots(const std::string& device_id);
  // The device's presence and slots under one lock (the public catalog);
  // not_found for an unknown device.
  Result<CatalogView> catalog(const std::string& device_id);
  Status set_slot(const std::string& device_id, const SlotSpec& slot, const AuditEntry& audit = {});
  // Sends a signed restock order to the device; returns the restock id.
  Result<std::string> request_restock(const std::string& device_id, int slot, int count,
                                      const AuditEntry& audit = {});

  // ---- reconciliation (HTTP, operator) ----
  // Asks an online device for a full snapshot; the reconciliation report
  // follows when it arrives. Returns the snapshot request id.
  Result<std::string> request_reconcile(const std::string& device_id, const AuditEntry& audit = {});
  // The device's latest reconciliation report as JSON (vend/ops.hpp
  // ReconcileReport); not_found before its first one.
  Result<std::string> reconcile_report(const std::string& device_id);

  // ---- firmware updates (HTTP, operator) ----
  // Sends an `update` command to an online device; returns its update id.
  // The device reports progress as update_status events, kept with its
  // faults (code "update_<state>").
  Result<std::string> request_update(const std::string& device_id, const UpdateRequest& update,
                                     const AuditEntry& audit = {});

  // ---- refunds (the shell's refund sender) ----
  // Takes up to `max` refunds due for delivery now (durable, not in
  // flight, past their backoff) and marks them in flight.
  std::vector<RefundDelivery> take_due_refunds(size_t max);
  // The outcome of delivering a refund take_due_refunds() gave out
  // (`retry_after_ms`: the gateway's Retry-After, 0: none). True once the
  // core took it (written, or the refund is not in flight here any more);
  // false when the step was refused or nothing can be written now: the
  // refund stays in flight and the caller offers the same outcome again
  // (RefundSender does, before it takes more).
  bool refund_attempted(const std::string& payment_id, RefundOutcome outcome,
                        const std::string& detail, int64_t retry_after_ms = 0);

  // ---- MQTT ----
  // The shell subscribes to topics::all_device_evt() and all_device_status()
  // and hands every message here.
  void on_message(const Message& message);
  // The transport's connection changed. On every connect the core (re)
  // subscribes to both filters itself: the SUBSCRIBE makes the broker send
  // the retained presence statuses again, which a persistent session that
  // still holds the subscription would not (devices would look offline
  // after an agent restart). Subscribing in the shell as well is harmless.
  void on_connection(bool connected);

  // Whether this core holds the machine `device` in memory (every machine
  // it serves), as of its last step. Any thread; never waits for the core:
  // the HTTP edge answers requests about unknown ids without a step.
  bool knows_device(const std::string& device) const { return known_devices_.contains(device); }

  // Fires due deadlines, runs the periodic sweep, flushes batched acks.
  void tick();

  AgentMetrics take_metrics();

  // ok, or "unavailable" once a repository write failed: memory then holds
  // changes the log lacks, so the core stops changing anything (every
  // mutation answers "unavailable", events are left unacknowledged) until
  // the process is restarted and rebuilds its state from the log. For
  // /healthz.
  Status health();

 private:
  // Runs `body` as one step on the runner, then carries out its effects.
  // False when the runner refused it (body never ran).
  bool step(const std::function<void()>& body);
  // The same, queued: returns at once; false when refused (never runs).
  // A template so the step is one closure (one allocation), not a
  // std::function wrapped in another.
  template <typename Body>
  bool post_step(Body body) {
    return runner_.post([this, body = std::move(body)]() mutable {
      body();
      carry_out_effects();
    });
  }
  // Runs `read` (a read of the log) on `reader` and returns what it read;
  // "unavailable" when the reader refused it.
  Result<std::optional<Order>> read_log(CoreRunner& reader,
                                        const std::function<Result<std::optional<Order>>()>& read);
  // A request about an order: `body(read)` as a step, and when memory
  // cannot answer it (kMustRead), the order is read off the core's thread
  // and `body` runs again with what was read.
  template <typename T, typename Body>
  Result<T> with_order_read(const std::string& order_id, Body body);
  // create_order_async's step: the reservation (with what was read of its
  // key, once read), answered once durable; a key memory cannot answer is
  // read on the reader, then this runs again.
  void create_order_step(const std::string& device, int slot, const std::string& client,
                         const std::string& key, const std::shared_ptr<OrderCallback>& reply,
                         const Result<std::optional<Order>>* key_read);
  // create_order_async's checks of the key and the client: the scoped key.
  static Result<std::string> scoped_key(const std::string& client,
                                        const std::string& idempotency_key);
  void carry_out_effects();
  // After a step: machines added to the core's book (or a rebuilt core)
  // into known_devices_.
  void sync_known_devices();
  // Waits for `ticket` (between steps); a failed commit fail-stops the core
  // and gives the "unavailable" error naming `what`.
  Status wait_durable(const std::shared_future<Status>& ticket, const std::string& what);

  std::unique_ptr<Coordinator> core_;  // the core's state and its parts (core/coordinator.hpp)
  InlineRunner inline_runner_;
  InlineRunner inline_reader_;
  CoreRunner& runner_;
  CoreRunner& reader_;
  CoreRunner& key_reader_;
  Transport& transport_;
  KnownDevices known_devices_;
  const Coordinator* synced_core_ = nullptr;  // whose book known_devices_ holds
  size_t synced_devices_ = 0;                 // how many of its records
};

}  // namespace vend::agent
