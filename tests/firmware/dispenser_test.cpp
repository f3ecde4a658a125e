// Dispenser alone: accepting, queueing and running dispenses, the queue's
// bound, refusals while storage is full, repeats, expiry while queued, a
// stuck motor, and crash recovery at boot. Commands reach it authenticated
// (DeviceCore checks the signature), so they are passed as values here.
#include <doctest/doctest.h>

#include "parts_rig.hpp"

using namespace vend;
using namespace vend::fw;
using vend::fw::test::outbox_bodies;
using vend::fw::test::PartsRig;

namespace {

struct DispenserRig : PartsRig {
  // `motor` replaces the simulated machine's motor when given.
  explicit DispenserRig(CoreOptions o = vend::fw::test::Rig::default_options(),
                        SlotMotor* motor = nullptr)
      : PartsRig(o), hal(with_motor(machine.hal(), motor)) {
    REQUIRE(dispenser.boot().ok());
  }
  static Hal with_motor(Hal hal, SlotMotor* motor) {
    if (motor != nullptr) hal.motor = motor;
    return hal;
  }
  void run_for(int64_t ms) {
    PartsRig::run_for(ms, [&] { dispenser.tick(); });
  }
  DispenseState state(const std::string& order) {
    auto row = ledger.find_dispense(order);
    REQUIRE(row.ok());
    REQUIRE(row->has_value());
    return (*row)->state;
  }
  TokenState token(const std::string& t) {
    auto row = ledger.find_token(t);
    REQUIRE(row.ok());
    REQUIRE(row->has_value());
    return (*row)->first;
  }

  Hal hal;
  Dispenser dispenser{ledger, hal, clock, log, options, storage, sender, refusals, stats};
};

// A motor that never finishes its rotation.
class StuckMotor final : public SlotMotor {
 public:
  Status start(int) override {
    ++starts;
    return {};
  }
  MotorState poll() override { return MotorState::kRunning; }
  int starts = 0;
};

}  // namespace

TEST_CASE("Dispenser: an accepted order consumes its token, runs the motor once, DISPENSED") {
  DispenserRig rig;
  auto tokens = rig.restock(1, 2);
  auto outcome = rig.dispenser.on_dispense(rig.dispense("o-1", 1, tokens[0]));
  CHECK(outcome.result == "accepted");
  CHECK(rig.token(tokens[0]) == TokenState::kConsumed);
  CHECK(rig.state("o-1") == DispenseState::kMotorRunning);  // started at once
  CHECK_FALSE(rig.dispenser.idle());

  rig.run_for(1000);
  CHECK(rig.state("o-1") == DispenseState::kDispensed);
  CHECK(rig.machine.rotations() == 1);
  CHECK(rig.machine.items(1) == 1);
  CHECK(rig.stats.dispensed == 1);
  CHECK(rig.dispenser.idle());
  auto results = outbox_bodies<proto::DispenseResult>(rig.ledger);
  REQUIRE(results.size() == 1);
  CHECK(results[0].status == proto::DispenseStatus::kDispensed);
  CHECK(results[0].token_consumed);
}

TEST_CASE("Dispenser: a repeat of a known order is a duplicate and never rotates again") {
  DispenserRig rig;
  auto tokens = rig.restock(1, 1);
  rig.dispenser.on_dispense(rig.dispense("o-1", 1, tokens[0]));
  rig.run_for(1000);
  auto again = rig.dispenser.on_dispense(rig.dispense("o-1", 1, tokens[0]));
  CHECK(again.result == "duplicate");
  CHECK(again.reason == "DISPENSED");
  rig.run_for(1000);
  CHECK(rig.machine.rotations() == 1);
  CHECK(rig.stats.duplicates == 1);
  CHECK(outbox_bodies<proto::DispenseResult>(rig.ledger).size() == 2);  // re-reported
}

TEST_CASE("Dispenser: orders queue behind the motor, one rotation at a time, up to the bound") {
  CoreOptions o = vend::fw::test::Rig::default_options();
  o.dispense_queue_max = 2;
  DispenserRig rig(o);
  auto tokens = rig.restock(1, 3);
  CHECK(rig.dispenser.on_dispense(rig.dispense("o-1", 1, tokens[0])).result == "accepted");
  CHECK(rig.dispenser.on_dispense(rig.dispense("o-2", 1, tokens[1])).result == "accepted");
  CHECK(rig.dispenser.queued() == 1);
  auto busy = rig.dispenser.on_dispense(rig.dispense("o-3", 1, tokens[2]));
  CHECK(busy.result == "rejected");
  CHECK(busy.reason == proto::reason::kBusy);
  CHECK_FALSE(rig.ledger.find_dispense("o-3").value().has_value());  // not recorded: retry works
  CHECK(rig.token(tokens[2]) == TokenState::kAvailable);

  rig.run_for(2000);
  CHECK(rig.machine.rotations() == 2);
  CHECK(rig.dispenser.on_dispense(rig.dispense("o-3", 1, tokens[2])).result == "accepted");
}

TEST_CASE("Dispenser: an authenticated but invalid command is rejected and recorded") {
  DispenserRig rig;
  auto tokens = rig.restock(1, 1);
  CHECK(rig.dispenser.on_dispense(rig.dispense("o-1", 9, tokens[0])).reason ==
        proto::reason::kUnknownSlot);
  CHECK(rig.dispenser.on_dispense(rig.dispense("o-2", 2, tokens[0])).reason ==
        proto::reason::kUnknownToken);
  CHECK(rig.dispenser.on_dispense(rig.dispense("o-3", 1, tokens[0], -60000)).reason ==
        proto::reason::kExpired);
  CHECK(rig.state("o-1") == DispenseState::kRejected);
  CHECK(rig.token(tokens[0]) == TokenState::kAvailable);
  CHECK(rig.stats.rejected == 3);
  CHECK(rig.machine.rotations() == 0);
}

TEST_CASE("Dispenser: while storage is full new orders are refused, not recorded, and counted") {
  DispenserRig rig;
  auto tokens = rig.restock(1, 1);
  rig.storage.note_error(make_error("sqlite_full", "full"));
  auto outcome = rig.dispenser.on_dispense(rig.dispense("o-1", 1, tokens[0]));
  CHECK(outcome.result == "refused");
  CHECK(outcome.reason == "storage_full");
  CHECK(rig.stats.refused == 1);
  CHECK_FALSE(rig.ledger.find_dispense("o-1").value().has_value());
  CHECK(rig.token(tokens[0]) == TokenState::kAvailable);
}

TEST_CASE("Dispenser: an order that expires in the queue never rotates; its token is for sale") {
  DispenserRig rig;
  auto tokens = rig.restock(1, 2);
  rig.dispenser.on_dispense(rig.dispense("o-1", 1, tokens[0]));
  rig.dispenser.on_dispense(rig.dispense("o-2", 1, tokens[1], 100));
  rig.clock.advance(rig.options.expiry_skew_ms + 200);  // o-2 expires behind o-1's rotation
  rig.run_for(1000);
  CHECK(rig.state("o-1") == DispenseState::kDispensed);
  CHECK(rig.state("o-2") == DispenseState::kRejected);
  CHECK(rig.token(tokens[1]) == TokenState::kAvailable);
  CHECK(rig.machine.rotations() == 1);
}

TEST_CASE("Dispenser: a rotation past motor_timeout_ms is a jam; the token is burned") {
  StuckMotor motor;
  CoreOptions o = vend::fw::test::Rig::default_options();
  o.motor_timeout_ms = 500;
  DispenserRig rig(o, &motor);
  auto tokens = rig.restock(1, 1);
  rig.dispenser.on_dispense(rig.dispense("o-1", 1, tokens[0]));
  rig.run_for(400);
  CHECK(rig.state("o-1") == DispenseState::kMotorRunning);
  rig.run_for(200);
  CHECK(rig.state("o-1") == DispenseState::kFailed);
  CHECK(rig.token(tokens[0]) == TokenState::kBurned);
  CHECK(motor.starts == 1);
  CHECK(rig.stats.failed == 1);
  auto faults = outbox_bodies<proto::Fault>(rig.ledger);
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].code == proto::reason::kJam);
}

TEST_CASE("Dispenser: boot turns a rotation cut by power loss into UNCERTAIN, never re-run") {
  std::string token;
  {
    DispenserRig rig;
    token = rig.restock(1, 1)[0];
    REQUIRE(rig.ledger.accept_dispense(rig.dispense("o-1", 1, token), rig.clock.wall_ms()).ok());
    REQUIRE(rig.ledger.mark_motor_running("o-1", rig.clock.wall_ms()).ok());
    // A fresh Dispenser over the same ledger: the process restarted.
    Dispenser rebooted{rig.ledger,  rig.hal,    rig.clock,    rig.log,  rig.options,
                       rig.storage, rig.sender, rig.refusals, rig.stats};
    REQUIRE(rebooted.boot().ok());
    CHECK(rig.state("o-1") == DispenseState::kUncertain);
    CHECK(rig.token(token) == TokenState::kBurned);
    CHECK(rebooted.idle());
    rig.PartsRig::run_for(1000, [&] { rebooted.tick(); });
    CHECK(rig.machine.rotations() == 0);
    auto results = outbox_bodies<proto::DispenseResult>(rig.ledger);
    REQUIRE(results.size() == 1);
    CHECK(results[0].status == proto::DispenseStatus::kUncertain);
  }
}
