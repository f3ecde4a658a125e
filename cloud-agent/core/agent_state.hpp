// Private to the agent core: its in-memory state and the functions that
// work on it. Every State member function runs inside a step, on the core's
// thread (AgentCore::step); nothing here locks, waits or publishes: messages
// to publish are queued in `effects` and carried out by AgentCore after the
// step; the only waits (group commits) happen in AgentCore, between steps.
//
// Memory is the working truth, the Repository its durable log: each change
// is applied to memory and its writes are submitted in the same step, so the log receives changes
// in the order memory saw them.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "vend/agent/agent_core.hpp"
#include "vend/agent/deadlines.hpp"
#include "vend/agent/device_book.hpp"
#include "vend/agent/device_rules.hpp"
#include "vend/agent/ops_feed.hpp"
#include "vend/agent/ops_views.hpp"
#include "vend/agent/order_book.hpp"
#include "vend/agent/order_rules.hpp"
#include "vend/agent/payments.hpp"
#include "vend/agent/reconcile.hpp"
#include "vend/agent/repository.hpp"
#include "vend/agent/restocks.hpp"
#include "vend/agent/snapshot_assembler.hpp"
#include "vend/agent/stock.hpp"
#include "vend/crypto.hpp"
#include "vend/log_limiter.hpp"
#include "vend/ops.hpp"
#include "vend/protocol.hpp"

namespace vend::agent {

namespace detail {

inline constexpr const char* kLog = "agent";
inline constexpr size_t kMaxLatencySamples = 10'000;  // between two take_metrics()

// What pay() does after the lock: wait for `wait`, then finish.
struct PayStep {
  Order answer;
  std::string outcome;
  Ticket wait;
};

// What a durable operator call waits for before answering.
template <typename T>
struct Durable {
  T value;
  Ticket wait;
};

// A message a step wants published. `order_id`: set for a dispense
// command, whose failure to go out is handed back (publish_failed).
struct Publish {
  Message message;
  std::string order_id;
};

// What a step leaves for AgentCore to carry out after it.
struct Effects {
  std::vector<Publish> publishes;
  std::vector<std::string> subscribes;    // topic filters, QoS 1
  std::vector<std::string> unsubscribes;  // cluster mode: devices no longer served
};

// Rate limit of a request to a device: true (and `last_ms` = now) when
// none was sent yet (last_ms == 0) or the last is at least `interval_ms` old.
inline bool take_turn(int64_t& last_ms, int64_t now_ms, int64_t interval_ms) {
  if (last_ms != 0 && now_ms - last_ms < interval_ms) return false;
  last_ms = now_ms;
  return true;
}
Ticket ready_ticket(Status status = {});
Status check_text(const std::string& what, const std::string& value, size_t max_len,
                  bool allow_empty);

}  // namespace detail

struct AgentCore::State {
  State(Repository& repo, const Clock& clock, Random& random, Logger& log, AgentOptions options);

  // ---- agent_core_state.cpp: start-up, writes, timers, metrics ----
  Status start();
  // Cluster mode: drops from `loaded` what `owns` does not accept.
  void keep_owned(LoadedState& loaded) const;
  Status load_devices(const LoadedState& loaded);
  void load_orders(const LoadedState& loaded);
  // An open order of the log: in the book, its token held, its deadline set.
  void restore_order(const Order& order);
  // ok when a mutation may proceed: started, storage healthy, queue room.
  Status writable();
  // Submits, and makes the ticket the last_write of every order set_state()
  // touched since the previous commit. A refused submit (writable() said
  // yes) fails storage.
  Ticket commit(Changeset changes);
  void fence_devices(Changeset& changes);
  void fail_storage(const std::string& why);
  // A write of `what` failed with `e`: refused by the fence (the shard's
  // lease moved: fenced, the shell rebuilds) or a storage failure.
  void write_failed(const Error& e, const std::string& what);
  // ---- cluster mode (AgentCore::Ownership) ----
  bool serves(const std::string& key) const { return !owns || owns(key); }
  // not_owner (message: the device id) for a device this core does not serve.
  Status owner_check(const std::string& device) const;
  // Subscribes to the device's event and status topics (cluster mode), once.
  void subscribe_device(const std::string& device);
  // The transition in memory (the book), the log, the ops feed; a finished
  // order's timers are cancelled.
  void set_state(OrderRec& rec, OrderState to, Changeset& changes, const std::string& detail);
  // What an answer about the order waits for: its latest durable-promising
  // write (ready when the order is not in memory: it was read from the log).
  Ticket durable_ticket(const std::string& order_id);
  Result<OrderRec*> find_or_load_order(const std::string& order_id);
  // One deadline timer per order (a new one replaces it), one resend timer
  // (kept if already pending); subjects are the orders' places in the book.
  void schedule_deadline(OrderRec& rec, TimerKind kind, int64_t at_ms);
  void schedule_resend(OrderRec& rec, int64_t at_ms);
  void cancel_timers(OrderRec& rec);
  // Queues the signed command (an effect); not_connected while the broker
  // connection is down (the caller keeps what it needs to re-send).
  Status publish_command(const DeviceRecord& device, const proto::Command& command,
                         const std::string& order_id = "");
  // A dispense command of `order_id` did not go out: re-sent later.
  void publish_failed(const std::string& order_id);
  detail::Effects take_effects();
  // The book's eviction; an evicted order's payments and token are forgotten.
  void evict_finished();
  AgentMetrics take_metrics();

  // ---- agent_core_orders.cpp ----
  // `client`: who asks (the open-reservation cap); `key`: the scoped
  // idempotency key ("" = none). `durable`: what the answer waits for (the
  // order's latest write; for a repeated key, that order's).
  Result<Order> create_order(const std::string& device, int slot, const std::string& client,
                             const std::string& key, Ticket& durable);
  Result<std::optional<Order>> find_by_idempotency_key(const std::string& key);
  // The slot, if the device is known, has it, and is online.
  Result<StockSlot*> sellable_slot(const std::string& device, int slot);
  OrderRec& open_reservation(const std::string& device, int slot, StockSlot& slot_rec,
                             const std::string& client, const std::string& key);
  Result<Order> cancel(const std::string& order_id);
  Result<Order> resolve_review(const std::string& order_id, bool dispensed, const std::string& by,
                               const std::string& note);
  void expire_reservation(OrderRec& rec, const std::string& why);
  std::vector<Order> list_orders(std::optional<OrderState> state, size_t limit,
                                 const std::string& device);
  // The order's token moves `from` -> `to` (nothing when equal), with the
  // stock's counters, into `changes`.
  void move_token(OrderRec& rec, TokenState from, TokenState to, Changeset& changes);
  // What rules:: decided for an order: the token moved (with the stock's
  // counters), the reason, the transition, the refund.
  void settle(OrderRec& rec, const rules::Settlement& settlement, Changeset& changes);

  // ---- agent_core_payments.cpp ----
  Result<detail::PayStep> pay(const std::string& order_id, const std::string& payment_id,
                              int64_t amount_cents);
  Result<std::optional<PaymentRecord>> find_payment(const std::string& payment_id);
  detail::PayStep dispatch_paid(OrderRec& rec, const std::string& payment_id, int64_t amount_cents);
  // The payment cannot be honoured (rules::decide_payment): recorded and
  // refunded; the order keeps its state unless the payment was late (then
  // it ends REFUNDED).
  detail::PayStep refund_payment(OrderRec& rec, const std::string& payment_id, int64_t amount_cents,
                                 const rules::PaymentDecision& decision);
  detail::PayStep refund_unknown_order(const std::string& order_id, const std::string& payment_id,
                                       int64_t amount_cents);
  static Order unknown_order(const std::string& order_id);
  Result<Order> finish_pay(const std::string& order_id, const detail::PayStep& step,
                           const Status& committed);
  void publish_dispense(OrderRec& rec);
  void refund_order(OrderRec& rec, const std::string& reason, Changeset& changes);

  // ---- agent_core_refunds.cpp: the refund outbox ----
  // Records a refund in `changes`; it enters the outbox at the next commit().
  void add_refund(Changeset& changes, StoredRefund refund);
  std::vector<RefundDelivery> take_due_refunds(size_t max);
  // Writes, counts, logs and alerts what `payments` decided of the attempt.
  void refund_attempted(const std::string& payment_id, RefundOutcome outcome,
                        const std::string& detail);

  // ---- agent_core_devices.cpp ----
  Result<detail::Durable<ProvisionedDevice>> provision_device(const std::string& id,
                                                              const std::vector<SlotSpec>& slots);
  std::vector<DeviceView> device_views();
  static DeviceView device_view(const DeviceRecord& d);
  Result<std::vector<SlotView>> slot_views(const std::string& device_id);
  Result<Ticket> set_slot(const std::string& device_id, const SlotSpec& slot);
  Result<detail::Durable<proto::RestockCommand>> request_restock(const std::string& device_id,
                                                                 int slot, int count);
  Result<std::string> publish_restock(const proto::RestockCommand& command);
  // The restocks not yet minted, of `device` ("" = every device), are sent
  // again: one whose command was lost (the broker was down, the agent
  // restarted) still reaches its machine, which keeps one restock per id
  // (a repeat is answered "duplicate" and changes nothing).
  void resend_restocks(const std::string& device);
  void add_slot(DeviceRecord& device, const SlotSpec& spec);

  // ---- agent_core_events.cpp: MQTT in, acks out ----
  void on_message(const Message& message);
  void on_event(const std::string& topic_device, const std::string& payload);
  // `live`: not a retained copy (its ts_ms is then a clock sample).
  void on_status(const std::string& topic_device, const std::string& payload, bool live);
  // Counts a rejected message; logs it through `reject_log` keyed by
  // (device, reason). `reason` is a short code, `detail` the full story.
  void reject_message(const std::string& device, std::string_view reason,
                      const std::string& detail);
  // Where the event falls in its stream (device_rules::decide_intake),
  // carried out; true when it is processed now. `what`: its name in logs.
  bool admit_event(DeviceRecord& device, const proto::DeviceEvent& event, const std::string& what);
  // `canonical`: the event's signed canonical JSON (kept for snapshots).
  // A snapshot's body is moved out of `event` (its token lists are not copied).
  Status apply_event(DeviceRecord& device, proto::DeviceEvent& event, const std::string& canonical,
                     Changeset& changes);
  // A status the core cannot use: rejected as reject_message does, and the
  // device (if known) asked for its status again.
  void reject_status(const std::string& device, std::string_view reason, const std::string& detail);
  // A status_request command, at most once per status_request_interval_ms.
  void request_status(DeviceRecord& device);
  // A verified message stamped `device_ts_ms` by the device: a skew sample;
  // raises or clears the clock_skew alert.
  void observe_clock(DeviceRecord& device, int64_t device_ts_ms);
  // tick(): after a connect, every device not online is asked once.
  void probe_presence();
  void want_ack(DeviceRecord& device);
  // The device's batched ack goes out ack_interval_ms from now (if not
  // already due); it joins acks_due, which tick() walks.
  void schedule_ack(DeviceRecord& device);
  // Tickets the due acks wait for (the caller waits outside the lock).
  std::vector<Ticket> due_ack_tickets();
  void flush_acks();

  // ---- agent_core_results.cpp: what devices report ----
  // An error (the order could not be read back) leaves the event unprocessed.
  Status on_dispense_result(DeviceRecord& device, const proto::DispenseResult& result,
                            Changeset& changes);
  // DISPENSED for an order settled otherwise: alert, fault row, counter.
  void report_contradiction(DeviceRecord& device, const OrderRec& rec, const std::string& what,
                            Changeset& changes);
  // A result that changes nothing, logged (`rec` null for kNoOrder).
  void ignore_result(const DeviceRecord& device, const OrderRec* rec, const std::string& what,
                     rules::ResultDecision::Ignored why);
  Status on_tokens(DeviceRecord& device, const proto::TokensMinted& minted, Changeset& changes);
  Result<std::vector<std::string>> fresh_tokens(const std::vector<std::string>& tokens);
  void on_fault(DeviceRecord& device, const proto::Fault& fault, Changeset& changes);

  // ---- agent_core_snapshots.cpp: snapshots, whole or in parts ----
  // A part is held in `snapshot_parts`; the whole snapshot (one message, or
  // its last part) is stored, settles overdue dispatches and is reconciled.
  void on_snapshot(DeviceRecord& device, const proto::DeviceEvent& event,
                   const std::string& canonical, proto::Snapshot snapshot, Changeset& changes);
  // A part the assembler dropped: logged (counted when inconsistent) and,
  // the first time for its snapshot, a new full snapshot is asked for.
  void snapshot_part_dropped(DeviceRecord& device, const proto::DeviceEvent& event,
                             const SnapshotAssembler::Added& added);

  // ---- agent_core_reconcile.cpp: applies reconcile::reconcile ----
  void reconcile(DeviceRecord& device, const proto::DeviceEvent& event, proto::Snapshot snapshot,
                 Changeset& changes);
  std::map<int, reconcile::CloudSlot> cloud_view(const DeviceRecord& device,
                                                 const proto::Snapshot& snapshot);
  void apply_reconcile(DeviceRecord& device, const reconcile::SlotChanges& c, Changeset& changes);
  void burn_lost_tokens(const std::string& device, const reconcile::SlotChanges& c,
                        Changeset& changes);
  void apply_alert(const std::string& device, const reconcile::AlertChange& alert);
  // ---- agent_core_reconcile_requests.cpp, _ledgers.cpp, _keys.cpp: when
  // reconciliation runs, seq gaps, ledgers, keys ----
  void schedule_reconcile(DeviceRecord& device, int64_t at_ms);
  // The first periodic request: staggered over one interval by device id,
  // so a fleet's requests do not all go out at once.
  int64_t first_reconcile_at(const std::string& device_id) const;
  void on_reconcile_timer(const std::string& device_id);
  Result<std::string> request_reconcile(const std::string& device_id);
  Result<std::string> reconcile_report(const std::string& device_id);
  // A gap the device's signed word (events_unavailable) says is gone
  // (device_rules::decide_intake): the seq skips to `gap.skip_to` durably,
  // the seq_gap alert is raised and a full snapshot requested; a resend from
  // its oldest held event when this event is not the next one.
  void skip_seq_gap(DeviceRecord& device, const device_rules::Intake& gap);
  // Retires the device's ledger for `ledger_id` (seq from 1), durably;
  // `replaced` (not the device's first ledger) raises ledger_replaced and
  // asks for a full snapshot.
  void switch_ledger(DeviceRecord& device, const std::string& ledger_id, bool replaced);
  void reject_decommissioned(const DeviceRecord& device, const char* what);
  // True when `mac` is the device's signature of `canonical` under its key,
  // or under its pending new key (which then replaces the old one, durably).
  bool verify_signed(DeviceRecord& device, const std::string& canonical, const std::string& mac);
  Result<detail::Durable<ProvisionedDevice>> rotate_key(const std::string& id);
  Result<detail::Durable<DecommissionedDevice>> decommission_device(const std::string& id);
  // A resend command from the first missing seq, at most once per
  // options.resend_interval_ms per device.
  void request_resend(DeviceRecord& device);

  // ---- agent_core_ops.cpp: operator views on vend/v1/ops/... ----
  void publish_ops(std::string topic, std::string payload, int qos, bool retained);
  // `from` is "" for a new order.
  void ops_order_event(const OrderRec& rec, const std::string& from);
  // The queued order events, as one message (tick, or a full batch).
  void flush_order_events();
  void mark_device_dirty(const std::string& device_id);
  // Raised once while active; cleared by clear_alert (both are published).
  void raise_alert(const std::string& device, int slot, const std::string& code,
                   const std::string& severity, const std::string& message);
  void clear_alert(const std::string& device, int slot, std::string_view code);
  bool alert_active(const std::string& device, int slot, std::string_view code) const;
  ops::DeviceStatus device_status(const DeviceRecord& device) const;
  ops::FleetSummary fleet_summary() const;
  // tick(): the dirty device statuses and the fleet summary, rate-limited.
  void publish_ops_views();

  // ---- agent_core_deadlines.cpp ----
  void tick_locked();
  // A timer that fell due: its subject's handler, if the timer is still its slot's.
  void fire_timer(const FiredTimer& timer);
  void on_dispatch_deadline(OrderRec& rec);
  void send_to_review(OrderRec& rec, const rules::Settlement& settlement);
  // A full snapshot request (at most one per device per second); `prefix`
  // names the reason in its request id ("chk-", "full-", "gap-").
  void request_check_snapshot(DeviceRecord& device, const char* prefix = "chk-");
  void resolve_overdue(DeviceRecord& device, int64_t device_ts_ms, const proto::Snapshot& snapshot,
                       Changeset& changes);
  void on_resend(OrderRec& rec);
  void sweep();

  // Injected.
  Repository& repo;
  const Clock& clock;
  Random& random;
  Logger& log;
  const AgentOptions options;

  detail::Effects effects;  // of the running step
  bool connected = false;   // the broker connection, as on_connection said
  bool started = false;
  int64_t presence_probe_due_mono_ms = 0;  // 0 = none pending (set on connect)
  bool storage_failed = false;
  // Cluster mode: what this core serves (null: everything, one agent), the
  // devices whose topics it subscribed, and the two ways it stops writing
  // until AgentCore::rebuild(): draining (a rebuild is under way) and fenced
  // (a write was refused by the fence).
  AgentCore::Ownership owns;
  std::set<std::string> subscribed_devices;
  bool draining = false;
  bool fenced = false;
  // Reservation expiries, dispatch deadlines, resends, reconcile requests.
  Deadlines deadlines;
  int64_t last_sweep_mono_ms = 0;

  DeviceBook devices;
  // Stock::slots_of each device (by DeviceRecord::index), kept once it
  // exists: the request path's look-up.
  std::vector<Stock::Slots*> device_slots;
  // The open orders and the recent finished ones, their indexes and counts.
  OrderBook orders;
  // Payment records by id (of the orders in memory) and the refund outbox.
  Payments payments;
  // The slots, their token pools and counters, and who holds which token.
  Stock stock;
  // The restocks requested and not minted yet, and those minted this run.
  Restocks restocks;

  // Operator views: when each retained view is due (monotonic time).
  ViewSchedule ops_views;
  // Devices with an ack scheduled (DeviceRecord::acks).
  std::set<std::string> acks_due;
  AlertBook alerts;
  OrderEventBatch pending_order_events;  // since the last tick

  std::vector<OrderRef> touched;  // orders set_state() changed since the last commit()
  AgentMetrics counters;          // the monotonic counters and latency samples
  // Lines an outsider can trigger (rejected messages): bounded rate.
  RateLimitedLog reject_log;
  // Snapshots in parts, joined per device (bounded; lost on a restart).
  SnapshotAssembler snapshot_parts;
};

}  // namespace vend::agent
