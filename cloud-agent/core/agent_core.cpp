// AgentCore: the public face. Every method runs its work as steps on the
// runner (step() forwards to the Coordinator's parts, then carries out the
// step's effects). Reservations and payments are answered from their
// commit's callback; the other waits for a group commit (provisioning, slot
// changes, restock orders, reviews) happen here, between steps.
#include "core/agent_core.hpp"

#include <algorithm>
#include <utility>

#include "core/coordinator.hpp"

namespace vend::agent {

namespace {

Error refused() {
  return make_error("unavailable", "the agent core is saturated or stopping; try again");
}

Error reader_refused() {
  return make_error("unavailable", "too many reads of the log waiting; try again");
}

bool must_read(const Error& e) { return e.code == kMustRead; }

}  // namespace

AgentCore::AgentCore(Repository& repo, Transport& transport, const Clock& clock, Random& random,
                     Logger& log, AgentOptions options, CoreRunner* runner, CoreRunner* reader,
                     CoreRunner* key_reader)
    : core_(std::make_unique<Coordinator>(repo, clock, random, log, std::move(options))),
      runner_(runner != nullptr ? *runner : inline_runner_),
      reader_(reader != nullptr ? *reader : inline_reader_),
      key_reader_(key_reader != nullptr ? *key_reader : reader_),
      transport_(transport) {}

AgentCore::~AgentCore() = default;

bool AgentCore::step(const std::function<void()>& body) {
  return runner_.run([&] {
    body();
    carry_out_effects();
  });
}

// After the step, on the core's thread: the step's messages go out in the
// order it queued them. A dispense or restock command that could not go out
// is handed back to the core (its resend timer); everything else is re-sent
// by the protocol (acks and requests are repeated, ops views re-published).
void AgentCore::carry_out_effects() {
  sync_known_devices();
  detail::Effects fx = core_->out.take_effects();
  for (const auto& filter : fx.unsubscribes) {
    if (auto s = transport_.unsubscribe(filter); !s.ok()) {
      core_->log.warn(detail::kLog, "unsubscribe " + filter + ": " + s.error().to_string());
    }
  }
  // All at once, one round trip: a rebuild that gains a thousand machines
  // does not wait for two thousand SUBACKs in turn.
  if (!fx.subscribes.empty()) {
    if (auto s = transport_.subscribe_many(fx.subscribes, 1); !s.ok()) {
      core_->log.error(detail::kLog, "subscribe to " + std::to_string(fx.subscribes.size()) +
                                         " topic filters: " + s.error().to_string());
    }
  }
  for (const auto& p : fx.publishes) {
    Status s = transport_.publish(p.message);
    if (s.ok()) continue;
    core_->log.debug(detail::kLog, "publish on " + p.message.topic + ": " + s.error().to_string());
    if (!p.order_id.empty()) core_->order_desk.publish_failed(p.order_id);
    if (!p.restock_device.empty()) core_->device_desk.restock_publish_failed(p.restock_device);
  }
}

// Records are never erased and are numbered in order (DeviceBook): the new
// ones since the last sync are the numbers from synced_devices_ on.
void AgentCore::sync_known_devices() {
  DeviceBook& book = core_->devices;
  bool rebuilt = synced_core_ != core_.get();
  if (!rebuilt && book.size() == synced_devices_) return;
  std::vector<std::string> ids;
  size_t from = rebuilt ? 0 : synced_devices_;
  ids.reserve(book.size() - from);
  for (size_t i = from; i < book.size(); ++i) {
    ids.push_back(book.at_index(static_cast<uint32_t>(i))->id);
  }
  if (rebuilt) {
    known_devices_.replace(ids);
  } else {
    known_devices_.add(ids);
  }
  synced_core_ = core_.get();
  synced_devices_ = book.size();
}

Status AgentCore::wait_durable(const Ticket& ticket, const std::string& what) {
  Status committed = core_->repo.wait(ticket);
  if (committed.ok()) return {};
  (void)step([&] { core_->writes.write_failed(committed.error(), what); });
  return make_error("unavailable", what + " not stored: " + committed.error().message);
}

Status AgentCore::start(Ownership owns) {
  Status out;
  if (!step([&] {
        core_->owns = std::move(owns);
        out = core_->start();
      })) {
    return refused();
  }
  return out;
}

// ---- several agents ----

void AgentCore::restrict(Ownership owns) {
  (void)step([&] { core_->owns = std::move(owns); });
  core_->repo.flush();
}

Status AgentCore::rebuild(Ownership owns, const std::function<void()>& drained) {
  if (!step([&] { core_->writes.draining = true; })) return refused();
  // Every write of the old state becomes final, and the after_durable()
  // callbacks of those writes have run (flush() returns after them), so the
  // steps they post are queued before the swap below and answer their
  // requests from the old state (the runner is FIFO).
  core_->repo.flush();
  if (drained) drained();
  // Read here, not in a step: the core answers meanwhile. Only this thread
  // replaces core_, so reading through it between steps is safe.
  auto loaded = core_->load(owns);  // failed: the old state stays drained until a retry
  if (!loaded.ok()) return loaded.error();
  Status out = refused();
  if (!step([&] {
        Coordinator& old = *core_;
        auto fresh =
            std::make_unique<Coordinator>(old.repo, old.clock, old.random, old.log, old.options);
        fresh->owns = std::move(owns);
        fresh->take_over_from(old);
        out = fresh->install(*loaded);
        fresh->keep_presence_of(old);
        core_ = std::move(fresh);
      })) {
    return refused();
  }
  return out;
}

Status AgentCore::gain(Ownership owns, const Ownership& gained,
                       const std::function<void()>& fenced) {
  if (fenced) fenced();
  auto loaded = core_->load(gained);
  if (!loaded.ok()) return loaded.error();
  Status out = refused();
  if (!step([&] {
        out = core_->absorb(*loaded);
        if (out.ok()) core_->owns = std::move(owns);
      })) {
    return refused();
  }
  return out;
}

bool AgentCore::fenced() {
  bool out = false;
  (void)step([&] { out = core_->writes.fenced; });
  return out;
}

std::optional<bool> AgentCore::storage_failed() {
  std::optional<bool> out;
  (void)step([&] { out = core_->writes.failed(); });
  return out;
}

// ---- orders ----

// A reservation is answered only once it is durable: a customer who got
// its id must find the order after any crash. Concurrent reservations share
// one group commit; nobody waits for it.
Result<std::string> AgentCore::scoped_key(const std::string& client,
                                          const std::string& idempotency_key) {
  if (auto s = detail::check_text("idempotency key", idempotency_key, 128, true); !s.ok()) {
    return s.error();
  }
  if (idempotency_key.empty()) return std::string();
  if (auto s = detail::check_text("client", client, 128, false); !s.ok()) return s.error();
  return client + "\n" + idempotency_key;
}

void AgentCore::create_order_async(const std::string& device, int slot, const std::string& client,
                                   const std::string& idempotency_key, OrderCallback done) {
  auto scoped = scoped_key(client, idempotency_key);
  if (!scoped.ok()) return done(scoped.error());
  auto reply = std::make_shared<OrderCallback>(std::move(done));
  bool posted = post_step([this, device, slot, client, key = *scoped, reply] {
    create_order_step(device, slot, client, key, reply, nullptr);
  });
  if (!posted) (*reply)(refused());
}

void AgentCore::create_order_step(const std::string& device, int slot, const std::string& client,
                                  const std::string& key,
                                  const std::shared_ptr<OrderCallback>& reply,
                                  const Result<std::optional<Order>>* key_read) {
  Ticket durable;
  auto order = core_->order_desk.create_order(device, slot, client, key, durable, key_read);
  if (!order.ok() && must_read(order.error()) && key_read == nullptr) {
    // The key is read on the reader, never here; the reservation is decided
    // in a later step with what it read.
    bool queued = key_reader_.post([this, device, slot, client, key, reply] {
      auto read = core_->repo.find_order_by_idempotency_key(key);
      bool again = post_step([this, device, slot, client, key, reply, read] {
        create_order_step(device, slot, client, key, reply, &read);
      });
      if (!again) (*reply)(refused());
    });
    if (!queued) (*reply)(reader_refused());
    return;
  }
  if (!order.ok()) return (*reply)(order);
  // Answered once durable: a customer who got its id finds the order after
  // any crash. The commit completes on the writer thread; nobody waits.
  core_->repo.after_durable(
      durable, [this, o = std::move(order).value(), reply](const Status& committed) {
        if (committed.ok()) return (*reply)(o);
        (void)post_step([this, e = committed.error(), what = "order " + o.id] {
          core_->writes.write_failed(e, what);
        });
        (*reply)(make_error("unavailable",
                            "order " + o.id + " not stored: " + committed.error().message));
      });
}

void AgentCore::pay_async(const std::string& order_id, const std::string& payment_id,
                          int64_t amount_cents, OrderCallback done) {
  auto reply = std::make_shared<OrderCallback>(std::move(done));
  bool posted = post_step([this, order_id, payment_id, amount_cents, reply] {
    auto first = core_->order_desk.pay(order_id, payment_id, amount_cents);
    if (!first.ok()) return (*reply)(first.error());
    auto paid = std::make_shared<detail::PayStep>(std::move(first).value());
    // The second step (publish the dispense once DISPATCHED is durable,
    // answer) runs on the core thread after the commit.
    core_->repo.after_durable(paid->wait, [this, order_id, paid, reply](const Status& committed) {
      bool again = post_step([this, order_id, paid, reply, committed] {
        (*reply)(core_->order_desk.finish_pay(order_id, *paid, committed));
      });
      if (!again) (*reply)(refused());
    });
  });
  if (!posted) (*reply)(refused());
}

Result<std::optional<Order>> AgentCore::read_log(
    CoreRunner& reader, const std::function<Result<std::optional<Order>>()>& read) {
  Result<std::optional<Order>> out = reader_refused();
  if (!reader.run([&] { out = read(); })) return reader_refused();
  return out;
}

template <typename T, typename Body>
Result<T> AgentCore::with_order_read(const std::string& order_id, Body body) {
  Result<T> out = refused();
  if (!step([&] { out = body(nullptr); })) return refused();
  if (out.ok() || !must_read(out.error())) return out;
  auto read = read_log(reader_, [&] { return core_->repo.find_order(order_id); });
  out = refused();
  if (!step([&] { out = body(&read); })) return refused();
  return out;
}

Result<Order> AgentCore::get_order(const std::string& order_id) {
  return with_order_read<Order>(order_id, [&](const LogRead* read) -> Result<Order> {
    auto rec = core_->order_desk.order_for_request(order_id, read);
    if (!rec.ok()) return rec.error();
    if (*rec == nullptr) return make_error("not_found", "no order '" + order_id + "'");
    return (*rec)->order;
  });
}

Result<Order> AgentCore::cancel(const std::string& order_id) {
  return with_order_read<Order>(
      order_id, [&](const LogRead* read) { return core_->order_desk.cancel(order_id, read); });
}

Result<Order> AgentCore::resolve_review(const std::string& order_id, bool dispensed,
                                        const std::string& by, const std::string& note,
                                        const AuditEntry& audit) {
  Ticket wait;
  auto order = with_order_read<Order>(order_id, [&](const LogRead* read) {
    core_->writes.attribute(audit);
    auto out = core_->order_desk.resolve_review(order_id, dispensed, by, note, read);
    core_->writes.unattribute();
    if (out.ok()) wait = core_->order_desk.durable_ticket(order_id);
    return out;
  });
  if (!order.ok()) return order;
  if (auto s = wait_durable(wait, "resolution of " + order_id); !s.ok()) return s.error();
  return order;
}

Result<std::vector<StoredRefund>> AgentCore::list_refunds(std::optional<RefundState> state,
                                                          size_t limit) {
  // The repository's read connection has its own lock: no step needed.
  return core_->repo.refunds(state, limit);
}

Result<std::vector<Order>> AgentCore::list_orders(std::optional<OrderState> state, size_t limit,
                                                  const std::string& device) {
  std::vector<Order> out;
  if (!step([&] { out = core_->order_desk.list_orders(state, limit, device); })) return refused();
  return out;
}

// Repository reads (their connection has its own lock): no step needed.
Result<OrderHistory> AgentCore::order_history(const std::string& order_id) {
  OrderHistory h;
  auto events = core_->repo.order_events(order_id);
  if (!events.ok()) return events.error();
  if (events->empty()) return make_error("not_found", "no order '" + order_id + "'");
  h.events = std::move(events).value();
  auto payments = core_->repo.payments_of(order_id);
  if (!payments.ok()) return payments.error();
  h.payments = std::move(payments).value();
  auto refunds = core_->repo.refunds_of(order_id);
  if (!refunds.ok()) return refunds.error();
  h.refunds = std::move(refunds).value();
  return h;
}

// ---- devices and slots ----

Result<ProvisionedDevice> AgentCore::provision_device(const std::string& device_id,
                                                      const std::vector<SlotSpec>& slots,
                                                      const AuditEntry& audit) {
  Result<detail::Durable<ProvisionedDevice>> r = refused();
  if (!step([&] {
        core_->writes.attribute(audit);
        r = core_->device_desk.provision_device(device_id, slots);
        core_->writes.unattribute();
      })) {
    return refused();
  }
  if (!r.ok()) return r.error();
  if (auto s = wait_durable(r->wait, "device " + device_id); !s.ok()) return s.error();
  return r->value;
}

Result<ProvisionedDevice> AgentCore::rotate_key(const std::string& device_id,
                                                const AuditEntry& audit) {
  Result<detail::Durable<ProvisionedDevice>> r = refused();
  if (!step([&] {
        core_->writes.attribute(audit);
        r = core_->device_desk.rotate_key(device_id);
        core_->writes.unattribute();
      })) {
    return refused();
  }
  if (!r.ok()) return r.error();
  if (auto s = wait_durable(r->wait, "key of " + device_id); !s.ok()) return s.error();
  return r->value;
}

Result<DecommissionedDevice> AgentCore::decommission_device(const std::string& device_id,
                                                            const AuditEntry& audit) {
  Result<detail::Durable<DecommissionedDevice>> r = refused();
  if (!step([&] {
        core_->writes.attribute(audit);
        r = core_->device_desk.decommission_device(device_id);
        core_->writes.unattribute();
      })) {
    return refused();
  }
  if (!r.ok()) return r.error();
  if (auto s = wait_durable(r->wait, "decommission of " + device_id); !s.ok()) return s.error();
  return r->value;
}

std::vector<DeviceView> AgentCore::devices() {
  std::vector<DeviceView> out;
  (void)step([&] { out = core_->device_desk.device_views(); });
  return out;
}

Result<DeviceView> AgentCore::device(const std::string& device_id) {
  Result<DeviceView> out = refused();
  if (!step([&] {
        auto* it = core_->devices.find(device_id);
        if (it == nullptr) {
          out = make_error("not_found", "no device '" + device_id + "'");
        } else {
          out = DeviceDesk::device_view(*it);
        }
      })) {
    return refused();
  }
  return out;
}

Result<std::vector<StoredFault>> AgentCore::faults(const std::string& device_id, size_t limit) {
  auto known = device(device_id);
  if (!known.ok()) return known.error();
  return core_->repo.faults(device_id, limit);
}

std::vector<ops::Alert> AgentCore::active_alerts() {
  std::vector<ops::Alert> out;
  (void)step([&] { out = core_->out.alerts().list(); });
  return out;
}

std::vector<ops::DeviceStatus> AgentCore::device_statuses() {
  std::vector<ops::DeviceStatus> out;
  (void)step([&] {
    out.reserve(core_->devices.size());
    for (const auto& [id, d] : core_->devices) out.push_back(core_->out.device_status(d));
  });
  return out;
}

Result<std::vector<SlotView>> AgentCore::slots(const std::string& device_id) {
  Result<std::vector<SlotView>> out = refused();
  if (!step([&] { out = core_->device_desk.slot_views(device_id); })) return refused();
  return out;
}

Result<CatalogView> AgentCore::catalog(const std::string& device_id) {
  Result<CatalogView> out = refused();
  if (!step([&] {
        auto slots = core_->device_desk.slot_views(device_id);
        if (!slots.ok()) {
          out = slots.error();
          return;
        }
        auto* dev = core_->devices.find(device_id);
        bool online = dev != nullptr && dev->online;
        out = CatalogView{device_id, online, std::move(slots).value()};
      })) {
    return refused();
  }
  return out;
}

Status AgentCore::set_slot(const std::string& device_id, const SlotSpec& slot,
                           const AuditEntry& audit) {
  Result<Ticket> r = refused();
  if (!step([&] {
        core_->writes.attribute(audit);
        r = core_->device_desk.set_slot(device_id, slot);
        core_->writes.unattribute();
      })) {
    return refused();
  }
  if (!r.ok()) return r.error();
  return wait_durable(*r, "slot of " + device_id);
}

Result<std::string> AgentCore::request_restock(const std::string& device_id, int slot, int count,
                                               const AuditEntry& audit) {
  Result<detail::Durable<proto::RestockCommand>> r = refused();
  if (!step([&] {
        core_->writes.attribute(audit);
        r = core_->device_desk.request_restock(device_id, slot, count);
        core_->writes.unattribute();
      })) {
    return refused();
  }
  if (!r.ok()) return r.error();
  if (auto s = wait_durable(r->wait, "restock " + r->value.restock_id); !s.ok()) return s.error();
  Result<std::string> out = refused();
  if (!step([&] { out = core_->device_desk.publish_restock(r->value); })) return refused();
  return out;
}

Result<std::string> AgentCore::request_reconcile(const std::string& device_id,
                                                 const AuditEntry& audit) {
  if (!audit.account.empty()) {
    // The request changes nothing in the log: its audit row alone, durable
    // before the machine is asked.
    Result<Ticket> t = refused();
    if (!step([&] { t = core_->device_desk.record_audit(device_id, audit); })) return refused();
    if (!t.ok()) return t.error();
    if (auto s = wait_durable(*t, "audit of " + device_id); !s.ok()) return s.error();
  }
  Result<std::string> out = refused();
  if (!step([&] { out = core_->device_desk.request_reconcile(device_id); })) return refused();
  return out;
}

Result<std::string> AgentCore::request_update(const std::string& device_id,
                                              const UpdateRequest& update,
                                              const AuditEntry& audit) {
  if (!audit.account.empty()) {
    // As a reconcile request: the audit row alone, durable before the
    // command goes out.
    Result<Ticket> t = refused();
    if (!step([&] { t = core_->device_desk.record_audit(device_id, audit); })) return refused();
    if (!t.ok()) return t.error();
    if (auto s = wait_durable(*t, "audit of " + device_id); !s.ok()) return s.error();
  }
  Result<std::string> out = refused();
  if (!step([&] { out = core_->device_desk.request_update(device_id, update); })) return refused();
  return out;
}

Result<std::string> AgentCore::reconcile_report(const std::string& device_id) {
  Result<std::string> out = refused();
  if (!step([&] { out = core_->device_desk.reconcile_report(device_id); })) return refused();
  return out;
}

// ---- refunds ----

std::vector<RefundDelivery> AgentCore::take_due_refunds(size_t max) {
  std::vector<RefundDelivery> out;
  (void)step([&] { out = core_->order_desk.take_due_refunds(max); });
  return out;
}

bool AgentCore::refund_attempted(const std::string& payment_id, RefundOutcome outcome,
                                 const std::string& detail, int64_t retry_after_ms) {
  // Not taken (the inbox full, nothing writable): offered again by the
  // caller. Still PENDING in the log, so a crash meanwhile sends it again
  // after the restart, under the same refund id (the gateway deduplicates).
  bool taken = false;
  if (!step([&] {
        taken = core_->order_desk.refund_attempted(payment_id, outcome, detail, retry_after_ms);
      })) {
    return false;
  }
  return taken;
}

// ---- MQTT and time ----

void AgentCore::on_message(const Message& message) {
  (void)step([&] { core_->event_desk.on_message(message); });
}

void AgentCore::on_connection(bool connected) {
  (void)step([&] { core_->on_connection(connected); });
}

void AgentCore::tick() {
  std::vector<Ticket> acks;
  (void)step([&] {
    core_->tick();
    // An inline caller (one thread: the deterministic world, unit tests)
    // waits for the writes the due acks cover — with manual commit that
    // wait is what commits them. The core thread never waits: flush_acks()
    // acks what is committed, the rest gets its ack on a later tick.
    if (&runner_ == &inline_runner_) acks = core_->event_desk.due_ack_tickets();
  });
  for (const auto& t : acks) (void)core_->repo.wait(t);
  (void)step([&] { core_->event_desk.flush_acks(); });
}

AgentMetrics AgentCore::take_metrics() {
  AgentMetrics out;
  (void)step([&] { out = core_->take_metrics(); });
  return out;
}

Status AgentCore::health() {
  Status out = refused();
  (void)step([&] { out = core_->health(); });
  return out;
}

}  // namespace vend::agent
