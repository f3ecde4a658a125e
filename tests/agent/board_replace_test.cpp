// Replaceable boards (docs/operations.md, "Replacing a board or its SD
// card"): real firmware device cores and the agent core on the InMemoryBus.
// A reflashed SD card or a replacement board is a new ledger with seq from
// 1; the agent processes every one of its events, deletes none unprocessed,
// refuses late events of the old ledger and reconciles the pools from a full
// snapshot.
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

// Records every message on one topic filter, as a bystander on the broker.
class Spy {
 public:
  Spy(InMemoryBus& bus, const std::string& filter) : client_(bus.make_client("spy", {}, true)) {
    client_->on_message([this](const Message& m) { seen.push_back(m); });
    REQUIRE(client_->connect().ok());
    REQUIRE(client_->subscribe(filter).ok());
  }
  // Publishes `message` again, as a broker redelivery or a replay would.
  void replay(const Message& message) { REQUIRE(client_->publish(message).ok()); }

  // The last message whose payload contains `needle`.
  Message last_with(const std::string& needle) const {
    for (auto it = seen.rbegin(); it != seen.rend(); ++it) {
      if (it->payload.find(needle) != std::string::npos) return *it;
    }
    FAIL("no message with " << needle);
    return {};
  }

  std::vector<Message> seen;

 private:
  std::unique_ptr<InMemoryClient> client_;
};

// The old ledger: `count` one-item restocks of slot 2, every event processed
// and acknowledged. Returns its last seq.
uint64_t old_ledger_with_events(AgentRig& rig, DeviceSim& dev, int count) {
  for (int i = 0; i < count; ++i) dev.restock(2, 1);
  REQUIRE(rig.run_until(
      [&] { return rig.pool(dev.id, 2) == count && dev.ledger->outbox_depth().value() == 0; }));
  return dev.ledger->last_seq().value();
}

uint64_t agent_seq(AgentRig& rig, const std::string& device) {
  for (const auto& d : rig.core->devices()) {
    if (d.id == device) return d.last_processed_seq;
  }
  FAIL("no device " << device);
  return 0;
}

}  // namespace

TEST_CASE("a reflashed SD card: the new ledger's events from seq 1 are all processed") {
  AgentRig rig;
  DeviceSim& dev = rig.add_device("vm-1", kSlots);
  const std::string old_ledger = dev.ledger->identity().ledger_id;
  const uint64_t old_seq = old_ledger_with_events(rig, dev, 4);
  REQUIRE(old_seq == 4);

  dev.reflash();
  CHECK(dev.ledger->identity().ledger_id != old_ledger);
  CHECK(dev.ledger->last_seq().value() == 0);
  // Six events on the new ledger: seqs 1..4 collide with the old ones, 5
  // and 6 pass them (the old agent dropped 1..4 as duplicates and acked
  // them away, then took 5 and 6 as the next ones).
  for (int i = 0; i < 6; ++i) dev.restock(1, 1);
  REQUIRE(dev.ledger->last_seq().value() > old_seq);
  REQUIRE(rig.run_until([&] { return dev.ledger->outbox_depth().value() == 0; }));
  CHECK(rig.pool("vm-1", 1) == 6);  // every tokens event of the new ledger
  // The old ledger's tokens leave the pool: the new ledger does not hold them.
  CHECK(rig.run_until([&] { return rig.pool("vm-1", 2) == 0; }));
  CHECK(agent_seq(rig, "vm-1") == dev.ledger->last_seq().value());
  auto metrics = rig.core->take_metrics();
  CHECK(metrics.duplicate_events_total == 0);
  CHECK(metrics.ledgers_replaced_total == 1);
  rig.check_stock_invariant();

  // Sales go on from the new ledger's tokens.
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  REQUIRE(rig.pay(o->id, "pay-1", o->price_cents).ok());
  REQUIRE(rig.run_until([&] { return rig.state_of(o->id) == OrderState::kCompleted; }));
  CHECK(rig.pool("vm-1", 1) == 5);
}

TEST_CASE("a stale ack of the old ledger never deletes the new ledger's events") {
  AgentRig rig;
  Spy commands(rig.bus, "vend/v1/dev/vm-1/cmd");
  DeviceSim& dev = rig.add_device("vm-1", kSlots);
  old_ledger_with_events(rig, dev, 4);
  const Message old_ack = commands.last_with("\"upto_seq\":4");

  // The agent is down while the card is reflashed and restocked: the new
  // ledger's events wait in its outbox, unprocessed.
  rig.crash_agent();
  dev.reflash();
  for (int i = 0; i < 5; ++i) dev.restock(1, 1);
  for (int i = 0; i < 5; ++i) {
    rig.step();
  }
  REQUIRE(dev.ledger->outbox_depth().value() == 5);
  // The old ack again (a broker redelivery, a replay): signed by the agent
  // with the device's key, for seqs 1..4 of the old ledger.
  commands.replay(old_ack);
  rig.bus.deliver_all();
  CHECK(dev.ledger->outbox_depth().value() == 5);

  rig.start_agent();
  REQUIRE(rig.run_until([&] { return dev.ledger->outbox_depth().value() == 0; }));
  CHECK(rig.pool("vm-1", 1) == 5);
  rig.check_stock_invariant();
}

TEST_CASE("late events of a retired ledger are refused, also after an agent restart") {
  AgentRig rig;
  Spy events(rig.bus, "vend/v1/dev/vm-1/evt");
  DeviceSim& dev = rig.add_device("vm-1", kSlots);
  old_ledger_with_events(rig, dev, 2);
  const Message old_event = events.last_with("\"seq\":2");

  dev.reflash();
  dev.restock(1, 3);
  REQUIRE(rig.run_until([&] {
    return rig.pool("vm-1", 1) == 3 && rig.pool("vm-1", 2) == 0 &&
           dev.ledger->outbox_depth().value() == 0;
  }));
  const uint64_t seq = agent_seq(rig, "vm-1");
  const int64_t rejected = rig.core->take_metrics().events_rejected_total;

  events.replay(old_event);  // a late copy of the old board's seq 2
  rig.run_for(200);
  auto metrics = rig.core->take_metrics();
  CHECK(metrics.retired_ledger_events_total == 1);
  CHECK(metrics.events_rejected_total == rejected + 1);
  CHECK(agent_seq(rig, "vm-1") == seq);
  CHECK(rig.pool("vm-1", 2) == 0);

  rig.crash_agent();
  rig.start_agent();
  CHECK(agent_seq(rig, "vm-1") == seq);  // the new ledger's seq, durable
  events.replay(old_event);
  rig.run_for(200);
  CHECK(rig.core->take_metrics().retired_ledger_events_total == 1);
  CHECK(rig.pool("vm-1", 2) == 0);
  dev.restock(1, 1);  // the new ledger goes on where it was
  REQUIRE(rig.run_until([&] { return rig.pool("vm-1", 1) == 4; }));
  rig.check_stock_invariant();
}

TEST_CASE("a replacement board: same id and key, a blank ledger; an order in flight is settled") {
  AgentRig rig;
  DeviceSim& old_board = rig.add_device("vm-1", kSlots);
  old_board.restock(1, 3);
  REQUIRE(rig.run_until([&] { return rig.pool("vm-1", 1) == 3; }));
  const std::string old_ledger = old_board.ledger->identity().ledger_id;
  // An order is paid; the board dies before its dispense command reaches
  // it, so the command waits in the machine's broker session.
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  REQUIRE(rig.pay(o->id, "pay-1", o->price_cents).ok());
  old_board.power_cut();
  rig.run_for(100);
  CHECK(rig.state_of(o->id) == OrderState::kDispatched);

  // The operator installs a new board with the machine's id and key file.
  DeviceSim new_board(rig.bus, rig.clock, rig.dir.file("vm-1.new-board.ledger"), "vm-1",
                      old_board.key, {{1, 10, "cola", -1}, {2, 5, "water", -1}});
  // Another board draws other random numbers (DeviceSim seeds by device id).
  (void)new_board.random.next_u64();
  new_board.boot();
  CHECK(new_board.ledger->identity().ledger_id != old_ledger);
  auto settled = [&] {
    OrderState s = rig.state_of(o->id);
    return s != OrderState::kDispatched && s != OrderState::kFailed;
  };
  for (int i = 0; i < 3000 && !(settled() && rig.pool("vm-1", 1) == 0); ++i) {
    new_board.tick();
    rig.step();
  }
  // The new board cannot spend the old board's token: refunded, not sold.
  CHECK(rig.state_of(o->id) == OrderState::kRefunded);
  CHECK(new_board.machine.rotations() == 0);
  CHECK(rig.pool("vm-1", 1) == 0);  // the old board's tokens are gone with it
  new_board.restock(1, 2);
  for (int i = 0; i < 500 && rig.pool("vm-1", 1) != 2; ++i) {
    new_board.tick();
    rig.step();
  }
  CHECK(rig.pool("vm-1", 1) == 2);
  CHECK(rig.core->take_metrics().ledgers_replaced_total == 1);
  rig.check_stock_invariant();
}

TEST_CASE("key rotation: the old key works until the device signs with the new one") {
  AgentRig rig;
  Spy events(rig.bus, "vend/v1/dev/vm-1/evt");
  DeviceSim& dev = rig.add_device("vm-1", kSlots);
  dev.restock(1, 2);
  REQUIRE(rig.run_until([&] { return rig.pool("vm-1", 1) == 2; }));
  const Message old_signed = events.last_with("\"type\":\"tokens\"");

  auto rotated = rig.core->rotate_key("vm-1");
  REQUIRE(rotated.ok());
  auto new_key = crypto::Key::from_hex(rotated->key_hex);
  REQUIRE(new_key.ok());
  CHECK(rotated->key_hex != dev.key.to_hex());
  auto pending = [&] {
    for (const auto& d : rig.core->devices()) {
      if (d.id == "vm-1") return d.key_rotation_pending;
    }
    return false;
  };
  CHECK(pending());
  // Grace: the machine still signs with the old key, and is still served.
  dev.restock(1, 1);
  REQUIRE(rig.run_until([&] { return rig.pool("vm-1", 1) == 3; }));
  CHECK(pending());

  // The operator installs the new key file and restarts the firmware.
  dev.power_cut();
  dev.key = *new_key;
  dev.boot();
  REQUIRE(rig.run_until([&] { return rig.online("vm-1") && !pending(); }));
  CHECK(rig.core->take_metrics().key_rotations_total == 1);
  // Commands are signed with the new key now: a sale completes.
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  REQUIRE(rig.pay(o->id, "pay-1", o->price_cents).ok());
  REQUIRE(rig.run_until([&] { return rig.state_of(o->id) == OrderState::kCompleted; }));

  // The old key is revoked: what it signs is refused, also after a restart.
  const int64_t rejected = rig.core->take_metrics().events_rejected_total;
  events.replay(old_signed);
  rig.run_for(100);
  CHECK(rig.core->take_metrics().events_rejected_total == rejected + 1);
  rig.crash_agent();
  rig.start_agent();
  CHECK_FALSE(pending());
  dev.restock(1, 1);
  REQUIRE(rig.run_until([&] { return rig.pool("vm-1", 1) == 3; }));
  events.replay(old_signed);
  rig.run_for(100);
  CHECK(rig.core->take_metrics().events_rejected_total == 1);
  CHECK(rig.core->rotate_key("vm-9").error().code == "not_found");
  rig.check_stock_invariant();
}

TEST_CASE("decommission: out of sale, reservations cancelled, key revoked, id kept") {
  AgentRig rig;
  DeviceSim& dev = rig.add_device("vm-1", kSlots);
  dev.restock(1, 3);
  dev.restock(2, 1);
  REQUIRE(rig.run_until([&] { return rig.pool("vm-1", 1) == 3 && rig.pool("vm-1", 2) == 1; }));

  // A paid order in flight: the machine may still dispense it, so not yet.
  auto paid = rig.create_order("vm-1", 1, "", "");
  REQUIRE(paid.ok());
  REQUIRE(rig.pay(paid->id, "pay-1", paid->price_cents).ok());
  auto refused = rig.core->decommission_device("vm-1");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == "conflict");
  REQUIRE(rig.run_until([&] { return rig.state_of(paid->id) == OrderState::kCompleted; }));

  auto reserved = rig.create_order("vm-1", 1, "", "");
  REQUIRE(reserved.ok());
  auto done = rig.core->decommission_device("vm-1");
  REQUIRE(done.ok());
  CHECK(done->tokens_withdrawn == 3);  // slot 1: 1 in the pool + 1 reserved; slot 2: 1
  CHECK(done->orders_cancelled == 1);
  CHECK(rig.state_of(reserved->id) == OrderState::kCancelled);
  CHECK(rig.pool("vm-1", 1) == 0);
  CHECK(rig.pool("vm-1", 2) == 0);
  CHECK(rig.slot("vm-1", 1).burned == 2);
  CHECK(rig.create_order("vm-1", 2, "", "").error().code == "decommissioned");
  CHECK(rig.core->request_restock("vm-1", 1, 1).error().code == "decommissioned");
  CHECK(rig.core->rotate_key("vm-1").error().code == "decommissioned");
  CHECK(rig.core->decommission_device("vm-1").error().code == "conflict");

  // The machine is still running: whatever it signs is refused and counted.
  dev.restock(2, 2);
  rig.run_for(2000);
  CHECK(rig.pool("vm-1", 2) == 0);
  CHECK(rig.core->take_metrics().decommissioned_messages_total > 0);
  CHECK_FALSE(rig.online("vm-1"));
  // The id is never handed out again by accident, and it all survives a restart.
  CHECK(rig.core->provision_device("vm-1", kSlots).error().code == "conflict");
  rig.crash_agent();
  rig.start_agent();
  CHECK(rig.create_order("vm-1", 2, "", "").error().code == "decommissioned");
  bool listed = false;
  for (const auto& d : rig.core->devices()) listed = listed || (d.id == "vm-1" && d.decommissioned);
  CHECK(listed);
  rig.run_for(1000);
  CHECK(rig.pool("vm-1", 2) == 0);
  rig.check_stock_invariant();
}
