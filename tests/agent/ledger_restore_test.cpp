// Ledgers that go back in time (docs/protocol.md, "Ledgers"): real firmware
// device cores and the agent core on the InMemoryBus. An older copy of a
// machine's ledger.db put back under the same ledger id reuses seqs the
// agent holds other events under; none of its new events is acknowledged
// away unprocessed, the device goes on as a new ledger, and sales go on. A
// retired ledger's late dispense result is judged, never dropped.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "agent_rig.hpp"

using namespace vend;
using namespace vend::agent;
using vend::agent::test::AgentRig;
using vend::agent::test::DeviceSim;

namespace {

const std::vector<SlotSpec> kSlots = {{1, "cola", 150, 10}, {2, "water", 90, 5}};

uint64_t agent_seq(AgentRig& rig, const std::string& device) {
  for (const auto& d : rig.core->devices()) {
    if (d.id == device) return d.last_processed_seq;
  }
  FAIL("no device " << device);
  return 0;
}

void sell_one(AgentRig& rig, const std::string& device, int slot, const std::string& payment) {
  auto o = rig.create_order(device, slot, "", "");
  REQUIRE(o.ok());
  REQUIRE(rig.pay(o->id, payment, o->price_cents).ok());
  REQUIRE(rig.run_until([&] { return rig.state_of(o->id) == OrderState::kCompleted; }));
}

// A machine with 3 items in slot 1, a backup of its ledger taken then, and
// after it a sale (its start and its result) and a restock of slot 2,
// processed and acknowledged: the agent's seq is 4, the backup's 1.
std::string backed_up_then_used(AgentRig& rig, DeviceSim& dev) {
  dev.restock(1, 3);
  REQUIRE(rig.run_until(
      [&] { return rig.pool("vm-1", 1) == 3 && dev.ledger->outbox_depth().value() == 0; }));
  const std::string backup = rig.dir.file("vm-1.ledger.backup");
  dev.back_up_ledger(backup);
  REQUIRE(rig.run_until([&] { return rig.online("vm-1"); }));
  sell_one(rig, "vm-1", 1, "pay-before");
  dev.restock(2, 2);
  REQUIRE(rig.run_until(
      [&] { return rig.pool("vm-1", 2) == 2 && dev.ledger->outbox_depth().value() == 0; }));
  REQUIRE(agent_seq(rig, "vm-1") == 4);
  return backup;
}

}  // namespace

TEST_CASE("an older ledger.db copied back: its new events are processed under a new ledger") {
  AgentRig rig;
  DeviceSim& dev = rig.add_device("vm-1", kSlots);
  const std::string backup = backed_up_then_used(rig, dev);
  const std::string ledger_id = dev.ledger->identity().ledger_id;

  dev.restore_ledger(backup);
  REQUIRE(dev.ledger->identity().ledger_id == ledger_id);
  REQUIRE(dev.ledger->last_seq().value() == 1);
  // Seq 2 again, another event: before, the agent re-acked it as a
  // duplicate and the device deleted it unprocessed once its seq reached 4.
  dev.restock(1, 1);
  dev.restock(1, 1);
  REQUIRE(rig.run_until([&] {
    return dev.ledger->identity().ledger_id != ledger_id &&
           dev.ledger->outbox_depth().value() == 0 && rig.pool("vm-1", 2) == 0;
  }));
  // Both tokens events processed: 2 left of the first restock, 2 new ones.
  CHECK(rig.pool("vm-1", 1) == 4);
  // The new ledger: the two events carried on, then the device's fault.
  CHECK(dev.ledger->last_seq().value() >= 3);
  CHECK(agent_seq(rig, "vm-1") == dev.ledger->last_seq().value());
  auto metrics = rig.core->take_metrics();
  CHECK(metrics.ledgers_replaced_total == 1);
  rig.check_stock_invariant();

  sell_one(rig, "vm-1", 1, "pay-after");
  CHECK(rig.pool("vm-1", 1) == 3);
  rig.check_stock_invariant();
}

TEST_CASE("a restored ledger that runs past the agent's seq: nothing beyond it is processed") {
  AgentRig rig;
  DeviceSim& dev = rig.add_device("vm-1", kSlots);
  const std::string backup = backed_up_then_used(rig, dev);
  const std::string ledger_id = dev.ledger->identity().ledger_id;

  // The agent is down while the card is restored and used: seqs 2..6 again,
  // other events. Seq 4 is the agent's last processed one (its mac is in
  // the log), seqs 5 and 6 would be "next" to it.
  rig.crash_agent();
  dev.restore_ledger(backup);
  for (int i = 0; i < 5; ++i) dev.restock(1, 1);
  rig.run_for(100);
  REQUIRE(dev.ledger->last_seq().value() == 6);

  rig.start_agent();
  REQUIRE(rig.run_until([&] {
    return dev.ledger->identity().ledger_id != ledger_id &&
           dev.ledger->outbox_depth().value() == 0 && rig.pool("vm-1", 2) == 0;
  }));
  CHECK(rig.pool("vm-1", 1) == 2 + 5);  // every new tokens event, none acked away
  auto metrics = rig.core->take_metrics();
  CHECK(metrics.diverged_events_total >= 1);
  CHECK(metrics.ledgers_replaced_total == 1);
  CHECK(agent_seq(rig, "vm-1") == dev.ledger->last_seq().value());
  rig.check_stock_invariant();
  sell_one(rig, "vm-1", 1, "pay-after");
  rig.check_stock_invariant();
}

TEST_CASE("a late DISPENSED of a swapped board: applied, or a contradiction, never dropped") {
  AgentRig rig;
  DeviceSim& old_board = rig.add_device("vm-1", kSlots);
  old_board.restock(1, 3);
  REQUIRE(rig.run_until(
      [&] { return rig.pool("vm-1", 1) == 3 && old_board.ledger->outbox_depth().value() == 0; }));
  // A paid order: the old board turns the motor, and loses its network
  // before the result goes out. The result waits in its outbox.
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  REQUIRE(rig.pay(o->id, "pay-1", o->price_cents).ok());
  REQUIRE(rig.run_until([&] { return old_board.machine.rotations() == 1; }));
  rig.bus.partition("vm-1", true);
  rig.run_for(200);
  REQUIRE(old_board.ledger->outbox_depth().value() == 1);
  old_board.power_cut();
  rig.bus.partition("vm-1", false);

  // A new board with the machine's id and key settles the order: it cannot
  // spend the old board's token, so the order is refunded.
  DeviceSim new_board(rig.bus, rig.clock, rig.dir.file("vm-1.new-board.ledger"), "vm-1",
                      old_board.key, {{1, 10, "cola", -1}, {2, 5, "water", -1}});
  (void)new_board.random.next_u64();
  new_board.boot();
  for (int i = 0; i < 3000 && rig.state_of(o->id) != OrderState::kRefunded; ++i) {
    new_board.tick();
    rig.step();
  }
  REQUIRE(rig.state_of(o->id) == OrderState::kRefunded);
  CHECK(rig.core->take_metrics().contradictions_total == 0);

  // The old board is switched on at the workshop: its DISPENSED, signed
  // under its retired ledger, reaches the agent. The item did leave: a
  // contradiction, raised once however often the board sends it.
  new_board.power_cut();
  old_board.boot();
  rig.run_for(3000);
  auto metrics = rig.core->take_metrics();
  CHECK(metrics.contradictions_total == 1);
  CHECK(metrics.retired_ledger_events_total >= 2);      // sent again after retransmit_ms
  CHECK(rig.state_of(o->id) == OrderState::kRefunded);  // an operator decides
  rig.check_stock_invariant();
}

TEST_CASE("a late DISPENSED of a retired ledger settles an order still waiting for it") {
  AgentRig rig;
  DeviceSim& old_board = rig.add_device("vm-1", kSlots);
  old_board.restock(1, 2);
  REQUIRE(rig.run_until(
      [&] { return rig.pool("vm-1", 1) == 2 && old_board.ledger->outbox_depth().value() == 0; }));
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  REQUIRE(rig.pay(o->id, "pay-1", o->price_cents).ok());
  REQUIRE(rig.run_until([&] { return old_board.machine.rotations() == 1; }));
  rig.bus.partition("vm-1", true);
  rig.run_for(200);
  REQUIRE(old_board.ledger->outbox_depth().value() == 1);  // the DISPENSED, unsent
  old_board.power_cut();
  rig.bus.partition("vm-1", false);

  // A new board names its ledger (the old one is retired) and goes dark
  // before the command the agent then sends again reaches it.
  DeviceSim new_board(rig.bus, rig.clock, rig.dir.file("vm-1.new-board.ledger"), "vm-1",
                      old_board.key, {{1, 10, "cola", -1}, {2, 5, "water", -1}});
  (void)new_board.random.next_u64();
  new_board.boot();
  new_board.restock(2, 1);
  for (int i = 0; i < 20; ++i) {  // its tokens event is published, nothing delivered yet
    rig.clock.advance(10);
    new_board.tick();
  }
  new_board.power_cut();
  REQUIRE(rig.run_until([&] { return rig.core->take_metrics().ledgers_replaced_total == 1; }));
  REQUIRE(rig.state_of(o->id) == OrderState::kDispatched);

  // The old board's result, under its retired ledger: the order takes it.
  old_board.boot();
  REQUIRE(rig.run_until([&] { return rig.state_of(o->id) == OrderState::kCompleted; }));
  auto metrics = rig.core->take_metrics();
  CHECK(metrics.contradictions_total == 0);
  CHECK(metrics.retired_ledger_events_total >= 1);
  rig.check_stock_invariant();
}

// The item of a paid order drops, the power is cut before its result goes
// out, and the card is restored from a backup older than what the agent
// processed: the copy knows neither the order nor the spent token. The
// re-sent command names the ledger and the agent's seq, so the device
// starts a new ledger instead of dispensing again; the agent keeps the
// order's token out of sale for good, through its own restart, and refunds.
TEST_CASE("a restored card meets the re-sent command: no second dispense, the token never resold") {
  AgentRig rig;
  DeviceSim& dev = rig.add_device("vm-1", kSlots);
  dev.restock(1, 3);
  REQUIRE(rig.run_until(
      [&] { return rig.pool("vm-1", 1) == 3 && dev.ledger->outbox_depth().value() == 0; }));
  const std::string backup = rig.dir.file("vm-1.ledger.backup");
  dev.back_up_ledger(backup);
  REQUIRE(rig.run_until([&] { return rig.online("vm-1"); }));
  dev.restock(2, 1);
  REQUIRE(rig.run_until(
      [&] { return rig.pool("vm-1", 2) == 1 && dev.ledger->outbox_depth().value() == 0; }));
  const std::string ledger_id = dev.ledger->identity().ledger_id;

  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  REQUIRE(rig.pay(o->id, "pay-1", o->price_cents).ok());
  REQUIRE(rig.run_until([&] { return dev.machine.rotations() == 1; }));
  rig.bus.partition("vm-1", true);
  rig.run_for(200);
  REQUIRE(dev.ledger->outbox_depth().value() == 1);  // the DISPENSED, unsent
  rig.bus.partition("vm-1", false);
  dev.restore_ledger(backup);  // a power cut first, nothing sent: the copy of seq 1
  REQUIRE_FALSE(dev.ledger->find_dispense(o->id).value().has_value());

  // The command sent again names seq 2 of the ledger: the copy ends at 1.
  REQUIRE(rig.run_until([&] {
    return dev.ledger->identity().ledger_id != ledger_id &&
           rig.core->take_metrics().ledgers_replaced_total == 1;
  }));
  REQUIRE(rig.run_until([&] { return rig.order(o->id).reason == "ledger_replaced"; }));
  CHECK(rig.state_of(o->id) == OrderState::kDispatched);

  // The mark is durable with the switch: a restarted agent does not send
  // the command again (the new ledger would run it: its copy of the token
  // is available).
  rig.crash_agent();
  rig.start_agent();
  REQUIRE(rig.run_until([&] { return rig.state_of(o->id) == OrderState::kRefunded; }, 200'000));
  CHECK(rig.order(o->id).reason == "ledger_replaced");
  CHECK(dev.machine.rotations() == 1);
  CHECK(rig.pool("vm-1", 1) == 2);  // the dropped item's token burned, not back for sale
  rig.check_stock_invariant();

  // The two items left sell; nothing more is offered.
  sell_one(rig, "vm-1", 1, "pay-2");
  sell_one(rig, "vm-1", 1, "pay-3");
  CHECK(dev.machine.rotations() == 3);
  CHECK(rig.pool("vm-1", 1) == 0);
  CHECK(rig.core->take_metrics().contradictions_total == 0);
  rig.check_stock_invariant();
}
