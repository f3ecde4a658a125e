// The agent core in cluster mode (AgentCore::Ownership): it loads and
// serves only the machines it owns, answers "not_owner" (naming the
// machine) for the others, subscribes to its own machines' topics only,
// stops serving what restrict() takes away, and rebuild() brings the state
// of newly owned machines from the log — open orders, pools — while the
// presence of the machines it kept carries over.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "agent_rig.hpp"
#include "orders/order_ids.hpp"
#include "test_support.hpp"
#include "vend/random.hpp"
#include "vend/topics.hpp"

namespace vend::agent {
namespace {

using vend::agent::test::AgentRig;
using vend::agent::test::DeviceSim;

const std::vector<SlotSpec> kSlots = {{1, "cola", 150, 10}};

AgentCore::Ownership only(std::set<std::string> devices) {
  return [devices](const std::string& key) { return devices.count(key) != 0; };
}

// The rig's agent restarted as one of several instances, owning `owns`;
// `reader`: where it reads the log for clients' requests (null: inline).
void restart_owning(AgentRig& rig, AgentCore::Ownership owns,
                    AgentOptions options = vend::agent::test::test_agent_options(),
                    CoreRunner* reader = nullptr) {
  rig.crash_agent();
  auto r = Repository::open(rig.dir.file("agent.db"), rig.repo_options, rig.log);
  REQUIRE(r.ok());
  rig.repo = std::move(r).value();
  rig.runner = std::make_unique<CallerRunner>();
  rig.client = rig.bus.make_client("vend-agent-a", std::nullopt, true);
  rig.core = std::make_unique<AgentCore>(*rig.repo, *rig.client, rig.clock, rig.random, rig.log,
                                         options, rig.runner.get(), reader);
  rig.client->on_message([&rig](const Message& m) { rig.core->on_message(m); });
  rig.client->on_connection([&rig](bool up) { rig.core->on_connection(up); });
  REQUIRE(rig.core->start(std::move(owns)).ok());
  REQUIRE(rig.client->connect().ok());
  rig.bus.deliver_all();
}

// The reader of a core: runs each read inline and counts it; refuses every
// one while `refuse`.
struct CountingReader final : CoreRunner {
  InlineRunner inner;
  int reads = 0;
  bool refuse = false;
  bool run(const std::function<void()>& step) override {
    ++reads;
    return !refuse && inner.run(step);
  }
  bool post(std::function<void()> step) override {
    ++reads;
    return !refuse && inner.post(std::move(step));
  }
};

// A cancelled (finished) order of vm-2, a machine stocked with one token.
Order cancelled_order(AgentRig& rig) {
  DeviceSim& two = rig.add_device("vm-2", kSlots);
  two.restock(1, 1);
  REQUIRE(rig.run_until([&] { return rig.pool("vm-2", 1) == 1; }));
  auto order = rig.create_order("vm-2", 1, "", "");
  REQUIRE(order.ok());
  REQUIRE(rig.core->cancel(order->id).ok());
  return *order;
}

// The agent restarted with no finished order loaded from the log.
AgentOptions no_recent_orders() {
  AgentOptions options = vend::agent::test::test_agent_options();
  options.finished_orders_max = 0;
  return options;
}

std::set<std::string> listed(AgentRig& rig) {
  std::set<std::string> out;
  for (const auto& d : rig.core->devices()) out.insert(d.id);
  return out;
}

// The orders in `state`, as the core counts them.
int64_t in_state(AgentRig& rig, const std::string& state) {
  int64_t n = 0;
  for (const auto& [s, count] : rig.core->take_metrics().orders_by_state) {
    if (s == state) n += count;
  }
  return n;
}

// vm-1 and vm-2 stocked with 3 each, and a RESERVED order of vm-2.
Order two_machines_one_reserved(AgentRig& rig) {
  DeviceSim& one = rig.add_device("vm-1", kSlots);
  DeviceSim& two = rig.add_device("vm-2", kSlots);
  one.restock(1, 3);
  two.restock(1, 3);
  REQUIRE(rig.run_until([&] { return rig.pool("vm-1", 1) == 3 && rig.pool("vm-2", 1) == 3; }));
  auto open_two = rig.create_order("vm-2", 1, "", "");
  REQUIRE(open_two.ok());
  return *open_two;
}

TEST_CASE("cluster mode: only owned machines are loaded and served; rebuild brings the rest") {
  AgentRig rig;
  const Order open_two = two_machines_one_reserved(rig);
  DeviceSim& two = *rig.devices.back();

  restart_owning(rig, only({"vm-1"}));
  CHECK(listed(rig) == std::set<std::string>{"vm-1"});
  REQUIRE(rig.run_until([&] { return rig.online("vm-1"); }));

  // Requests about vm-2 name it, for the HTTP front's redirect.
  auto order = rig.create_order("vm-2", 1, "", "");
  REQUIRE_FALSE(order.ok());
  CHECK(order.error().code == "not_owner");
  CHECK(order.error().message == "vm-2");
  auto read = rig.core->get_order(open_two.id);
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().code == "not_owner");
  CHECK(read.error().message == "vm-2");
  CHECK(rig.core->slots("vm-2").error().code == "not_owner");
  CHECK(rig.core->provision_device("vm-9", kSlots).error().code == "not_owner");
  CHECK(rig.core->request_restock("vm-2", 1, 1).error().code == "not_owner");

  // Its machine sells as before.
  auto sold = rig.create_order("vm-1", 1, "", "");
  REQUIRE(sold.ok());
  REQUIRE(rig.pay(sold->id, "pay-1", sold->price_cents).ok());
  REQUIRE(rig.run_until([&] { return rig.state_of(sold->id) == OrderState::kCompleted; }));

  // vm-2's events reach no instance here: not subscribed (its status is
  // neither processed nor counted as rejected).
  rig.bus.deliver_all();
  two.power_cut();
  two.boot();
  rig.run_for(200);
  CHECK(rig.core->take_metrics().events_rejected_total == 0);

  // Ownership grows: the rebuild loads vm-2 with its open order and pool;
  // vm-1's presence is carried over (no new status needed).
  bool drained = false;
  REQUIRE(rig.core->rebuild(only({"vm-1", "vm-2"}), [&] { drained = true; }).ok());
  CHECK(drained);
  rig.bus.deliver_all();
  CHECK(listed(rig) == std::set<std::string>{"vm-1", "vm-2"});
  CHECK(rig.online("vm-1"));
  REQUIRE(rig.run_until([&] { return rig.online("vm-2"); }));  // its retained status, subscribed
  CHECK(rig.state_of(open_two.id) == OrderState::kReserved);
  CHECK(rig.pool("vm-2", 1) == 2);
  CHECK(rig.pool("vm-1", 1) == 2);
  REQUIRE(rig.pay(open_two.id, "pay-2", open_two.price_cents).ok());
  REQUIRE(rig.run_until([&] { return rig.state_of(open_two.id) == OrderState::kCompleted; }));

  // restrict(): vm-1 stops being served at once (before its lease goes).
  rig.core->restrict(only({"vm-2"}));
  CHECK(rig.create_order("vm-1", 1, "", "").error().code == "not_owner");
  CHECK(rig.create_order("vm-2", 1, "", "").ok());
  // A rebuild without it forgets it.
  REQUIRE(rig.core->rebuild(only({"vm-2"})).ok());
  CHECK(listed(rig) == std::set<std::string>{"vm-2"});
  CHECK_FALSE(rig.core->fenced());
}

// Issue 35: a failover reloaded every shard the instance held; gain() reads
// only the gained machines and leaves the kept ones as they are.
TEST_CASE("cluster mode: gain() adds the gained machines and keeps the rest as they were") {
  AgentRig rig;
  const Order open_two = two_machines_one_reserved(rig);

  restart_owning(rig, only({"vm-1"}));
  REQUIRE(rig.run_until([&] { return rig.online("vm-1"); }));
  auto open_one = rig.create_order("vm-1", 1, "", "");  // made after the start
  REQUIRE(open_one.ok());
  CHECK(in_state(rig, "RESERVED") == 1);

  bool fenced = false;
  REQUIRE(rig.core->gain(only({"vm-1", "vm-2"}), only({"vm-2"}), [&] { fenced = true; }).ok());
  CHECK(fenced);
  rig.bus.deliver_all();
  CHECK(listed(rig) == std::set<std::string>{"vm-1", "vm-2"});
  // The kept machine: its presence, its reservation and its pool as they were.
  CHECK(rig.online("vm-1"));
  CHECK(rig.state_of(open_one->id) == OrderState::kReserved);
  CHECK(rig.pool("vm-1", 1) == 2);
  // The gained one: its open order, pool and presence (its retained status).
  CHECK(rig.state_of(open_two.id) == OrderState::kReserved);
  CHECK(rig.pool("vm-2", 1) == 2);
  CHECK(in_state(rig, "RESERVED") == 2);  // the counts of both
  REQUIRE(rig.run_until([&] { return rig.online("vm-2"); }));
  REQUIRE(rig.pay(open_one->id, "pay-1", open_one->price_cents).ok());
  REQUIRE(rig.pay(open_two.id, "pay-2", open_two.price_cents).ok());
  REQUIRE(rig.run_until([&] {
    return rig.state_of(open_one->id) == OrderState::kCompleted &&
           rig.state_of(open_two.id) == OrderState::kCompleted;
  }));

  // A machine already in memory is never loaded twice: refused, and what
  // the core serves is unchanged.
  auto again = rig.core->gain(only({"vm-1", "vm-2"}), only({"vm-2"}));
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == "invalid_state");
  CHECK(rig.create_order("vm-2", 1, "", "").ok());
  CHECK_FALSE(rig.core->fenced());
}

// Issue 36: a paused instance, woken past its lease, acted on what memory
// held (answered reads, re-sent commands, decided deadlines) until its lease
// thread ran. The ownership predicate is the ShardGate's: closed the moment
// the lease's validity ends, before any step.
TEST_CASE("cluster mode: a machine not served at the moment gets no decision, command or answer") {
  AgentRig rig;
  DeviceSim& two = rig.add_device("vm-2", kSlots);
  two.restock(1, 3);
  REQUIRE(rig.run_until([&] { return rig.pool("vm-2", 1) == 3; }));
  auto gate_open = std::make_shared<bool>(true);
  restart_owning(rig, [gate_open](const std::string&) { return *gate_open; });
  REQUIRE(rig.run_until([&] { return rig.online("vm-2"); }));
  auto reserved = rig.create_order("vm-2", 1, "", "");
  REQUIRE(reserved.ok());
  two.power_cut();  // its command waits: the order stays DISPATCHED
  auto paid = rig.create_order("vm-2", 1, "", "");
  REQUIRE(paid.ok());
  REQUIRE(rig.pay(paid->id, "pay-1", paid->price_cents).ok());
  REQUIRE(rig.state_of(paid->id) == OrderState::kDispatched);

  int commands = 0;
  auto observer = rig.bus.make_client("observer", std::nullopt, true);
  observer->on_message([&](const Message&) { ++commands; });
  REQUIRE(observer->connect().ok());
  REQUIRE(observer->subscribe(topics::device_cmd("vm-2")).ok());

  // The lease's validity ends: past the reservation's deadline, the
  // dispatch deadline and several resend intervals, nothing is decided or
  // sent for vm-2, and a request about its order is redirected.
  *gate_open = false;
  rig.run_for(10'000);
  CHECK(commands == 0);
  CHECK(rig.core->get_order(reserved->id).error().code == "not_owner");
  CHECK(rig.core->get_order(paid->id).error().code == "not_owner");
  CHECK(rig.core->cancel(reserved->id).error().code == "not_owner");
  CHECK(in_state(rig, "EXPIRED") == 0);

  // Served again (a renewal in time): the waiting timers act. The paid
  // order's command expired meanwhile: its machine is asked for a snapshot,
  // which shows the token unused, and the order is refunded.
  *gate_open = true;
  REQUIRE(rig.run_until([&] { return rig.state_of(reserved->id) == OrderState::kExpired; }));
  two.boot();
  REQUIRE(rig.run_until([&] { return rig.state_of(paid->id) != OrderState::kDispatched; }));
  CHECK(rig.state_of(paid->id) == OrderState::kRefunded);
  CHECK(commands > 0);
}

// Issue 35: a rebuild loaded the 100,000 most recent finished orders, so a
// failover took seconds per million history rows.
TEST_CASE("cluster mode: start and rebuild load only the few most recent finished orders") {
  AgentRig rig;
  DeviceSim& two = rig.add_device("vm-2", kSlots);
  two.restock(1, 3);
  REQUIRE(rig.run_until([&] { return rig.pool("vm-2", 1) == 3; }));
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto order = rig.create_order("vm-2", 1, "", "");
    REQUIRE(order.ok());
    REQUIRE(rig.core->cancel(order->id).ok());
    ids.push_back(order->id);
  }
  CHECK(in_state(rig, "CANCELLED") == 3);
  AgentOptions options = vend::agent::test::test_agent_options();
  options.cluster_finished_orders_max = 1;
  restart_owning(rig, only({"vm-2"}), options);
  CHECK(in_state(rig, "CANCELLED") == 1);
  REQUIRE(rig.core->rebuild(only({"vm-2"})).ok());
  CHECK(in_state(rig, "CANCELLED") == 1);
  for (const auto& id : ids) {  // the others are read back from the log
    auto read = rig.core->get_order(id);
    REQUIRE(read.ok());
    CHECK(read->state == OrderState::kCancelled);
  }
}

TEST_CASE(
    "cluster mode: a client's request reads the log only on the reader, and only when the "
    "order could exist") {
  AgentRig rig;
  DeviceSim& two = rig.add_device("vm-2", kSlots);
  two.restock(1, 5);
  REQUIRE(rig.run_until([&] { return rig.pool("vm-2", 1) == 5; }));
  auto keyed = rig.create_order("vm-2", 1, "id:c", "k-1");
  REQUIRE(keyed.ok());
  REQUIRE(rig.core->cancel(keyed->id).ok());

  // Memory holds no finished order and never all of the log (cluster mode).
  CountingReader reader;
  restart_owning(rig, only({"vm-2", "vm-9"}), no_recent_orders(), &reader);
  REQUIRE(rig.run_until([&] { return rig.online("vm-2"); }));

  // Ids no order can have, and a machine this core would serve but does
  // not know (before its key is looked up): not_found, nothing read.
  CHECK(rig.core->get_order("ord-nope").error().code == "not_found");
  CHECK(rig.core->cancel("ord-" + std::string(44, 'f')).error().code == "not_found");
  CHECK(rig.create_order("vm-9", 1, "id:c", "k-1").error().code == "not_found");
  CHECK(reader.reads == 0);

  // An id that could exist: read on the reader (none: not_found).
  SeededRandom ids(3);
  CHECK(rig.core->get_order(new_order_id(rig.clock.wall_ms(), ids)).error().code == "not_found");
  CHECK(reader.reads == 1);
  // A finished order evicted from memory: read once, then in memory.
  auto read = rig.core->get_order(keyed->id);
  REQUIRE(read.ok());
  CHECK(read->state == OrderState::kCancelled);
  CHECK(reader.reads == 2);
  CHECK(rig.core->get_order(keyed->id).ok());
  CHECK(reader.reads == 2);
  // A key memory does not hold: read on the reader; the same order again.
  auto again = rig.create_order("vm-2", 1, "id:c", "k-1");
  REQUIRE(again.ok());
  CHECK(again->id == keyed->id);
  CHECK(reader.reads == 2);  // its order was in memory already (read above)
  std::optional<Result<Order>> answered;
  rig.core->create_order_async("vm-2", 1, "id:c", "k-2",
                               [&](Result<Order> o) { answered.emplace(std::move(o)); });
  // Answered from the commit callback: the key's read, the step it posts
  // back (run when the caller pumps), then the commit.
  rig.repo->flush();
  rig.runner->pump();
  rig.repo->flush();
  REQUIRE(answered.has_value());
  REQUIRE(answered->ok());
  CHECK((*answered)->state == OrderState::kReserved);
  const std::string reserved = (*answered)->id;
  CHECK(reader.reads == 3);
  CHECK(rig.pool("vm-2", 1) == 4);

  // The reader refuses (saturated): unavailable, nothing reserved; what
  // memory answers is answered as before.
  reader.refuse = true;
  CHECK(rig.create_order("vm-2", 1, "id:c", "k-3").error().code == "unavailable");
  answered.reset();
  rig.core->create_order_async("vm-2", 1, "id:c", "k-4",
                               [&](Result<Order> o) { answered.emplace(std::move(o)); });
  rig.runner->pump();  // the posted step runs when the caller pumps
  REQUIRE(answered.has_value());
  CHECK(answered->error().code == "unavailable");
  CHECK(rig.core->get_order(new_order_id(rig.clock.wall_ms(), ids)).error().code == "unavailable");
  CHECK(rig.pool("vm-2", 1) == 4);
  CHECK(rig.core->get_order(reserved).ok());        // open, in memory: nothing to read
  CHECK(rig.create_order("vm-2", 1, "", "").ok());  // no key: nothing to read
  CHECK(rig.pool("vm-2", 1) == 3);
}

TEST_CASE("cluster mode: an order nobody has is its id's owner's; a refund stays its machine's") {
  AgentRig rig;
  // A payment for a cancelled order: refunded.
  const Order order = cancelled_order(rig);
  auto paid = rig.pay(order.id, "pay-late", order.price_cents);
  REQUIRE(paid.ok());
  REQUIRE(rig.core->take_metrics().refunds_pending == 1);

  // Restarted with no finished order loaded: the refund is still held by
  // its machine's owner (before, its order id chose another instance)...
  restart_owning(rig, only({"vm-2"}), no_recent_orders());
  CHECK(rig.core->take_metrics().refunds_pending == 1);
  // ...and not by the owner of its order id's shard.
  restart_owning(rig, only({order.id}), no_recent_orders());
  CHECK(rig.core->take_metrics().refunds_pending == 0);

  // A payment for an order id no instance has: only the owner of that id
  // records and refunds it, so two instances never write the same payment.
  restart_owning(rig, only({"vm-2"}));
  auto elsewhere = rig.pay("ord-nobody", "pay-u", 150);
  REQUIRE_FALSE(elsewhere.ok());
  CHECK(elsewhere.error().code == "not_owner");
  CHECK(elsewhere.error().message == "ord-nobody");
  CHECK(rig.core->take_metrics().refunds_pending == 1);  // vm-2's, nothing new
  restart_owning(rig, only({"vm-2", "ord-nobody"}));
  auto here = rig.pay("ord-nobody", "pay-u", 150);
  REQUIRE(here.ok());
  CHECK_FALSE(here->known);
  CHECK(here->payment_outcome == "unknown_order_refunded");
  CHECK(rig.core->take_metrics().refunds_pending == 2);
  // Its refund names no machine; the late payment's names vm-2.
  auto refunds = rig.core->list_refunds(std::nullopt, 10);
  REQUIRE(refunds.ok());
  REQUIRE(refunds->size() == 2);
  for (const StoredRefund& r : *refunds) {
    CHECK(r.device == (r.order_id == "ord-nobody" ? "" : "vm-2"));
  }
  CHECK_FALSE(rig.core->fenced());
}

TEST_CASE("cluster mode: a refund written before refunds named their machine goes by its order") {
  AgentRig rig;
  const Order order = cancelled_order(rig);
  // As schema v7 stored it: no machine.
  Changeset old;
  old.insert_refund(new_refund("pay-old", order.id, 150, "late_payment", rig.clock.wall_ms()));
  auto written = rig.repo->submit(std::move(old));
  REQUIRE(written.ok());
  REQUIRE(written->get().ok());
  // Its order is loaded (a recent finished one): the machine's owner holds it.
  restart_owning(rig, only({"vm-2"}));
  CHECK(rig.core->take_metrics().refunds_pending == 1);
  restart_owning(rig, only({order.id}));
  CHECK(rig.core->take_metrics().refunds_pending == 0);
  // Its order not loaded: the order id's owner holds it, as before.
  restart_owning(rig, only({order.id}), no_recent_orders());
  CHECK(rig.core->take_metrics().refunds_pending == 1);
  restart_owning(rig, only({"vm-2"}), no_recent_orders());
  CHECK(rig.core->take_metrics().refunds_pending == 0);
}

}  // namespace
}  // namespace vend::agent
