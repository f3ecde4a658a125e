// The agent core against real firmware device cores on an in-memory bus:
// orders end to end, the stock invariant, payments, deadlines, forged and
// duplicated events, presence, and crash-restart from the repository.
#include "core/agent_core.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <future>

#include "agent_rig.hpp"

using namespace vend;
using namespace vend::agent;
using vend::agent::test::AgentRig;
using vend::agent::test::DeviceSim;
namespace rig_test = vend::agent::test;

namespace {

const std::vector<SlotSpec> kSlots = {{1, "cola", 150, 10}, {2, "water", 90, 5}};

Order paid_order(AgentRig& rig, const std::string& device = "vm-1", int slot = 1) {
  auto o = rig.create_order(device, slot, "", "");
  REQUIRE(o.ok());
  auto paid = rig.pay(o->id, "pay-" + o->id, o->price_cents);
  REQUIRE(paid.ok());
  CHECK(paid->state == OrderState::kDispatched);
  return *paid;
}

std::vector<std::string> transitions(AgentRig& rig, const std::string& order_id) {
  auto events = rig.db().order_events(order_id);
  REQUIRE(events.ok());
  std::vector<std::string> out;
  for (const auto& e : *events) out.push_back(e.to_state);
  return out;
}

}  // namespace

TEST_CASE("provision, restock, reserve, pay, dispense: the order completes") {
  AgentRig rig;
  DeviceSim& dev = rig.stocked_device(kSlots, 3);
  rig.check_stock_invariant();

  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  CHECK(o->state == OrderState::kReserved);
  CHECK(o->price_cents == 150);
  CHECK(rig.slot("vm-1", 1).pool == 2);
  CHECK(rig.slot("vm-1", 1).reserved == 1);
  rig.check_stock_invariant();

  auto paid = rig.pay(o->id, "pay-1", 150);
  REQUIRE(paid.ok());
  CHECK(paid->state == OrderState::kDispatched);
  CHECK(paid->payment_outcome == "applied");
  CHECK(paid->dispatch_expires_at_ms == rig.clock.wall_ms() + 3000);

  REQUIRE(rig.run_until([&] { return rig.state_of(o->id) == OrderState::kCompleted; }));
  SlotView s = rig.slot("vm-1", 1);
  CHECK(s.pool == 2);
  CHECK(s.sold == 1);
  CHECK(s.dispatched == 0);
  CHECK(dev.machine.items(1) == 2);
  rig.check_stock_invariant();
  CHECK(transitions(rig, o->id) ==
        std::vector<std::string>{"RESERVED", "PAID", "DISPATCHED", "COMPLETED"});
  CHECK(rig.db().token_state(o->token).value() == TokenState::kSold);
  // Every event was acknowledged: the device's outbox drains.
  REQUIRE(rig.run_until([&] { return dev.ledger->outbox_depth().value() == 0; }));
  auto m = rig.core->take_metrics();
  CHECK(m.dispatch_latency_ms.size() == 1);
  CHECK(m.stock_total == 2);
  CHECK(m.devices_online == 1);
  CHECK(rig.core->health().ok());
}

// Pins down a crash window: a 201 sent before its group commit could be lost
// by kill -9, and the customer would then pay for an order nobody knows.
TEST_CASE("a reservation is answered only once it is durable") {
  AgentRig rig;
  rig.stocked_device(kSlots, 2);
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  auto blocker = rig.repo->submit([opened](WriteContext&) {
    opened.wait();  // holds the writer: nothing after it commits
    return Status{};
  });
  REQUIRE(blocker.ok());
  auto answer = std::async(std::launch::async, [&] { return rig.create_order("vm-1", 1, "", ""); });
  CHECK(answer.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
  gate.set_value();
  auto order = answer.get();
  REQUIRE(order.ok());
  // The answer came after the commit: the log's read side already sees it.
  auto stored = rig.repo->find_order(order->id);
  REQUIRE(stored.ok());
  CHECK(stored->has_value());
}

TEST_CASE("never more reservations than tokens: sold out when the pool is empty") {
  AgentRig rig;
  rig.stocked_device(kSlots, 3);
  for (int i = 0; i < 3; ++i) REQUIRE(rig.create_order("vm-1", 1, "", "").ok());
  auto fourth = rig.create_order("vm-1", 1, "", "");
  REQUIRE_FALSE(fourth.ok());
  CHECK(fourth.error().code == "sold_out");
  CHECK(rig.pool("vm-1", 1) == 0);
  CHECK(rig.slot("vm-1", 1).reserved == 3);
  auto empty_slot = rig.create_order("vm-1", 2, "", "");
  CHECK(empty_slot.error().code == "sold_out");
  CHECK(rig.core->take_metrics().reservations_rejected_total == 2);
}

TEST_CASE("bad requests get their own error codes") {
  AgentRig rig;
  rig.stocked_device(kSlots, 1);
  CHECK(rig.create_order("vm-404", 1, "", "").error().code == "not_found");
  CHECK(rig.create_order("vm-1", 9, "", "").error().code == "unknown_slot");
  CHECK(rig.core->get_order("ord-nope").error().code == "not_found");
  CHECK(rig.core->provision_device("vm-1", kSlots).error().code == "conflict");
  CHECK(rig.core->provision_device("bad/id", kSlots).error().code == "bad_request");
  CHECK(rig.core->provision_device("vm-2", {{0, "x", 1, 1}}).error().code == "bad_request");
  CHECK(rig.core->provision_device("vm-2", {{1, "x", -1, 1}}).error().code == "bad_request");
  CHECK(rig.core->request_restock("vm-1", 1, 0).error().code == "bad_request");
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  CHECK(rig.pay(o->id, "", 150).error().code == "bad_request");
  CHECK(rig.state_of(o->id) == OrderState::kReserved);
}

// A verified notification that cannot be honoured was money taken: it is
// recorded and refunded, never answered with an error and forgotten.
TEST_CASE("payments that cannot be honoured are recorded and refunded") {
  AgentRig rig;
  rig.stocked_device(kSlots, 1);
  auto unknown = rig.pay("ord-nope", "p-unknown", 150);
  REQUIRE(unknown.ok());
  CHECK_FALSE(unknown->known);
  CHECK(unknown->payment_outcome == "unknown_order_refunded");
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  auto wrong = rig.pay(o->id, "p-1", 149);
  REQUIRE(wrong.ok());
  CHECK(wrong->payment_outcome == "amount_mismatch_refunded");
  CHECK(rig.state_of(o->id) == OrderState::kReserved);
  auto refunds = rig.db().refunds_of(o->id);
  REQUIRE(refunds.ok());
  REQUIRE(refunds->size() == 1);
  CHECK((*refunds)[0].amount_cents == 149);
  CHECK(rig.db().refunds_of("ord-nope")->size() == 1);
  // After a restart, the same notifications get the same answers, once.
  rig.crash_agent();
  rig.start_agent();
  auto again = rig.pay("ord-nope", "p-unknown", 150);
  REQUIRE(again.ok());
  CHECK(again->payment_outcome == "unknown_order_refunded");
  CHECK(rig.pay(o->id, "p-1", 149)->payment_outcome == "amount_mismatch_refunded");
  CHECK(rig.db().refunds_of("ord-nope")->size() == 1);
  CHECK(rig.core->health().ok());
}

TEST_CASE("the same idempotency key returns the same order") {
  AgentRig rig;
  rig.stocked_device(kSlots, 3);
  auto a = rig.create_order("vm-1", 1, "client-1", "key-1");
  auto b = rig.create_order("vm-1", 1, "client-1", "key-1");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->id == b->id);
  CHECK(rig.slot("vm-1", 1).pool == 2);
  CHECK(rig.create_order("vm-1", 2, "client-1", "key-1").error().code == "conflict");
}

// A guessed key must not hand out someone else's order: keys are per client.
TEST_CASE("idempotency keys are scoped per client") {
  AgentRig rig;
  rig.stocked_device(kSlots, 3);
  auto mine = rig.create_order("vm-1", 1, "id:phone-a", "key-1");
  auto theirs = rig.create_order("vm-1", 1, "id:phone-b", "key-1");
  REQUIRE(mine.ok());
  REQUIRE(theirs.ok());
  CHECK(mine->id != theirs->id);
  CHECK(rig.slot("vm-1", 1).pool == 1);
  CHECK(rig.create_order("vm-1", 1, "id:phone-b", "key-1")->id == theirs->id);
  CHECK(rig.create_order("vm-1", 1, "id:phone-a", "key-1")->id == mine->id);
  CHECK(rig.slot("vm-1", 1).pool == 1);
  // A key needs a client; a client with a newline could forge a scope.
  CHECK(rig.create_order("vm-1", 1, "", "key-2").error().code == "bad_request");
  CHECK(rig.create_order("vm-1", 1, "a\nb", "key-2").error().code == "bad_request");
  CHECK(rig.create_order("vm-1", 1, "id:phone-a", "bad key").error().code == "bad_request");
}

TEST_CASE("an unpaid reservation expires on the clock and its token returns") {
  AgentRig rig;
  rig.stocked_device(kSlots, 3);
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  rig.run_for(1900);
  CHECK(rig.state_of(o->id) == OrderState::kReserved);
  rig.run_for(200);
  CHECK(rig.state_of(o->id) == OrderState::kExpired);
  CHECK(rig.slot("vm-1", 1).pool == 3);
  CHECK(rig.slot("vm-1", 1).reserved == 0);
  rig.check_stock_invariant();

  SUBCASE("a late payment is refunded") {
    auto late = rig.pay(o->id, "pay-late", 150);
    REQUIRE(late.ok());
    CHECK(late->state == OrderState::kRefunded);
    CHECK(late->payment_outcome == "late_payment_refunded");
    auto again = rig.pay(o->id, "pay-late", 150);
    REQUIRE(again.ok());
    CHECK(again->payment_outcome == "late_payment_refunded");
    auto refunds = rig.db().refunds_of(o->id);
    REQUIRE(refunds.ok());
    REQUIRE(refunds->size() == 1);
    CHECK((*refunds)[0].payment_id == "pay-late");
    CHECK(rig.slot("vm-1", 1).pool == 3);  // the token stays for sale
  }
  SUBCASE("a payment racing the timer finds the reservation expired") {
    auto o2 = rig.create_order("vm-1", 1, "", "");
    REQUIRE(o2.ok());
    rig.clock.advance(2500);  // no tick: the wheel has not fired yet
    auto late = rig.pay(o2->id, "pay-2", 150);
    REQUIRE(late.ok());
    CHECK(late->state == OrderState::kRefunded);
    CHECK(rig.slot("vm-1", 1).pool == 3);
  }
}

TEST_CASE("cancel returns the token; a payment after it is refunded") {
  AgentRig rig;
  rig.stocked_device(kSlots, 2);
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  auto c = rig.core->cancel(o->id);
  REQUIRE(c.ok());
  CHECK(c->state == OrderState::kCancelled);
  CHECK(rig.core->cancel(o->id).ok());  // repeated
  CHECK(rig.slot("vm-1", 1).pool == 2);
  rig.check_stock_invariant();
  auto late = rig.pay(o->id, "pay-c", 150);
  REQUIRE(late.ok());
  CHECK(late->state == OrderState::kRefunded);
  auto paid = paid_order(rig);
  CHECK(rig.core->cancel(paid.id).error().code == "invalid_state");
}

TEST_CASE("duplicate payments: same id same answer, another id refunded") {
  AgentRig rig;
  rig.stocked_device(kSlots, 3);
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  auto first = rig.pay(o->id, "pay-1", 150);
  REQUIRE(first.ok());
  auto repeat = rig.pay(o->id, "pay-1", 150);
  REQUIRE(repeat.ok());
  CHECK(repeat->state == OrderState::kDispatched);
  CHECK(repeat->payment_outcome == "applied");

  auto second = rig.pay(o->id, "pay-2", 150);
  REQUIRE(second.ok());
  CHECK(second->payment_outcome == "duplicate_payment_refunded");
  CHECK(second->state == OrderState::kDispatched);
  CHECK(second->payment_id == "pay-1");
  CHECK(rig.pay(o->id, "pay-2", 150)->payment_outcome == "duplicate_payment_refunded");

  auto other = rig.create_order("vm-1", 1, "", "");
  REQUIRE(other.ok());
  CHECK(rig.pay(other->id, "pay-1", 150).error().code == "conflict");

  REQUIRE(rig.run_until([&] { return rig.state_of(o->id) == OrderState::kCompleted; }));
  auto refunds = rig.db().refunds_of(o->id);
  REQUIRE(refunds.ok());
  REQUIRE(refunds->size() == 1);
  CHECK((*refunds)[0].payment_id == "pay-2");
  CHECK(rig.slot("vm-1", 1).sold == 1);  // one item for two payments
}

TEST_CASE("a forged dispense result is rejected and settles nothing") {
  AgentRig rig;
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  Order o = paid_order(rig);
  auto attacker = rig.bus.make_client("attacker");
  REQUIRE(attacker->connect().ok());
  auto device = rig.core->devices().front();
  proto::DeviceEvent forged{
      "vm-1", device.last_processed_seq + 1, device.boot_id, rig.clock.wall_ms(),
      proto::DispenseResult{o.id, o.slot, o.token, proto::DispenseStatus::kFailed, "jam", true}};
  crypto::Key wrong = crypto::Key::generate();
  std::string payload = proto::encode(forged, crypto::sign(wrong, proto::encode_canonical(forged)));
  REQUIRE(attacker->publish(Message{topics::device_evt("vm-1"), payload, 1, false}).ok());
  rig.bus.deliver_all();
  CHECK(rig.state_of(o.id) == OrderState::kDispatched);
  CHECK(rig.core->take_metrics().events_rejected_total == 1);
  CHECK(rig.log.contains("bad_mac", LogLevel::kWarn));
  // Well signed but on another device's topic: refused too.
  std::string signed_ok =
      proto::encode(forged, crypto::sign(dev.key, proto::encode_canonical(forged)));
  REQUIRE(attacker->publish(Message{topics::device_evt("vm-2"), signed_ok, 1, false}).ok());
  rig.bus.deliver_all();
  CHECK(rig.state_of(o.id) == OrderState::kDispatched);
  CHECK(rig.core->take_metrics().events_rejected_total == 2);
  REQUIRE(rig.run_until([&] { return rig.state_of(o.id) == OrderState::kCompleted; }));
  auto refunds = rig.db().refunds_of(o.id);
  CHECK(refunds->empty());
}

TEST_CASE("an offline device cannot sell; a stale offline will is ignored") {
  AgentRig rig;
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  std::string old_boot = dev.boot_id;

  SUBCASE("connection lost: the will marks it offline until it reconnects") {
    rig.bus.disconnect("vm-1");
    rig.bus.deliver_all();
    CHECK_FALSE(rig.online("vm-1"));
    CHECK(rig.create_order("vm-1", 1, "", "").error().code == "device_offline");
    REQUIRE(rig.bus.reconnect("vm-1"));
    rig.bus.deliver_all();
    CHECK(rig.online("vm-1"));
    CHECK(rig.create_order("vm-1", 1, "", "").ok());
  }
  SUBCASE("the will of an old session, arriving after the new online, is ignored") {
    proto::PresenceStatus stale{"vm-1", old_boot, false, rig.clock.wall_ms()};
    std::string stale_payload =
        proto::encode(stale, crypto::sign(dev.key, proto::encode_canonical(stale)));
    dev.power_cut();
    dev.boot();  // new boot id, retained online
    rig.bus.deliver_all();
    REQUIRE(rig.online("vm-1"));
    CHECK(rig.core->devices().front().boot_id == dev.boot_id);
    auto late = rig.bus.make_client("late-will");
    REQUIRE(late->connect().ok());
    REQUIRE(late->publish(Message{topics::device_status("vm-1"), stale_payload, 1, true}).ok());
    rig.bus.deliver_all();
    CHECK(rig.online("vm-1"));
    CHECK(rig.log.contains("stale offline will"));
    CHECK(rig.create_order("vm-1", 1, "", "").ok());
  }
}

TEST_CASE("duplicated deliveries are processed once") {
  AgentRig rig;
  rig.bus.set_filter([](const InMemoryBus::Envelope& e) {
    return e.to == rig_test::kAgentClient ? InMemoryBus::Fault::duplicate()
                                          : InMemoryBus::Fault::deliver();
  });
  rig.stocked_device(kSlots, 2);
  Order o = paid_order(rig);
  REQUIRE(rig.run_until([&] { return rig.state_of(o.id) == OrderState::kCompleted; }));
  rig.run_for(500);
  CHECK(rig.slot("vm-1", 1).sold == 1);
  CHECK(rig.slot("vm-1", 1).pool == 1);
  rig.check_stock_invariant();
  auto states = transitions(rig, o.id);
  CHECK(std::count(states.begin(), states.end(), "COMPLETED") == 1);
  CHECK(rig.core->take_metrics().duplicate_events_total > 0);
}

TEST_CASE("a jam fails the order, refunds it and burns the token") {
  AgentRig rig;
  DeviceSim& dev = rig.stocked_device(kSlots, 3);
  dev.machine.set_jam_probability(1.0);
  Order o = paid_order(rig);
  REQUIRE(rig.run_until([&] { return rig.state_of(o.id) == OrderState::kRefunded; }));
  Order done = rig.order(o.id);
  CHECK(done.reason == "jam");
  SlotView s = rig.slot("vm-1", 1);
  CHECK(s.burned == 1);
  CHECK(s.pool == 2);
  CHECK(s.sold == 0);
  rig.check_stock_invariant();
  CHECK(rig.db().token_state(o.token).value() == TokenState::kBurned);
  auto refunds = rig.db().refunds_of(o.id);
  REQUIRE(refunds->size() == 1);
  CHECK((*refunds)[0].amount_cents == 150);
  CHECK(transitions(rig, o.id) ==
        std::vector<std::string>{"RESERVED", "PAID", "DISPATCHED", "FAILED", "REFUNDED"});
  auto faults = rig.db().faults("vm-1", 10);
  REQUIRE(faults.ok());
  CHECK_FALSE(faults->empty());
}

TEST_CASE("a power cut mid-rotation leaves the order for review, token burned") {
  AgentRig rig;
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  Order o = paid_order(rig);
  rig.bus.deliver_all();  // the device accepts; the motor starts
  dev.power_cut();
  dev.boot();  // MOTOR_RUNNING at boot -> UNCERTAIN
  REQUIRE(rig.run_until([&] { return rig.state_of(o.id) == OrderState::kNeedsReview; }));
  CHECK(rig.order(o.id).reason == "power_loss");
  CHECK(rig.slot("vm-1", 1).burned == 1);
  CHECK(rig.db().refunds_of(o.id)->empty());
}

TEST_CASE("offline while DISPATCHED: the result arrives after the reconnect and settles it") {
  AgentRig rig;
  rig.stocked_device(kSlots, 2);
  Order o = paid_order(rig);
  rig.bus.deliver_all();  // accepted by the device
  rig.bus.disconnect("vm-1");
  rig.run_for(300);  // the motor finishes; the result waits in the outbox
  CHECK_FALSE(rig.online("vm-1"));
  CHECK(rig.state_of(o.id) == OrderState::kDispatched);
  REQUIRE(rig.bus.reconnect("vm-1"));
  REQUIRE(rig.run_until([&] { return rig.state_of(o.id) == OrderState::kCompleted; }));
  CHECK(rig.online("vm-1"));
  CHECK(rig.slot("vm-1", 1).sold == 1);
}

TEST_CASE("a busy device gets the command again and dispenses it") {
  AgentRig rig;
  fw::CoreOptions options = rig_test::test_device_options();
  options.dispense_queue_max = 1;
  rig.stocked_device(kSlots, 3, "vm-1", options);
  auto a = rig.create_order("vm-1", 1, "", "");
  auto b = rig.create_order("vm-1", 1, "", "");
  REQUIRE(rig.pay(a->id, "pa", 150).ok());
  REQUIRE(rig.pay(b->id, "pb", 150).ok());
  REQUIRE(rig.run_until([&] {
    return rig.state_of(a->id) == OrderState::kCompleted &&
           rig.state_of(b->id) == OrderState::kCompleted;
  }));
  CHECK(rig.log.contains("busy"));
  CHECK(rig.slot("vm-1", 1).sold == 2);
}

TEST_CASE("a command that never reached the device is refunded after its deadline") {
  AgentRig rig;
  rig.stocked_device(kSlots, 2);
  rig.bus.set_filter([](const InMemoryBus::Envelope& e) {
    bool dispense = e.message.payload.find("\"type\":\"dispense\"") != std::string::npos;
    return dispense ? InMemoryBus::Fault::drop() : InMemoryBus::Fault::deliver();
  });
  Order o = paid_order(rig);
  rig.run_for(3000 + rig_test::kSkewMs - 100);
  CHECK(rig.state_of(o.id) == OrderState::kDispatched);  // no guessing before the deadline
  REQUIRE(rig.run_until([&] { return rig.state_of(o.id) == OrderState::kRefunded; }, 5000));
  Order done = rig.order(o.id);
  CHECK(done.reason == "never_dispensed");
  CHECK(rig.slot("vm-1", 1).pool == 2);  // the token is back
  CHECK(rig.slot("vm-1", 1).burned == 0);
  rig.check_stock_invariant();
  CHECK(rig.db().refunds_of(o.id)->size() == 1);
  CHECK(rig.db().snapshot("vm-1").value().has_value());
}

// Pins down a stuck order: a DISPATCHED order whose device never returns
// used to wait forever, with the customer's money held.
TEST_CASE("no result for too long: NEEDS_REVIEW, then an operator resolves it") {
  AgentOptions options = rig_test::test_agent_options();
  options.dispatch_review_ms = 20'000;
  AgentRig rig(options);
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  auto ra = rig.create_order("vm-1", 1, "", "");
  auto rb = rig.create_order("vm-1", 1, "", "");
  REQUIRE((ra.ok() && rb.ok()));
  dev.power_cut();  // gone for good, before the commands arrive
  rig.bus.deliver_all();
  auto a = rig.pay(ra->id, "pay-a", ra->price_cents);
  auto b = rig.pay(rb->id, "pay-b", rb->price_cents);
  REQUIRE((a.ok() && b.ok()));
  REQUIRE(rig.run_until([&] { return rig.state_of(a->id) == OrderState::kNeedsReview; }, 40'000));
  REQUIRE(rig.run_until([&] { return rig.state_of(b->id) == OrderState::kNeedsReview; }, 1000));
  CHECK(rig.order(a->id).reason == "no_result");
  CHECK(rig.slot("vm-1", 1).burned == 2);
  CHECK(rig.slot("vm-1", 1).dispatched == 0);

  CHECK(rig.core->resolve_review(a->id, true, "", "").error().code == "bad_request");
  auto done = rig.core->resolve_review(a->id, true, "alice", "camera shows the drop");
  REQUIRE(done.ok());
  CHECK(done->state == OrderState::kCompleted);
  CHECK(rig.slot("vm-1", 1).sold == 1);
  auto refunded = rig.core->resolve_review(b->id, false, "alice", "");
  REQUIRE(refunded.ok());
  CHECK(refunded->state == OrderState::kRefunded);
  CHECK(rig.db().refunds_of(b->id)->size() == 1);
  // The same decision again is answered; the other one is refused.
  CHECK(rig.core->resolve_review(b->id, false, "alice", "").ok());
  CHECK(rig.core->resolve_review(b->id, true, "bob", "").error().code == "invalid_state");
  auto events = rig.db().order_events(a->id);
  REQUIRE(events.ok());
  CHECK(events->back().detail.find("by alice: camera shows the drop") != std::string::npos);
  rig.check_stock_invariant();
}

TEST_CASE("a restock ordered by the agent reaches the pool") {
  AgentRig rig;
  fw::CoreOptions options = rig_test::test_device_options();
  options.auto_confirm_restock = true;
  DeviceSim& dev = rig.add_device("vm-1", kSlots, options);
  auto id = rig.core->request_restock("vm-1", 2, 4);
  REQUIRE(id.ok());
  REQUIRE(rig.run_until([&] { return rig.slot("vm-1", 2).pool == 4; }));
  CHECK(dev.machine.items(2) == 4);
  rig.check_stock_invariant();
  CHECK(rig.core->request_restock("vm-1", 9, 1).error().code == "unknown_slot");
}

TEST_CASE("a restock recorded while the broker was down reaches the machine once it is back") {
  AgentRig rig;
  fw::CoreOptions options = rig_test::test_device_options();
  options.auto_confirm_restock = true;
  DeviceSim& dev = rig.add_device("vm-1", kSlots, options);
  rig.bus.disconnect(rig_test::kAgentClient, false);
  rig.step();
  auto id = rig.core->request_restock("vm-1", 2, 4);
  REQUIRE_FALSE(id.ok());
  CHECK(id.error().code == "unavailable");  // recorded, not sent
  CHECK(id.error().message.find("recorded") != std::string::npos);
  rig.run_for(2000);
  CHECK(rig.slot("vm-1", 2).pool == 0);
  REQUIRE(rig.bus.reconnect(rig_test::kAgentClient));
  REQUIRE(rig.run_until([&] { return rig.slot("vm-1", 2).pool == 4; }));
  CHECK(dev.machine.items(2) == 4);
  CHECK(rig.core->take_metrics().restocks_resent_total == 1);
  rig.check_stock_invariant();
}

TEST_CASE("a restock not yet minted when the agent restarted is sent again, and counts once") {
  AgentRig rig;
  fw::CoreOptions options = rig_test::test_device_options();
  options.auto_confirm_restock = true;
  DeviceSim& dev = rig.add_device("vm-1", kSlots, options);
  auto id = rig.core->request_restock("vm-1", 2, 3);
  REQUIRE(id.ok());
  // The agent dies before the machine's tokens arrive: the restock is
  // still pending in its log.
  rig.crash_agent();
  rig.run_for(2000);
  rig.start_agent();
  REQUIRE(rig.run_until([&] { return rig.slot("vm-1", 2).pool == 3; }));
  rig.run_for(5000);
  CHECK(rig.slot("vm-1", 2).pool == 3);  // the repeat changed nothing
  CHECK(dev.machine.items(2) == 3);
  rig.check_stock_invariant();
}

TEST_CASE("crash and restart: deadlines still fire, nothing settles twice, counters rebuilt") {
  AgentRig rig;
  DeviceSim& dev = rig.stocked_device(kSlots, 5);
  auto reserved = rig.create_order("vm-1", 1, "client-1", "key-r");
  REQUIRE(reserved.ok());
  rig.bus.disconnect("vm-1", false);  // the command will wait in the device's session
  Order dispatched = paid_order(rig);
  auto done = rig.create_order("vm-1", 2, "", "");
  CHECK(done.error().code == "sold_out");

  rig.crash_agent();
  rig.step();
  rig.start_agent();
  rig.bus.deliver_all();
  CHECK(rig.state_of(reserved->id) == OrderState::kReserved);
  CHECK(rig.state_of(dispatched.id) == OrderState::kDispatched);
  CHECK(rig.slot("vm-1", 1).pool == 3);
  CHECK(rig.slot("vm-1", 1).reserved == 1);
  CHECK(rig.slot("vm-1", 1).dispatched == 1);
  rig.check_stock_invariant();  // rebuilt from the log
  CHECK(rig.create_order("vm-1", 1, "client-1", "key-r")->id == reserved->id);

  REQUIRE(rig.bus.reconnect("vm-1"));
  REQUIRE(rig.run_until([&] {
    return rig.state_of(dispatched.id) == OrderState::kCompleted &&
           rig.state_of(reserved->id) == OrderState::kExpired;
  }));
  rig.run_for(1000);
  CHECK(rig.slot("vm-1", 1).pool == 4);
  CHECK(rig.slot("vm-1", 1).sold == 1);
  CHECK(dev.machine.items(1) == 4);
  CHECK(dev.machine.rotations() == 1);
  rig.check_stock_invariant();
  auto states = transitions(rig, dispatched.id);
  CHECK(std::count(states.begin(), states.end(), "COMPLETED") == 1);
  CHECK(rig.count_in_state(OrderState::kCompleted) == 1);
  CHECK(rig.count_in_state(OrderState::kExpired) == 1);
  CHECK(rig.count_in_state(OrderState::kReserved) == 0);

  SUBCASE("and once more: everything settled stays settled") {
    rig.crash_agent();
    rig.start_agent();
    rig.run_for(500);
    CHECK(rig.state_of(dispatched.id) == OrderState::kCompleted);
    CHECK(rig.slot("vm-1", 1).pool == 4);
    CHECK(rig.slot("vm-1", 1).sold == 1);
    rig.check_stock_invariant();
    auto again = rig.pay(dispatched.id, "pay-" + dispatched.id, 150);
    REQUIRE(again.ok());
    CHECK(again->payment_outcome == "applied");
    CHECK(again->state == OrderState::kCompleted);
  }
}

TEST_CASE("a command lost between commit and crash is re-sent at start") {
  AgentRig rig;
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  bool drop = true;
  rig.bus.set_filter([&drop](const InMemoryBus::Envelope& e) {
    bool dispense = e.message.payload.find("\"type\":\"dispense\"") != std::string::npos;
    return drop && dispense ? InMemoryBus::Fault::drop() : InMemoryBus::Fault::deliver();
  });
  Order o = paid_order(rig);
  rig.bus.deliver_all();
  rig.crash_agent();
  drop = false;
  rig.start_agent();
  REQUIRE(rig.run_until([&] { return rig.state_of(o.id) == OrderState::kCompleted; }));
  CHECK(dev.machine.rotations() == 1);
}

TEST_CASE("finished orders evicted from memory are read back from the repository") {
  AgentOptions options = rig_test::test_agent_options();
  options.finished_orders_max = 1;
  AgentRig rig(options);
  rig.stocked_device(kSlots, 3);
  auto a = rig.create_order("vm-1", 1, "client-1", "key-a");
  auto b = rig.create_order("vm-1", 1, "client-1", "key-b");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(rig.run_until([&] { return rig.count_in_state(OrderState::kExpired) == 2; }));
  rig.repo->flush();
  rig.step();  // evicted once durable
  auto listed = rig.core->list_orders(OrderState::kExpired, 10);
  REQUIRE(listed.ok());
  CHECK(listed->size() == 1);  // only the newest stays in memory
  CHECK(rig.state_of(a->id) == OrderState::kExpired);
  CHECK(rig.create_order("vm-1", 1, "client-1", "key-a")->id == a->id);
  // Read back from the repository, the key is still the client's own.
  auto other = rig.create_order("vm-1", 1, "client-2", "key-a");
  REQUIRE(other.ok());
  CHECK(other->id != a->id);
  auto late = rig.pay(a->id, "pay-a", 150);
  REQUIRE(late.ok());
  CHECK(late->state == OrderState::kRefunded);
  CHECK(rig.pay(a->id, "pay-a", 150)->payment_outcome == "late_payment_refunded");
  rig.check_stock_invariant();
}

TEST_CASE("minted tokens: a restock counts once, known tokens are skipped") {
  AgentRig rig;
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  rig.run_for(300);  // everything acknowledged; the device stays quiet from here on
  auto view = rig.core->devices().front();
  std::vector<std::string> existing;
  {
    auto o = rig.create_order("vm-1", 1, "", "");
    REQUIRE(o.ok());
    existing.push_back(o->token);
    REQUIRE(rig.core->cancel(o->id).ok());
  }
  auto replayer = rig.bus.make_client("replayer");
  REQUIRE(replayer->connect().ok());
  uint64_t seq = view.last_processed_seq;
  auto send = [&](proto::EventBody body) {
    proto::DeviceEvent e{"vm-1",          ++seq,
                         dev.boot_id,     rig.clock.wall_ms(),
                         std::move(body), dev.ledger->identity().ledger_id};
    std::string payload = proto::encode(e, crypto::sign(dev.key, proto::encode_canonical(e)));
    REQUIRE(replayer->publish(Message{topics::device_evt("vm-1"), payload, 1, false}).ok());
    rig.bus.deliver_all();
  };
  std::string fresh(32, 'a');
  send(proto::TokensMinted{"rst-1", 1, {existing[0], fresh}, 3});
  CHECK(rig.slot("vm-1", 1).pool == 3);  // only the new one
  send(proto::TokensMinted{"rst-1", 1, {std::string(32, 'b')}, 4});
  CHECK(rig.slot("vm-1", 1).pool == 3);  // the same restock again
  send(proto::TokensMinted{"rst-2", 7, {std::string(32, 'c')}, 1});
  CHECK(rig.slot("vm-1", 1).pool == 3);
  rig.check_stock_invariant();
  auto faults = rig.db().faults("vm-1", 10);
  REQUIRE_FALSE(faults->empty());
  CHECK((*faults)[0].code == "tokens_for_unknown_slot");
  CHECK(rig.core->devices().front().last_processed_seq == seq);
}

TEST_CASE("a write the log refuses stops the core until a restart") {
  AgentRig rig;
  rig.stocked_device(kSlots, 2);
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  {
    // Someone changes the log behind the core's back.
    auto db = sql::Database::open(rig.dir.file("agent.db"));
    REQUIRE(db.ok());
    rig.repo->flush();
    REQUIRE(db->exec("UPDATE orders SET state = 'CANCELLED' WHERE id = '" + o->id + "'").ok());
  }
  REQUIRE(rig.core->cancel(o->id).ok());  // memory agrees; the conditional UPDATE does not
  rig.repo->flush();
  auto health = rig.core->health();
  REQUIRE_FALSE(health.ok());
  CHECK(health.error().code == "unavailable");
  int64_t pool = rig.slot("vm-1", 1).pool;
  for (int i = 0; i < 5; ++i) {
    CHECK(rig.create_order("vm-1", 1, "", "").error().code == "unavailable");
  }
  CHECK(rig.slot("vm-1", 1).pool == pool);  // no token moved
  CHECK(rig.core->take_metrics().storage_failed);
  rig.crash_agent();
  rig.start_agent();
  CHECK(rig.core->health().ok());
  CHECK(rig.state_of(o->id) == OrderState::kCancelled);
}

TEST_CASE("two devices: pools, seqs and acks are per device") {
  AgentRig rig;
  DeviceSim& a = rig.stocked_device(kSlots, 2, "vm-a");
  DeviceSim& b = rig.stocked_device(kSlots, 3, "vm-b");
  Order oa = paid_order(rig, "vm-a");
  Order ob = paid_order(rig, "vm-b");
  REQUIRE(rig.run_until([&] {
    return rig.state_of(oa.id) == OrderState::kCompleted &&
           rig.state_of(ob.id) == OrderState::kCompleted;
  }));
  CHECK(rig.slot("vm-a", 1).pool == 1);
  CHECK(rig.slot("vm-b", 1).pool == 2);
  rig.check_stock_invariant();
  REQUIRE(rig.run_until([&] {
    return a.ledger->outbox_depth().value() == 0 && b.ledger->outbox_depth().value() == 0;
  }));
  for (const auto& d : rig.core->devices()) {
    DeviceSim& sim = d.id == "vm-a" ? a : b;
    CHECK(d.last_processed_seq == sim.ledger->last_seq().value());
  }
  auto listed = rig.core->list_orders(std::nullopt, 0);
  REQUIRE(listed.ok());
  CHECK(listed->size() == 2);
}

TEST_CASE("60,000 junk messages on a device's event topic: all counted, few lines logged") {
  AgentRig rig;
  rig.stocked_device(kSlots, 1);
  auto attacker = rig.bus.make_client("attacker");
  REQUIRE(attacker->connect().ok());
  size_t lines_before = rig.log.records().size();
  int64_t rejected_before = rig.core->take_metrics().events_rejected_total;
  constexpr int kJunk = 60'000;
  for (int i = 0; i < kJunk; ++i) {
    // Three reasons: not JSON, bad MAC-shaped junk, an unknown type.
    std::string payload = i % 3 == 0   ? "junk " + std::to_string(i)
                          : i % 3 == 1 ? R"({"v":1,"type":"nope"})"
                                       : "{}";
    rig.core->on_message(Message{topics::device_evt("vm-1"), payload, 1, false});
    if (i % 1000 == 0) rig.clock.advance(100);  // 6 s in all: inside one interval
  }
  CHECK(rig.core->take_metrics().events_rejected_total - rejected_before == kJunk);
  size_t lines = rig.log.records().size() - lines_before;
  CHECK(lines <= 10);
  CHECK(lines >= 1);
  // The interval ends: the suppressed counts are logged, once per reason.
  rig.run_for(61'000);
  CHECK(rig.log.contains("similar line(s) (vm-1, bad_json) suppressed", LogLevel::kWarn));
  CHECK(rig.log.records().size() - lines_before <= 20);
}

namespace {
void publish_retained_status(AgentRig& rig, const std::string& payload) {
  auto attacker = rig.bus.make_client("attacker-status");
  REQUIRE(attacker->connect().ok());
  REQUIRE(attacker->publish(Message{topics::device_status("vm-1"), payload, 1, true}).ok());
  rig.bus.deliver_all();
}
}  // namespace

TEST_CASE("a forged retained offline, then an agent restart: the device is sellable at once") {
  AgentRig rig;
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  rig.crash_agent();
  proto::PresenceStatus offline{"vm-1", dev.boot_id, false, rig.clock.wall_ms()};
  crypto::Key wrong = crypto::Key::generate();
  publish_retained_status(
      rig, proto::encode(offline, crypto::sign(wrong, proto::encode_canonical(offline))));
  rig.start_agent();
  rig.bus.deliver_all();
  // The retained forgery is rejected; the device is asked for its own status.
  REQUIRE(rig.run_until([&] { return rig.online("vm-1"); }, 500));
  CHECK(rig.create_order("vm-1", 1, "", "").ok());
  CHECK(rig.core->take_metrics().status_requests_total >= 1);
}

TEST_CASE("junk over the retained status, then a restart: the device re-announces at once") {
  AgentRig rig;
  rig.stocked_device(kSlots, 1);
  rig.crash_agent();
  publish_retained_status(rig, "junk");
  rig.start_agent();
  REQUIRE(rig.run_until([&] { return rig.online("vm-1"); }, 500));
}

TEST_CASE("no retained status at all after a restart: the device is asked after the probe delay") {
  AgentRig rig;
  rig.stocked_device(kSlots, 1);
  rig.crash_agent();
  // An empty retained message deletes the retained one; the agent's queued
  // copy is lost too, so nothing at all arrives.
  rig.bus.set_filter([](const InMemoryBus::Envelope& e) {
    return e.message.payload.empty() ? InMemoryBus::Fault::drop() : InMemoryBus::Fault::deliver();
  });
  publish_retained_status(rig, "");
  REQUIRE_FALSE(rig.bus.retained(topics::device_status("vm-1")).has_value());
  rig.start_agent();
  rig.run_for(100);
  CHECK_FALSE(rig.online("vm-1"));
  REQUIRE(rig.run_until([&] { return rig.online("vm-1"); }, 4000));
}

TEST_CASE("a replayed genuine offline will of the live session is corrected at once") {
  AgentRig rig;
  DeviceSim& dev = rig.stocked_device(kSlots, 1);
  Message will = fw::DeviceCore::presence(dev.ledger->identity(), false, rig.clock.wall_ms());
  publish_retained_status(rig, will.payload);
  REQUIRE(rig.run_until([&] { return rig.online("vm-1"); }, 200));
  CHECK(rig.create_order("vm-1", 1, "", "").ok());
}

TEST_CASE("a client holds at most max_open_reservations_per_client unpaid reservations") {
  AgentOptions o = rig_test::test_agent_options();
  o.max_open_reservations_per_client = 2;
  AgentRig rig(o);
  rig.stocked_device(kSlots, 5);
  auto a = rig.create_order("vm-1", 1, "app-1", "");
  auto b = rig.create_order("vm-1", 1, "app-1", "");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  auto third = rig.create_order("vm-1", 1, "app-1", "");
  REQUIRE_FALSE(third.ok());
  CHECK(third.error().code == "too_many_reservations");
  CHECK(rig.create_order("vm-1", 1, "app-2", "").ok());  // another client
  // The same idempotent request again is the same order, not a new one.
  auto keyed = rig.create_order("vm-1", 1, "app-2", "k-1");
  REQUIRE(keyed.ok());
  CHECK(rig.create_order("vm-1", 1, "app-2", "k-1")->id == keyed->id);
  // Cancelling (or paying) one frees a place.
  REQUIRE(rig.core->cancel(a->id).ok());
  CHECK(rig.create_order("vm-1", 1, "app-1", "").ok());
  CHECK(rig.slot("vm-1", 1).reserved == 4);
}

TEST_CASE("the reservation cap survives a restart: stored open reservations count again") {
  AgentOptions o = rig_test::test_agent_options();
  o.max_open_reservations_per_client = 2;
  AgentRig rig(o);
  rig.stocked_device(kSlots, 5);
  auto a = rig.create_order("vm-1", 1, "app-1", "");
  REQUIRE(a.ok());
  REQUIRE(rig.create_order("vm-1", 1, "app-1", "").ok());
  rig.crash_agent();
  rig.step();
  rig.start_agent();
  rig.bus.deliver_all();
  auto third = rig.create_order("vm-1", 1, "app-1", "");
  REQUIRE_FALSE(third.ok());
  CHECK(third.error().code == "too_many_reservations");
  CHECK(rig.create_order("vm-1", 1, "app-2", "").ok());  // another client
  REQUIRE(rig.core->cancel(a->id).ok());                 // a restored one frees a place
  CHECK(rig.create_order("vm-1", 1, "app-1", "").ok());
}

TEST_CASE(
    "order ids start with their creation time, so later orders sort after, then 128 random bits") {
  AgentRig rig;
  rig.stocked_device(kSlots, 3);
  auto first = rig.create_order("vm-1", 1, "", "");
  REQUIRE(first.ok());
  rig.step(1000);
  auto second = rig.create_order("vm-1", 1, "", "");
  REQUIRE(second.ok());
  for (const Order* o : {&*first, &*second}) {
    REQUIRE(o->id.size() == 4 + 12 + 32);  // within proto::kMaxIdLength
    CHECK(o->id.rfind("ord-", 0) == 0);
    CHECK(std::stoll(o->id.substr(4, 12), nullptr, 16) == o->created_ms);
    CHECK(o->id.find_first_not_of("0123456789abcdef", 4) == std::string::npos);
  }
  CHECK(second->created_ms > first->created_ms);
  CHECK(first->id < second->id);
  CHECK(first->id.substr(16) != second->id.substr(16));
}
