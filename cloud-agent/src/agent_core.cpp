// AgentCore: the public face. Every method takes the core lock and forwards
// to State; the waits for a group commit (pay, provisioning, slot changes,
// restock orders, acks) happen here, with the lock released.
#include "vend/agent/agent_core.hpp"

#include <algorithm>
#include <utility>

#include "agent_state.hpp"
#include "vend/topics.hpp"

namespace vend::agent {

AgentCore::AgentCore(Repository& repo, Transport& transport, const Clock& clock, Random& random,
                     Logger& log, AgentOptions options)
    : state_(std::make_unique<State>(repo, transport, clock, random, log, options)) {}

AgentCore::~AgentCore() = default;

Status AgentCore::start() {
  std::lock_guard lock(state_->mu);
  return state_->start();
}

// ---- orders ----

// A reservation is answered only once it is durable: a customer who got
// its id must find the order after any crash. Concurrent reservations share
// one group commit; the wait happens outside the lock.
Result<Order> AgentCore::create_order(const std::string& device, int slot,
                                      const std::string& client,
                                      const std::string& idempotency_key) {
  if (auto s = detail::check_text("idempotency key", idempotency_key, 128, true); !s.ok()) {
    return s.error();
  }
  std::string scoped;
  if (!idempotency_key.empty()) {
    if (auto s = detail::check_text("client", client, 128, false); !s.ok()) return s.error();
    scoped = client + "\n" + idempotency_key;
  }
  Ticket wait;
  Result<Order> order = make_error("unavailable", "not reserved");
  {
    std::lock_guard lock(state_->mu);
    order = state_->create_order(device, slot, scoped);
    if (!order.ok()) return order;
    wait = state_->durable_ticket(order->id);
  }
  Status committed = state_->repo.wait(wait);
  if (!committed.ok()) {
    std::lock_guard lock(state_->mu);
    state_->fail_storage("order " + order->id + ": " + committed.error().to_string());
    return make_error("unavailable", "order not stored: " + committed.error().message);
  }
  return order;
}

Result<Order> AgentCore::get_order(const std::string& order_id) {
  std::lock_guard lock(state_->mu);
  auto rec = state_->find_or_load_order(order_id);
  if (!rec.ok()) return rec.error();
  if (*rec == nullptr) return make_error("not_found", "no order '" + order_id + "'");
  return (*rec)->order;
}

Result<Order> AgentCore::pay(const std::string& order_id, const std::string& payment_id,
                             int64_t amount_cents) {
  detail::PayStep step;
  {
    std::lock_guard lock(state_->mu);
    auto r = state_->pay(order_id, payment_id, amount_cents);
    if (!r.ok()) return r.error();
    step = std::move(r).value();
  }
  Status committed = state_->repo.wait(step.wait);  // the group commit, outside the lock
  std::lock_guard lock(state_->mu);
  return state_->finish_pay(order_id, step, committed);
}

Result<Order> AgentCore::cancel(const std::string& order_id) {
  std::lock_guard lock(state_->mu);
  return state_->cancel(order_id);
}

Result<Order> AgentCore::resolve_review(const std::string& order_id, bool dispensed,
                                        const std::string& by, const std::string& note) {
  Ticket wait;
  Result<Order> order = make_error("unavailable", "not resolved");
  {
    std::lock_guard lock(state_->mu);
    order = state_->resolve_review(order_id, dispensed, by, note);
    if (!order.ok()) return order;
    wait = state_->durable_ticket(order_id);
  }
  Status committed = state_->repo.wait(wait);
  if (!committed.ok()) {
    std::lock_guard lock(state_->mu);
    state_->fail_storage("review of " + order_id + ": " + committed.error().to_string());
    return make_error("unavailable", "resolution not stored: " + committed.error().message);
  }
  return order;
}

Result<std::vector<StoredRefund>> AgentCore::list_refunds(std::optional<RefundState> state,
                                                          size_t limit) {
  // The repository's read connection has its own lock: no core lock needed.
  return state_->repo.refunds(state, limit);
}

Result<std::vector<Order>> AgentCore::list_orders(std::optional<OrderState> state, size_t limit) {
  std::lock_guard lock(state_->mu);
  return state_->list_orders(state, limit);
}

// ---- devices and slots ----

Result<ProvisionedDevice> AgentCore::provision_device(const std::string& device_id,
                                                      const std::vector<SlotSpec>& slots) {
  detail::Durable<ProvisionedDevice> step;
  {
    std::lock_guard lock(state_->mu);
    auto r = state_->provision_device(device_id, slots);
    if (!r.ok()) return r.error();
    step = std::move(r).value();
  }
  Status committed = state_->repo.wait(step.wait);
  if (!committed.ok()) {
    std::lock_guard lock(state_->mu);
    state_->fail_storage("provisioning " + device_id + ": " + committed.error().to_string());
    return make_error("unavailable", "device not stored: " + committed.error().message);
  }
  return step.value;
}

std::vector<DeviceView> AgentCore::devices() {
  std::lock_guard lock(state_->mu);
  return state_->device_views();
}

Result<std::vector<SlotView>> AgentCore::slots(const std::string& device_id) {
  std::lock_guard lock(state_->mu);
  return state_->slot_views(device_id);
}

Result<CatalogView> AgentCore::catalog(const std::string& device_id) {
  std::lock_guard lock(state_->mu);
  auto slots = state_->slot_views(device_id);
  if (!slots.ok()) return slots.error();
  auto dev = state_->devices.find(device_id);
  bool online = dev != state_->devices.end() && dev->second.online;
  return CatalogView{device_id, online, std::move(slots).value()};
}

Status AgentCore::set_slot(const std::string& device_id, const SlotSpec& slot) {
  Ticket wait;
  {
    std::lock_guard lock(state_->mu);
    auto r = state_->set_slot(device_id, slot);
    if (!r.ok()) return r.error();
    wait = *r;
  }
  Status committed = state_->repo.wait(wait);
  if (!committed.ok()) {
    std::lock_guard lock(state_->mu);
    state_->fail_storage("slot of " + device_id + ": " + committed.error().to_string());
    return make_error("unavailable", "slot not stored: " + committed.error().message);
  }
  return {};
}

Result<std::string> AgentCore::request_restock(const std::string& device_id, int slot, int count) {
  detail::Durable<proto::RestockCommand> step;
  {
    std::lock_guard lock(state_->mu);
    auto r = state_->request_restock(device_id, slot, count);
    if (!r.ok()) return r.error();
    step = std::move(r).value();
  }
  Status committed = state_->repo.wait(step.wait);
  std::lock_guard lock(state_->mu);
  if (!committed.ok()) {
    state_->fail_storage("restock " + step.value.restock_id + ": " + committed.error().to_string());
    return make_error("unavailable", "restock not stored: " + committed.error().message);
  }
  return state_->publish_restock(step.value);
}

Result<std::string> AgentCore::request_reconcile(const std::string& device_id) {
  std::lock_guard lock(state_->mu);
  return state_->request_reconcile(device_id);
}

Result<std::string> AgentCore::reconcile_report(const std::string& device_id) {
  std::lock_guard lock(state_->mu);
  return state_->reconcile_report(device_id);
}

// ---- refunds ----

std::vector<RefundDelivery> AgentCore::take_due_refunds(size_t max) {
  std::lock_guard lock(state_->mu);
  return state_->take_due_refunds(max);
}

void AgentCore::refund_attempted(const std::string& payment_id, RefundOutcome outcome,
                                 const std::string& detail) {
  std::lock_guard lock(state_->mu);
  state_->refund_attempted(payment_id, outcome, detail);
}

// ---- MQTT and time ----

void AgentCore::on_message(const Message& message) {
  std::lock_guard lock(state_->mu);
  state_->on_message(message);
}

void AgentCore::on_connection(bool connected) {
  std::lock_guard lock(state_->mu);
  state_->log.info(detail::kLog, connected ? "broker connection up" : "broker connection lost");
  if (!connected) return;
  state_->presence_probe_due_mono_ms =
      state_->clock.monotonic_ms() + std::max<int64_t>(1, state_->options.status_probe_delay_ms);
  // A SUBSCRIBE makes the broker send the retained presence statuses again;
  // a persistent session that still holds the subscription would not, and
  // every device would look offline after an agent restart. Commands that
  // failed to publish meanwhile have resend timers.
  for (const auto& filter : {topics::all_device_evt(), topics::all_device_status()}) {
    if (auto s = state_->transport.subscribe(filter, 1); !s.ok()) {
      state_->log.error(detail::kLog, "subscribe " + filter + ": " + s.error().to_string());
    }
  }
}

void AgentCore::tick() {
  std::vector<Ticket> acks;
  {
    std::lock_guard lock(state_->mu);
    state_->tick_locked();
    acks = state_->due_ack_tickets();
  }
  for (const auto& t : acks) (void)state_->repo.wait(t);  // usually committed already
  std::lock_guard lock(state_->mu);
  state_->flush_acks();
}

AgentMetrics AgentCore::take_metrics() {
  std::lock_guard lock(state_->mu);
  return state_->take_metrics();
}

Status AgentCore::health() {
  std::lock_guard lock(state_->mu);
  if (!state_->started) return make_error("unavailable", "not started");
  if (!state_->storage_failed && state_->repo.stats().failed_writes > 0) {
    state_->fail_storage("a repository write failed");
  }
  if (state_->storage_failed) {
    return make_error("unavailable", "a repository write failed; restart to recover");
  }
  return {};
}

}  // namespace vend::agent
