// Private to the agent core: orders and payments. A reservation takes the
// front token of its slot's pool (the one stock truth); a payment pays a
// RESERVED order, which is then dispatched once durable, or is recorded and
// refunded; what each later input does to an order is decided by the order
// rules (orders/order_rules.hpp) and applied here by settle(). Also the
// refund outbox's writes and the orders' timers (reservation expiry,
// dispatch deadline, resend) with the sweep that backs them up.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/core_env.hpp"
#include "deadlines/deadlines.hpp"
#include "devices/device_book.hpp"
#include "orders/order_book.hpp"
#include "orders/order_rules.hpp"
#include "payments/payments.hpp"
#include "stock/stock.hpp"

namespace vend::agent {

class Output;
class Writes;

// What the log held for a request (an order, or none), read off the core
// thread by AgentCore and handed back to the desk.
using LogRead = Result<std::optional<Order>>;

// The error code of a request the desk cannot answer from memory: the
// caller reads the log off the core thread (the message says what: an
// order id or a scoped key) and asks again with what it read. Never an
// answer to a client.
inline constexpr const char* kMustRead = "must_read";

class OrderDesk : public CoreEnv {
 public:
  OrderDesk(const CoreEnv& env, DeviceBook& devices, OrderBook& orders, Payments& payments,
            Stock& stock, Deadlines& deadlines, Writes& writes, Output& out)
      : CoreEnv(env),
        devices_(devices),
        orders_(orders),
        payments_(payments),
        stock_(stock),
        deadlines_(deadlines),
        writes_(writes),
        out_(out) {}
  OrderDesk(const OrderDesk&) = delete;
  OrderDesk& operator=(const OrderDesk&) = delete;

  // ---- start-up (order_desk.cpp) ----
  // The log's open and recent orders and payments, into memory; every open
  // DISPATCHED order's command is published again (a crash between its
  // commit and its publish lost it); returns how many.
  size_t load(const LoadedState& loaded);
  // Several agents: the same for the machines of shards just gained, added
  // to what memory holds (none of their orders is in memory: a core holds
  // only orders of machines it serves). Returns the commands re-sent.
  size_t absorb(const LoadedState& gained);

  // ---- reservations (order_desk.cpp) ----
  // `client`: who asks (the open-reservation cap); `key`: the scoped
  // idempotency key ("" = none). `durable`: what the answer waits for (the
  // order's latest write; for a repeated key, that order's). The cheap
  // checks come first: a device this core does not hold in memory (unknown,
  // or another instance's) is answered before the key is looked up. A key
  // not in memory when memory may be incomplete (cluster mode, evicted
  // orders) is kMustRead until `key_read` (find_order_by_idempotency_key of
  // the key) is given.
  Result<Order> create_order(const std::string& device, int slot, const std::string& client,
                             const std::string& key, Ticket& durable,
                             const LogRead* key_read = nullptr);
  // Requests naming an order (order_for_request: kMustRead until `read`,
  // find_order of the id, is given).
  Result<Order> cancel(const std::string& order_id, const LogRead* read = nullptr);
  Result<Order> resolve_review(const std::string& order_id, bool dispensed, const std::string& by,
                               const std::string& note, const LogRead* read = nullptr);
  std::vector<Order> list_orders(std::optional<OrderState> state, size_t limit,
                                 const std::string& device);
  // The order in memory, else read back from the log (finished long ago);
  // null when unknown. Reads on the core thread: for what devices and the
  // gateway report (authenticated), never for a client's request.
  Result<OrderRec*> find_or_load_order(const std::string& order_id);
  // The order a client's request names, never read here: in memory; null
  // when memory holds every order or no order can have the id
  // (could_be_order_id); else from `read` (what the log held, read off the
  // core thread), and kMustRead (message: the id) while it is null.
  Result<OrderRec*> order_for_request(const std::string& order_id, const LogRead* read);
  // What an answer about the order waits for: its latest durable-promising
  // write (ready when the order is not in memory: it was read from the log).
  Ticket durable_ticket(const std::string& order_id);
  // What rules:: decided for an order: the token moved (with the stock's
  // counters), the reason, the transition, the refund, into `changes`.
  void settle(OrderRec& rec, const rules::Settlement& settlement, Changeset& changes);

  // ---- payments (order_payments.cpp) ----
  Result<detail::PayStep> pay(const std::string& order_id, const std::string& payment_id,
                              int64_t amount_cents);
  // After the payment's commit: the dispense command goes out (once), the answer.
  Result<Order> finish_pay(const std::string& order_id, const detail::PayStep& step,
                           const Status& committed);
  // A dispense command of `order_id` did not go out: re-sent later.
  void publish_failed(const std::string& order_id);

  // ---- the refund outbox (order_refunds.cpp) ----
  std::vector<RefundDelivery> take_due_refunds(size_t max);
  // Writes, counts, logs and alerts what `payments` decided of the attempt:
  // true. False when nothing can be written now (write queue full, storage
  // failed, shards moving): nothing changed, the refund stays in flight and
  // the caller offers the same outcome again later.
  bool refund_attempted(const std::string& payment_id, RefundOutcome outcome,
                        const std::string& detail, int64_t retry_after_ms);

  // ---- what machines report of orders (order_results.cpp) ----
  // A dispense result of `device` (rules::decide_result), into the event's
  // changeset. An error (the order could not be read back) leaves the event
  // unprocessed.
  Status on_result(const DeviceRecord& device, const proto::DispenseResult& result,
                   Changeset& changes);
  // `device` switched to another ledger (EventDesk::switch_ledger, a
  // replacement): each of its DISPATCHED orders is marked
  // rules::kLedgerReplaced into `changes` (the switch's own changeset, so
  // both are durable together) and its command is sent no more. Returns
  // how many.
  size_t mark_ledger_replaced(const std::string& device, Changeset& changes);

  // ---- time (order_deadlines.cpp) ----
  // A timer of the order that fell due (expiry, dispatch deadline, resend),
  // if it is still its slot's.
  void fire_timer(const FiredTimer& timer);
  // The backstop scan of the open orders' deadlines.
  void sweep();
  // Publishes again the command of every DISPATCHED order of `device` ("":
  // of every device) that has not expired (the device deduplicates by order
  // id): on a connect to the broker, when the device comes online. Returns
  // how many.
  size_t republish_dispatched(const std::string& device);
  // The book's eviction; an evicted order's payments and token are forgotten.
  void evict_finished();
  // A full snapshot of `device` arrived: each of its overdue DISPATCHED
  // orders is settled or its result asked for again (rules::decide_overdue).
  void resolve_overdue(const std::string& device, int64_t device_ts_ms,
                       const proto::Snapshot& snapshot, Changeset& changes);

 private:
  // Sends the order's dispense command and schedules its resend: after
  // resend_delay() when it went out, after busy_retry_ms when it did not.
  // The command names the device's ledger and the last seq of it processed
  // here (DispenseCommand::ledger_id, ledger_seq) once the device has named
  // one. Nothing for an order dispatched under a replaced ledger.
  void publish_dispense(OrderRec& rec);
  // command_resend_ms doubled `sends` times, at most command_resend_max_ms.
  int64_t resend_delay(uint32_t sends) const;
  // The loaded orders, payments and counts, added to the book.
  void add_loaded(const LoadedState& loaded);
  // `rec`, or not_owner when its machine is not served here now.
  Result<OrderRec*> served(OrderRec* rec) const;
  // An open order of the log: in the book, its token held, its deadline set.
  void restore_order(const Order& order);
  // The order of a scoped key: in memory, else from `read` (kMustRead
  // while it is null and memory may be incomplete).
  Result<std::optional<Order>> find_by_idempotency_key(const std::string& key, const LogRead* read);
  // A finished order read from the log, into the book (null: none); not
  // served here (not_owner) or open yet not in memory (inconsistent): errors.
  Result<OrderRec*> adopt_stored(const std::string& order_id, const std::optional<Order>& stored);
  // The slot, if the device is known, has it, and is online.
  Result<StockSlot*> sellable_slot(const std::string& device, int slot);
  OrderRec& open_reservation(const std::string& device, int slot, StockSlot& slot_rec,
                             const std::string& client, const std::string& key);
  void expire_reservation(OrderRec& rec, const std::string& why);
  // settle() alone in its own changeset, committed; the order's answer waits
  // for that commit. Not writable: nothing changes, the reason is returned.
  Status settle_and_commit(OrderRec& rec, const rules::Settlement& settlement);
  // The transition in memory (the book), the log, the ops feed; a finished
  // order's timers are cancelled.
  void set_state(OrderRec& rec, OrderState to, Changeset& changes, const std::string& detail);
  // The order's token moves `from` -> `to` (nothing when equal), with the
  // stock's counters, into `changes`.
  void move_token(OrderRec& rec, TokenState from, TokenState to, Changeset& changes);

  Result<std::optional<PaymentRecord>> find_payment(const std::string& payment_id);
  detail::PayStep dispatch_paid(OrderRec& rec, const std::string& payment_id, int64_t amount_cents);
  // The payment cannot be honoured (rules::decide_payment): recorded and
  // refunded, with what `changes` holds already, in one commit; the order
  // keeps its state unless the payment was late (then it ends REFUNDED).
  detail::PayStep refund_payment(OrderRec& rec, const std::string& payment_id, int64_t amount_cents,
                                 const rules::PaymentDecision& decision, Changeset changes);
  // A RESERVED order past its deadline whose timer has not fired, found by
  // a payment: expired into the payment's `changes`. An order in another
  // state is a bug: "internal", nothing changed.
  Status expire_with_payment(OrderRec& rec, Changeset& changes);
  detail::PayStep refund_unknown_order(const std::string& order_id, const std::string& payment_id,
                                       int64_t amount_cents);
  static Order unknown_order(const std::string& order_id);
  void refund_order(OrderRec& rec, const std::string& reason, Changeset& changes);
  // Records a refund in `changes`; it enters the outbox at the next commit.
  void add_refund(Changeset& changes, StoredRefund refund);

  // The order's wall-clock time now, on the monotonic clock: the wall clock
  // read at its anchor plus the monotonic time since (OrderRec::wall_offset_ms).
  // What its deadlines are compared with; a wall-clock step does not move it.
  int64_t order_now(const OrderRec& rec) const;
  // Anchors the order's time to the clocks now (its deadlines are being set).
  void anchor_time(OrderRec& rec) const;
  // One deadline timer per order (at the order's wall time at_ms), one
  // resend timer (delay_ms from now); a new one replaces each. Timers run
  // on the monotonic clock; subjects are the orders' places in the book.
  void schedule_deadline(OrderRec& rec, TimerKind kind, int64_t at_ms);
  void schedule_resend(OrderRec& rec, int64_t delay_ms);
  void cancel_timers(OrderRec& rec);
  void on_dispatch_deadline(OrderRec& rec);
  void send_to_review(OrderRec& rec, const rules::Settlement& settlement);
  void on_resend(OrderRec& rec);
  // DISPENSED for an order settled otherwise: alert, fault row, counter.
  void report_contradiction(const DeviceRecord& device, const OrderRec& rec,
                            const std::string& what, Changeset& changes);
  // A result that changes nothing, logged (`rec` null for kNoOrder).
  void ignore_result(const DeviceRecord& device, const OrderRec* rec, const std::string& what,
                     rules::ResultDecision::Ignored why);

  DeviceBook& devices_;
  OrderBook& orders_;
  Payments& payments_;
  Stock& stock_;
  Deadlines& deadlines_;
  Writes& writes_;
  Output& out_;
  // Stock::slots_of each device (by DeviceRecord::index), kept once it
  // exists: the request path's look-up.
  std::vector<Stock::Slots*> device_slots_;
};

}  // namespace vend::agent
