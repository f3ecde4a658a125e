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
    PartsRig::run_for(ms, [&] { dispenser.tick(); });
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
  rig.run_for(3000);
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
  auto tick = [&] { rebooted.tick(); };
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
