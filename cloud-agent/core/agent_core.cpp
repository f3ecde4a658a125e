// AgentCore: the public face. Every method runs its work as steps on the
// runner (step() forwards to State, then carries out the step's effects);
// the waits for a group commit (reservations, payments, provisioning, slot
// changes, restock orders, reviews) happen here, between steps.
#include "vend/agent/agent_core.hpp"

#include <algorithm>
#include <utility>

#include "agent_state.hpp"
#include "vend/topics.hpp"

namespace vend::agent {

namespace {

Error refused() {
  return make_error("unavailable", "the agent core is saturated or stopping; try again");
}

}  // namespace

AgentCore::AgentCore(Repository& repo, Transport& transport, const Clock& clock, Random& random,
                     Logger& log, AgentOptions options, CoreRunner* runner)
    : state_(std::make_unique<State>(repo, clock, random, log, options)),
      runner_(runner != nullptr ? *runner : inline_runner_),
      transport_(transport) {}

AgentCore::~AgentCore() = default;

bool AgentCore::step(const std::function<void()>& body) {
  return runner_.run([&] {
    body();
    carry_out_effects();
  });
}

// After the step, on the core's thread: the step's messages go out in the
// order it queued them. A dispense command that could not go out is handed
// back to the core (its resend timer); everything else is re-sent by the
// protocol (acks and requests are repeated, ops views re-published).
void AgentCore::carry_out_effects() {
  detail::Effects fx = state_->take_effects();
  for (const auto& filter : fx.unsubscribes) {
    if (auto s = transport_.unsubscribe(filter); !s.ok()) {
      state_->log.warn(detail::kLog, "unsubscribe " + filter + ": " + s.error().to_string());
    }
  }
  for (const auto& filter : fx.subscribes) {
    if (auto s = transport_.subscribe(filter, 1); !s.ok()) {
      state_->log.error(detail::kLog, "subscribe " + filter + ": " + s.error().to_string());
    }
  }
  for (const auto& p : fx.publishes) {
    Status s = transport_.publish(p.message);
    if (s.ok()) continue;
    state_->log.debug(detail::kLog, "publish on " + p.message.topic + ": " + s.error().to_string());
    if (!p.order_id.empty()) state_->publish_failed(p.order_id);
  }
}

Status AgentCore::wait_durable(const Ticket& ticket, const std::string& what) {
  Status committed = state_->repo.wait(ticket);
  if (committed.ok()) return {};
  (void)step([&] { state_->write_failed(committed.error(), what); });
  return make_error("unavailable", what + " not stored: " + committed.error().message);
}

Status AgentCore::start(Ownership owns) {
  Status out;
  if (!step([&] {
        state_->owns = std::move(owns);
        out = state_->start();
      })) {
    return refused();
  }
  return out;
}

// ---- several agents ----

void AgentCore::restrict(Ownership owns) {
  (void)step([&] { state_->owns = std::move(owns); });
  state_->repo.flush();
}

Status AgentCore::rebuild(Ownership owns, const std::function<void()>& drained) {
  if (!step([&] { state_->draining = true; })) return refused();
  // Every write of the old state becomes final. Two flushes: the first
  // returns once its group's tickets are fulfilled, the second once that
  // group's after_durable() callbacks have run too (the writer is one
  // thread), so the steps they post are queued before the swap below and
  // answer their requests from the old state (the runner is FIFO).
  state_->repo.flush();
  state_->repo.flush();
  if (drained) drained();
  Status out = refused();
  if (!step([&] {
        State& old = *state_;
        auto fresh = std::make_unique<State>(old.repo, old.clock, old.random, old.log, old.options);
        fresh->owns = std::move(owns);
        fresh->connected = old.connected;
        fresh->counters = std::move(old.counters);
        fresh->counters.dispatch_latency_ms.clear();
        // The old subscriptions are the new state's to keep or drop.
        fresh->subscribed_devices = old.subscribed_devices;
        out = fresh->start();
        for (auto& [id, dev] : fresh->devices) {
          auto* was = old.devices.find(id);
          if (was == nullptr) continue;
          dev.online = was->online;
          dev.boot_id = was->boot_id;
          dev.last_seen_ms = was->last_seen_ms;
          dev.clock_skew = was->clock_skew;
        }
        for (auto it = fresh->subscribed_devices.begin(); it != fresh->subscribed_devices.end();) {
          if (fresh->devices.contains(*it)) {
            ++it;
            continue;
          }
          fresh->effects.unsubscribes.push_back(topics::device_evt(*it));
          fresh->effects.unsubscribes.push_back(topics::device_status(*it));
          it = fresh->subscribed_devices.erase(it);
        }
        state_ = std::move(fresh);
      })) {
    return refused();
  }
  return out;
}

bool AgentCore::fenced() {
  bool out = false;
  (void)step([&] { out = state_->fenced; });
  return out;
}

// ---- orders ----

// A reservation is answered only once it is durable: a customer who got
// its id must find the order after any crash. Concurrent reservations share
// one group commit; the wait happens between steps.
Result<std::string> AgentCore::scoped_key(const std::string& client,
                                          const std::string& idempotency_key) {
  if (auto s = detail::check_text("idempotency key", idempotency_key, 128, true); !s.ok()) {
    return s.error();
  }
  if (idempotency_key.empty()) return std::string();
  if (auto s = detail::check_text("client", client, 128, false); !s.ok()) return s.error();
  return client + "\n" + idempotency_key;
}

Result<Order> AgentCore::create_order(const std::string& device, int slot,
                                      const std::string& client,
                                      const std::string& idempotency_key) {
  auto scoped = scoped_key(client, idempotency_key);
  if (!scoped.ok()) return scoped.error();
  Ticket wait;
  Result<Order> order = refused();
  if (!step([&] { order = state_->create_order(device, slot, client, *scoped, wait); })) {
    return refused();
  }
  if (!order.ok()) return order;
  if (auto s = wait_durable(wait, "order " + order->id); !s.ok()) return s.error();
  return order;
}

void AgentCore::create_order_async(const std::string& device, int slot, const std::string& client,
                                   const std::string& idempotency_key, OrderCallback done) {
  auto scoped = scoped_key(client, idempotency_key);
  if (!scoped.ok()) return done(scoped.error());
  auto reply = std::make_shared<OrderCallback>(std::move(done));
  bool posted = post_step([this, device, slot, client, key = *scoped, reply] {
    Ticket durable;
    auto order = state_->create_order(device, slot, client, key, durable);
    if (!order.ok()) return (*reply)(order);
    // Answered once durable: a customer who got its id finds the order after
    // any crash. The commit completes on the writer thread; nobody waits.
    state_->repo.after_durable(
        durable, [this, o = std::move(order).value(), reply](Status committed) {
          if (committed.ok()) return (*reply)(o);
          (void)post_step([this, e = committed.error(), what = "order " + o.id] {
            state_->write_failed(e, what);
          });
          (*reply)(make_error("unavailable",
                              "order " + o.id + " not stored: " + committed.error().message));
        });
  });
  if (!posted) (*reply)(refused());
}

void AgentCore::pay_async(const std::string& order_id, const std::string& payment_id,
                          int64_t amount_cents, OrderCallback done) {
  auto reply = std::make_shared<OrderCallback>(std::move(done));
  bool posted = post_step([this, order_id, payment_id, amount_cents, reply] {
    auto first = state_->pay(order_id, payment_id, amount_cents);
    if (!first.ok()) return (*reply)(first.error());
    auto paid = std::make_shared<detail::PayStep>(std::move(first).value());
    // The second step (publish the dispense once DISPATCHED is durable,
    // answer) runs on the core thread after the commit.
    state_->repo.after_durable(paid->wait, [this, order_id, paid, reply](Status committed) {
      bool again = post_step([this, order_id, paid, reply, committed] {
        (*reply)(state_->finish_pay(order_id, *paid, committed));
      });
      if (!again) (*reply)(refused());
    });
  });
  if (!posted) (*reply)(refused());
}

Result<Order> AgentCore::get_order(const std::string& order_id) {
  Result<Order> out = refused();
  if (!step([&] {
        auto rec = state_->find_or_load_order(order_id);
        if (!rec.ok()) {
          out = rec.error();
        } else if (*rec == nullptr) {
          out = make_error("not_found", "no order '" + order_id + "'");
        } else {
          out = (*rec)->order;
        }
      })) {
    return refused();
  }
  return out;
}

Result<Order> AgentCore::pay(const std::string& order_id, const std::string& payment_id,
                             int64_t amount_cents) {
  Result<detail::PayStep> first = refused();
  if (!step([&] { first = state_->pay(order_id, payment_id, amount_cents); })) return refused();
  if (!first.ok()) return first.error();
  Status committed = state_->repo.wait(first->wait);  // the group commit, between the steps
  Result<Order> out = refused();
  if (!step([&] { out = state_->finish_pay(order_id, *first, committed); })) return refused();
  return out;
}

Result<Order> AgentCore::cancel(const std::string& order_id) {
  Result<Order> out = refused();
  if (!step([&] { out = state_->cancel(order_id); })) return refused();
  return out;
}

Result<Order> AgentCore::resolve_review(const std::string& order_id, bool dispensed,
                                        const std::string& by, const std::string& note) {
  Ticket wait;
  Result<Order> order = refused();
  if (!step([&] {
        order = state_->resolve_review(order_id, dispensed, by, note);
        if (order.ok()) wait = state_->durable_ticket(order_id);
      })) {
    return refused();
  }
  if (!order.ok()) return order;
  if (auto s = wait_durable(wait, "resolution of " + order_id); !s.ok()) return s.error();
  return order;
}

Result<std::vector<StoredRefund>> AgentCore::list_refunds(std::optional<RefundState> state,
                                                          size_t limit) {
  // The repository's read connection has its own lock: no step needed.
  return state_->repo.refunds(state, limit);
}

Result<std::vector<Order>> AgentCore::list_orders(std::optional<OrderState> state, size_t limit,
                                                  const std::string& device) {
  std::vector<Order> out;
  if (!step([&] { out = state_->list_orders(state, limit, device); })) return refused();
  return out;
}

// Repository reads (their connection has its own lock): no step needed.
Result<OrderHistory> AgentCore::order_history(const std::string& order_id) {
  OrderHistory h;
  auto events = state_->repo.order_events(order_id);
  if (!events.ok()) return events.error();
  if (events->empty()) return make_error("not_found", "no order '" + order_id + "'");
  h.events = std::move(events).value();
  auto payments = state_->repo.payments_of(order_id);
  if (!payments.ok()) return payments.error();
  h.payments = std::move(payments).value();
  auto refunds = state_->repo.refunds_of(order_id);
  if (!refunds.ok()) return refunds.error();
  h.refunds = std::move(refunds).value();
  return h;
}

// ---- devices and slots ----

Result<ProvisionedDevice> AgentCore::provision_device(const std::string& device_id,
                                                      const std::vector<SlotSpec>& slots) {
  Result<detail::Durable<ProvisionedDevice>> r = refused();
  if (!step([&] { r = state_->provision_device(device_id, slots); })) return refused();
  if (!r.ok()) return r.error();
  if (auto s = wait_durable(r->wait, "device " + device_id); !s.ok()) return s.error();
  return r->value;
}

Result<ProvisionedDevice> AgentCore::rotate_key(const std::string& device_id) {
  Result<detail::Durable<ProvisionedDevice>> r = refused();
  if (!step([&] { r = state_->rotate_key(device_id); })) return refused();
  if (!r.ok()) return r.error();
  if (auto s = wait_durable(r->wait, "key of " + device_id); !s.ok()) return s.error();
  return r->value;
}

Result<DecommissionedDevice> AgentCore::decommission_device(const std::string& device_id) {
  Result<detail::Durable<DecommissionedDevice>> r = refused();
  if (!step([&] { r = state_->decommission_device(device_id); })) return refused();
  if (!r.ok()) return r.error();
  if (auto s = wait_durable(r->wait, "decommission of " + device_id); !s.ok()) return s.error();
  return r->value;
}

std::vector<DeviceView> AgentCore::devices() {
  std::vector<DeviceView> out;
  (void)step([&] { out = state_->device_views(); });
  return out;
}

Result<DeviceView> AgentCore::device(const std::string& device_id) {
  Result<DeviceView> out = refused();
  if (!step([&] {
        auto* it = state_->devices.find(device_id);
        if (it == nullptr) {
          out = make_error("not_found", "no device '" + device_id + "'");
        } else {
          out = State::device_view(*it);
        }
      })) {
    return refused();
  }
  return out;
}

Result<std::vector<StoredFault>> AgentCore::faults(const std::string& device_id, size_t limit) {
  auto known = device(device_id);
  if (!known.ok()) return known.error();
  return state_->repo.faults(device_id, limit);
}

std::vector<ops::Alert> AgentCore::active_alerts() {
  std::vector<ops::Alert> out;
  (void)step([&] { out = state_->alerts.list(); });
  return out;
}

std::vector<ops::DeviceStatus> AgentCore::device_statuses() {
  std::vector<ops::DeviceStatus> out;
  (void)step([&] {
    out.reserve(state_->devices.size());
    for (const auto& [id, d] : state_->devices) out.push_back(state_->device_status(d));
  });
  return out;
}

Result<std::vector<SlotView>> AgentCore::slots(const std::string& device_id) {
  Result<std::vector<SlotView>> out = refused();
  if (!step([&] { out = state_->slot_views(device_id); })) return refused();
  return out;
}

Result<CatalogView> AgentCore::catalog(const std::string& device_id) {
  Result<CatalogView> out = refused();
  if (!step([&] {
        auto slots = state_->slot_views(device_id);
        if (!slots.ok()) {
          out = slots.error();
          return;
        }
        auto* dev = state_->devices.find(device_id);
        bool online = dev != nullptr && dev->online;
        out = CatalogView{device_id, online, std::move(slots).value()};
      })) {
    return refused();
  }
  return out;
}

Status AgentCore::set_slot(const std::string& device_id, const SlotSpec& slot) {
  Result<Ticket> r = refused();
  if (!step([&] { r = state_->set_slot(device_id, slot); })) return refused();
  if (!r.ok()) return r.error();
  return wait_durable(*r, "slot of " + device_id);
}

Result<std::string> AgentCore::request_restock(const std::string& device_id, int slot, int count) {
  Result<detail::Durable<proto::RestockCommand>> r = refused();
  if (!step([&] { r = state_->request_restock(device_id, slot, count); })) return refused();
  if (!r.ok()) return r.error();
  if (auto s = wait_durable(r->wait, "restock " + r->value.restock_id); !s.ok()) return s.error();
  Result<std::string> out = refused();
  if (!step([&] { out = state_->publish_restock(r->value); })) return refused();
  return out;
}

Result<std::string> AgentCore::request_reconcile(const std::string& device_id) {
  Result<std::string> out = refused();
  if (!step([&] { out = state_->request_reconcile(device_id); })) return refused();
  return out;
}

Result<std::string> AgentCore::reconcile_report(const std::string& device_id) {
  Result<std::string> out = refused();
  if (!step([&] { out = state_->reconcile_report(device_id); })) return refused();
  return out;
}

// ---- refunds ----

std::vector<RefundDelivery> AgentCore::take_due_refunds(size_t max) {
  std::vector<RefundDelivery> out;
  (void)step([&] { out = state_->take_due_refunds(max); });
  return out;
}

void AgentCore::refund_attempted(const std::string& payment_id, RefundOutcome outcome,
                                 const std::string& detail) {
  // Refused (stopping): the refund stays PENDING in the log and is
  // delivered again after the restart (the gateway deduplicates by id).
  (void)step([&] { state_->refund_attempted(payment_id, outcome, detail); });
}

// ---- MQTT and time ----

void AgentCore::on_message(const Message& message) {
  (void)step([&] { state_->on_message(message); });
}

void AgentCore::on_connection(bool connected) {
  (void)step([&] {
    State& st = *state_;
    st.log.info(detail::kLog, connected ? "broker connection up" : "broker connection lost");
    st.connected = connected;
    if (!connected) return;
    st.presence_probe_due_mono_ms =
        st.clock.monotonic_ms() + std::max<int64_t>(1, st.options.status_probe_delay_ms);
    // A SUBSCRIBE makes the broker send the retained presence statuses
    // again; a persistent session that still holds the subscription would
    // not, and every device would look offline after an agent restart.
    // Commands that failed to publish meanwhile have resend timers.
    if (st.owns) {  // cluster mode: this instance's machines only
      st.subscribed_devices.clear();
      for (const auto& [id, dev] : st.devices) st.subscribe_device(id);
      return;
    }
    for (const auto& filter : {topics::all_device_evt(), topics::all_device_status()}) {
      st.effects.subscribes.push_back(filter);
    }
  });
}

void AgentCore::tick() {
  std::vector<Ticket> acks;
  (void)step([&] {
    state_->tick_locked();
    // An inline caller (one thread: the deterministic world, unit tests)
    // waits for the writes the due acks cover — with manual commit that
    // wait is what commits them. The core thread never waits: flush_acks()
    // acks what is committed, the rest gets its ack on a later tick.
    if (&runner_ == &inline_runner_) acks = state_->due_ack_tickets();
  });
  for (const auto& t : acks) (void)state_->repo.wait(t);
  (void)step([&] { state_->flush_acks(); });
}

AgentMetrics AgentCore::take_metrics() {
  AgentMetrics out;
  (void)step([&] { out = state_->take_metrics(); });
  return out;
}

Status AgentCore::health() {
  Status out = refused();
  (void)step([&] {
    State& st = *state_;
    if (!st.started) {
      out = make_error("unavailable", "not started");
      return;
    }
    if (!st.storage_failed && st.repo.has_failed_writes()) {
      st.fail_storage("a repository write failed");
    }
    out = st.storage_failed
              ? Status(make_error("unavailable", "a repository write failed; restart to recover"))
              : Status();
  });
  return out;
}

}  // namespace vend::agent
