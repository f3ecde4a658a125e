// The ledger fence of a dispense (docs/protocol.md, "A ledger that goes back
// in time"): a command names the ledger the cloud knows and the last seq of
// it the cloud processed. A file that holds less of that ledger, or is a
// ledger the cloud never named, may have lost what it did for the order: it
// starts a new ledger, durably, before anything runs, and refuses the
// command; the token stays available and the motor never moves.
#include <doctest/doctest.h>

#include "parts_rig.hpp"

using namespace vend;
using namespace vend::fw;
using vend::fw::test::kDevice;
using vend::fw::test::outbox_bodies;
using vend::fw::test::PartsRig;

namespace {

struct FenceRig : PartsRig {
  FenceRig() : hal(machine.hal()) { REQUIRE(dispenser.boot().ok()); }
  void run_for(int64_t ms) {
    PartsRig::run_for(ms, [&] {
      ack_all();
      dispenser.tick();
    });
  }
  proto::DispenseCommand fenced(const std::string& order, const std::string& token,
                                const std::string& ledger_id, uint64_t seq) {
    proto::DispenseCommand c = dispense(order, 1, token);
    c.ledger_id = ledger_id;
    c.ledger_seq = seq;
    return c;
  }
  bool known(const std::string& order) {
    auto row = ledger.find_dispense(order);
    REQUIRE(row.ok());
    return row->has_value();
  }
  TokenState token(const std::string& t) {
    auto row = ledger.find_token(t);
    REQUIRE(row.ok());
    REQUIRE(row->has_value());
    return (*row)->first;
  }
  int regressed_faults() {
    int n = 0;
    for (const auto& f : outbox_bodies<proto::Fault>(ledger)) n += f.code == "ledger_regressed";
    return n;
  }

  Hal hal;
  Dispenser dispenser{ledger, hal, clock, log, options, storage, sender, refusals, stats};
};

}  // namespace

TEST_CASE("dispense fence: this ledger at a seq the file holds, or no ledger named, runs") {
  FenceRig rig;
  auto tokens = rig.restock(1, 3);  // the tokens event is seq 1
  const std::string id = rig.ledger.identity().ledger_id;
  CHECK(rig.dispenser.on_dispense(rig.fenced("o1", tokens[0], id, 1)).result == "accepted");
  CHECK(rig.dispenser.on_dispense(rig.fenced("o0", tokens[1], id, 0)).result == "accepted");
  CHECK(rig.dispenser.on_dispense(rig.dispense("o2", 1, tokens[2])).result == "accepted");
  rig.run_for(3000);
  CHECK(rig.machine.rotations() == 3);
  CHECK(rig.ledger.identity().ledger_id == id);
  CHECK(rig.regressed_faults() == 0);
}

TEST_CASE("dispense fence: beyond the file's last seq starts a new ledger and runs nothing") {
  FenceRig rig;
  auto tokens = rig.restock(1, 2);
  const std::string old_id = rig.ledger.identity().ledger_id;
  const uint64_t last = rig.ledger.last_seq().value();

  // The cloud processed seq last + 3 of this ledger: the file lost them.
  CommandOutcome out = rig.dispenser.on_dispense(rig.fenced("o1", tokens[0], old_id, last + 3));
  CHECK(out.result == "refused");
  CHECK(out.reason == "ledger_regressed");
  CHECK(rig.stats.refused == 1);
  const std::string new_id = rig.ledger.identity().ledger_id;
  CHECK(new_id != old_id);
  CHECK_FALSE(rig.known("o1"));
  CHECK(rig.token(tokens[0]) == TokenState::kAvailable);
  CHECK(rig.regressed_faults() == 1);
  rig.PartsRig::run_for(3000, [&] { rig.dispenser.tick(); });  // the fault stays held
  CHECK(rig.machine.rotations() == 0);

  // Durable before the refusal: a restart opens the new ledger, which
  // remembers the one it left.
  auto reopened = rig.open_ledger();
  CHECK(reopened.identity().ledger_id == new_id);
  CHECK(reopened.was_ledger(old_id).value());
  CHECK_FALSE(reopened.was_ledger(new_id).value());

  // The same command again (re-sent, or still queued at the broker) names
  // the ledger this file left: refused, and no further ledger.
  CommandOutcome again = rig.dispenser.on_dispense(rig.fenced("o1", tokens[0], old_id, last + 3));
  CHECK(again.reason == "other_ledger");
  CHECK(rig.ledger.identity().ledger_id == new_id);
  CHECK(rig.regressed_faults() == 1);
  // Once the cloud names the new ledger, commands run again.
  CHECK(rig.dispenser.on_dispense(rig.fenced("o2", tokens[1], new_id, 1)).result == "accepted");
  rig.run_for(3000);
  CHECK(rig.machine.rotations() == 1);
}

TEST_CASE("dispense fence: a ledger this file never was starts a new ledger") {
  FenceRig rig;
  auto tokens = rig.restock(1, 1);
  const std::string old_id = rig.ledger.identity().ledger_id;
  // The cloud left this file's ledger for another (this is a copy of a
  // ledger since replaced).
  const std::string cloud_ledger(32, 'e');
  CommandOutcome out = rig.dispenser.on_dispense(rig.fenced("o1", tokens[0], cloud_ledger, 1));
  CHECK(out.reason == "ledger_regressed");
  CHECK(rig.ledger.identity().ledger_id != old_id);
  CHECK(rig.ledger.identity().ledger_id != cloud_ledger);
  CHECK(rig.token(tokens[0]) == TokenState::kAvailable);
  CHECK_FALSE(rig.known("o1"));
}

TEST_CASE("dispense fence: a known order re-reports its result whatever the command names") {
  FenceRig rig;
  auto tokens = rig.restock(1, 1);
  const std::string id = rig.ledger.identity().ledger_id;
  REQUIRE(rig.dispenser.on_dispense(rig.fenced("o1", tokens[0], id, 1)).result == "accepted");
  rig.run_for(3000);
  REQUIRE(rig.machine.rotations() == 1);
  CommandOutcome out = rig.dispenser.on_dispense(rig.fenced("o1", tokens[0], id, 99));
  CHECK(out.result == "duplicate");
  CHECK(rig.ledger.identity().ledger_id == id);
  CHECK(rig.machine.rotations() == 1);
}

TEST_CASE(
    "dispense fence: a new ledger that cannot be written refuses, and the next try starts it") {
  FenceRig rig;
  auto tokens = rig.restock(1, 1);
  const std::string old_id = rig.ledger.identity().ledger_id;
  // A held row the switch cannot read: the transaction fails whole.
  auto other = sql::Database::open(rig.dir.file("ledger.db"), {});
  REQUIRE(other.ok());
  REQUIRE(other
              ->exec("INSERT INTO outbox(seq, type, payload, created_ms) VALUES (2, 'fault', "
                     "'{}', 1); UPDATE meta SET value = 2 WHERE key = 'last_seq'")
              .ok());
  CommandOutcome out = rig.dispenser.on_dispense(rig.fenced("o1", tokens[0], old_id, 9));
  CHECK(out.result == "refused");
  CHECK(out.reason == "storage");
  CHECK(rig.ledger.identity().ledger_id == old_id);
  CHECK_FALSE(rig.known("o1"));
  CHECK(rig.machine.rotations() == 0);

  REQUIRE(other->exec("DELETE FROM outbox WHERE seq = 2").ok());
  CHECK(rig.dispenser.on_dispense(rig.fenced("o1", tokens[0], old_id, 9)).reason ==
        "ledger_regressed");
  CHECK(rig.ledger.identity().ledger_id != old_id);
  CHECK(rig.token(tokens[0]) == TokenState::kAvailable);
}

// An order ACCEPTED when the power went: the file may be an older copy whose
// order ran in the file it replaced. It runs only once the cloud sends it
// again and the command passes the fence; otherwise it expires unrun.
TEST_CASE("dispense fence: an order accepted before a boot waits for the cloud's word") {
  FenceRig rig;
  auto tokens = rig.restock(1, 3);
  const std::string id = rig.ledger.identity().ledger_id;
  // o1 starts its rotation, o2 and o3 are queued; then the power goes.
  REQUIRE(rig.dispenser.on_dispense(rig.fenced("o1", tokens[0], id, 1)).result == "accepted");
  REQUIRE(rig.dispenser.on_dispense(rig.fenced("o2", tokens[1], id, 1)).result == "accepted");
  REQUIRE(rig.dispenser.on_dispense(rig.fenced("o3", tokens[2], id, 1)).result == "accepted");
  rig.machine.power_cut(false);
  const int64_t rotations = rig.machine.rotations();
  Dispenser rebooted{rig.ledger,  rig.hal,    rig.clock,    rig.log,  rig.options,
                     rig.storage, rig.sender, rig.refusals, rig.stats};
  REQUIRE(rebooted.boot().ok());
  CHECK(rig.ledger.find_dispense("o1").value()->state == DispenseState::kUncertain);
  CHECK_FALSE(rebooted.idle());
  auto tick = [&] {
    rig.ack_all();
    rebooted.tick();
  };
  rig.PartsRig::run_for(1000, tick);
  CHECK(rig.machine.rotations() == rotations);  // o2 and o3 wait for the cloud

  // o2 again, naming a seq this file does not hold: refused, a new ledger,
  // still not run.
  CommandOutcome refused = rebooted.on_dispense(rig.fenced("o2", tokens[1], id, 9));
  CHECK(refused.reason == "ledger_regressed");
  const std::string new_id = rig.ledger.identity().ledger_id;
  CHECK(new_id != id);
  // o3 under the new ledger: released and run.
  CHECK(rebooted.on_dispense(rig.fenced("o3", tokens[2], new_id, 0)).result == "accepted");
  rig.PartsRig::run_for(3000, tick);
  CHECK(rig.machine.rotations() == rotations + 1);
  CHECK(rig.ledger.find_dispense("o3").value()->state == DispenseState::kDispensed);

  // o2 is never confirmed: at its expiry it is rejected, the token back.
  rig.PartsRig::run_for(61000, tick);
  CHECK(rig.machine.rotations() == rotations + 1);
  CHECK(rig.ledger.find_dispense("o2").value()->state == DispenseState::kRejected);
  CHECK(rig.token(tokens[1]) == TokenState::kAvailable);
  CHECK(rebooted.idle());
}

// A fenced command's start is announced (dispense_started, stored with
// MOTOR_RUNNING) and the motor waits for the cloud's ack of it: the cloud has
// processed that seq before anything drops.
TEST_CASE("dispense start: the motor waits for the cloud's ack of dispense_started") {
  FenceRig rig;
  auto tokens = rig.restock(1, 1);
  const std::string id = rig.ledger.identity().ledger_id;
  REQUIRE(rig.dispenser.on_dispense(rig.fenced("o1", tokens[0], id, 1)).result == "accepted");
  rig.PartsRig::run_for(2000, [&] { rig.dispenser.tick(); });  // no ack
  CHECK(rig.machine.rotations() == 0);
  CHECK(rig.ledger.find_dispense("o1").value()->state == DispenseState::kMotorRunning);
  auto started = outbox_bodies<proto::DispenseStarted>(rig.ledger);
  REQUIRE(started.size() == 1);
  CHECK(started[0] == proto::DispenseStarted{"o1", 1, tokens[0]});
  CHECK_FALSE(rig.dispenser.idle());

  rig.run_for(3000);  // acknowledged: it runs
  CHECK(rig.machine.rotations() == 1);
  CHECK(rig.ledger.find_dispense("o1").value()->state == DispenseState::kDispensed);
  CHECK(rig.dispenser.idle());
}

TEST_CASE("dispense start: a command naming no ledger (an older agent) runs unannounced") {
  FenceRig rig;
  auto tokens = rig.restock(1, 1);
  REQUIRE(rig.dispenser.on_dispense(rig.dispense("o1", 1, tokens[0])).result == "accepted");
  rig.PartsRig::run_for(3000, [&] { rig.dispenser.tick(); });
  CHECK(rig.machine.rotations() == 1);
  CHECK(outbox_bodies<proto::DispenseStarted>(rig.ledger).empty());
}

TEST_CASE("dispense start: unacknowledged until the command expires, it is rejected unrun") {
  FenceRig rig;
  auto tokens = rig.restock(1, 1);
  const std::string id = rig.ledger.identity().ledger_id;
  proto::DispenseCommand c = rig.fenced("o1", tokens[0], id, 1);
  c.expires_at_ms = rig.clock.wall_ms() + 5000;
  REQUIRE(rig.dispenser.on_dispense(c).result == "accepted");
  rig.PartsRig::run_for(6000, [&] { rig.dispenser.tick(); });
  CHECK(rig.machine.rotations() == 0);
  auto row = rig.ledger.find_dispense("o1").value();
  CHECK(row->state == DispenseState::kRejected);
  CHECK(row->reason == proto::reason::kExpired);
  CHECK(rig.token(tokens[0]) == TokenState::kAvailable);
  CHECK(rig.dispenser.idle());
  // A late ack changes nothing.
  rig.run_for(1000);
  CHECK(rig.machine.rotations() == 0);
}

TEST_CASE("dispense start: power lost while waiting for the ack is UNCERTAIN, never re-run") {
  FenceRig rig;
  auto tokens = rig.restock(1, 1);
  const std::string id = rig.ledger.identity().ledger_id;
  REQUIRE(rig.dispenser.on_dispense(rig.fenced("o1", tokens[0], id, 1)).result == "accepted");
  Dispenser rebooted{rig.ledger,  rig.hal,    rig.clock,    rig.log,  rig.options,
                     rig.storage, rig.sender, rig.refusals, rig.stats};
  REQUIRE(rebooted.boot().ok());
  CHECK(rig.ledger.find_dispense("o1").value()->state == DispenseState::kUncertain);
  CHECK(rig.token(tokens[0]) == TokenState::kBurned);
  const uint64_t last = rig.ledger.last_seq().value();
  CHECK(rebooted.on_dispense(rig.fenced("o1", tokens[0], id, last)).result == "duplicate");
  rig.PartsRig::run_for(3000, [&] {
    rig.ack_all();
    rebooted.tick();
  });
  CHECK(rig.machine.rotations() == 0);
}

// The case the announcement exists for: the item dropped in a file the card
// was then restored over, by a copy taken while the order waited in the
// queue. The cloud processed everything up to the order's start, and the
// copy's boot writes its own events under those seqs: the re-sent command
// names the start's seq and mac, the copy holds another event there, so it
// is refused, a new ledger starts, and the motor never runs the order again.
TEST_CASE("dispense start: a restored copy that lost the start never runs the order again") {
  FenceRig rig;
  auto tokens = rig.restock(1, 2);
  const std::string id = rig.ledger.identity().ledger_id;
  REQUIRE(rig.dispenser.on_dispense(rig.fenced("o0", tokens[0], id, 1)).result == "accepted");
  REQUIRE(rig.dispenser.on_dispense(rig.fenced("o1", tokens[1], id, 1)).result == "accepted");
  REQUIRE(rig.ledger.find_dispense("o1").value()->state == DispenseState::kAccepted);
  const std::string copy = rig.dir.file("copy.db");
  {
    auto db = sql::Database::open(rig.dir.file("ledger.db"), {});
    REQUIRE(db.ok());
    REQUIRE(db->exec("VACUUM INTO '" + copy + "'").ok());
  }
  // o0 runs; o1 is started and its start acknowledged (the cloud processed
  // it); then o1 drops its item and the power goes before its result leaves.
  uint64_t start_seq = 0;
  std::string start_mac;
  rig.PartsRig::run_for(3000, [&] {
    auto o1 = rig.ledger.find_dispense("o1").value();
    if (start_seq == 0 && o1->state == DispenseState::kMotorRunning) {
      start_seq = rig.ledger.last_seq().value();
      auto rows = rig.ledger.outbox_after(start_seq - 1, 1).value();
      REQUIRE(rows.size() == 1);
      start_mac = proto::decode_event(rows[0].payload).value().mac;
      rig.ack_all();
    } else if (start_seq == 0) {
      rig.ack_all();
    }
    rig.dispenser.tick();
  });
  REQUIRE(start_seq > 0);
  REQUIRE(rig.machine.rotations() == 2);
  REQUIRE(rig.ledger.find_dispense("o1").value()->state == DispenseState::kDispensed);

  // The card is restored from the copy and boots: o0 (armed in the copy)
  // becomes UNCERTAIN, o1 is held; the copy's own events take the seqs the
  // cloud processed.
  auto restored = Ledger::open(copy, Identity{kDevice, rig.key, rig.boot_id});
  REQUIRE(restored.ok());
  rig.ledger = std::move(restored).value();
  REQUIRE(rig.sender.boot().ok());
  Dispenser rebooted{rig.ledger,  rig.hal,    rig.clock,    rig.log,  rig.options,
                     rig.storage, rig.sender, rig.refusals, rig.stats};
  REQUIRE(rebooted.boot().ok());
  CHECK(rig.ledger.last_seq().value() >= start_seq);

  proto::DispenseCommand again = rig.fenced("o1", tokens[1], id, start_seq);
  again.ledger_mac = start_mac;
  CommandOutcome out = rebooted.on_dispense(again);
  CHECK(out.result == "refused");
  CHECK(out.reason == "ledger_regressed");
  CHECK(rig.ledger.identity().ledger_id != id);
  rig.PartsRig::run_for(3000, [&] {
    rig.ack_all();
    rebooted.tick();
  });
  CHECK(rig.machine.rotations() == 2);
}
