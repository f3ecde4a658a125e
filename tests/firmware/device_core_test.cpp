#include "vend/fw/device_core.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <set>
#include <variant>

#include "core_rig.hpp"

using namespace vend;
using namespace vend::fw;
using vend::fw::test::kDevice;
using vend::fw::test::Rig;

namespace {
proto::DispenseResult last_result(Rig& rig) {
  auto results = rig.bodies<proto::DispenseResult>();
  REQUIRE_FALSE(results.empty());
  return results.back();
}
}  // namespace

TEST_CASE("a signed command with an available token dispenses once and reports DISPENSED") {
  Rig rig;
  auto tokens = rig.restock(1, 3);
  rig.connect();
  auto out = rig.send(rig.dispense("o-1", 1, tokens[0]));
  CHECK(out.result == "accepted");
  CHECK(rig.ledger.find_token(tokens[0]).value()->first == TokenState::kConsumed);
  rig.run_for(600);
  CHECK(rig.machine.rotations() == 1);
  auto r = last_result(rig);
  CHECK(r.order_id == "o-1");
  CHECK(r.status == proto::DispenseStatus::kDispensed);
  CHECK(r.token_consumed);
  CHECK(rig.machine.items(1) == 2);
  CHECK(rig.ledger.slot(1).value()->physical_count == 2);
  CHECK(rig.ledger.slot(1).value()->available_tokens == 2);
}

TEST_CASE("every rejection has its own reason") {
  Rig rig;
  auto tokens = rig.restock(1, 2);
  auto other_slot = rig.restock(2, 1);
  rig.connect();
  int64_t max_rotations = 1;

  SUBCASE("malformed") {
    auto out = rig.core->on_command("{not json");
    CHECK(out.result == "refused");
    CHECK(out.reason == proto::reason::kMalformed);
  }
  SUBCASE("bad_mac") {
    crypto::Key wrong = crypto::Key::generate();
    auto out = rig.core->on_command(rig.sign(rig.dispense("o-1", 1, tokens[0]), &wrong));
    CHECK(out.reason == proto::reason::kBadMac);
  }
  SUBCASE("wrong_device") {
    auto cmd = rig.dispense("o-1", 1, tokens[0]);
    cmd.device = "vm-2";
    CHECK(rig.send(cmd).reason == proto::reason::kWrongDevice);
  }
  SUBCASE("unknown_slot") {
    CHECK(rig.send(rig.dispense("o-1", 9, tokens[0])).reason == "unknown_slot");
  }
  SUBCASE("unknown_token") {
    CHECK(rig.send(rig.dispense("o-1", 1, std::string(32, 'a'))).reason == "unknown_token");
  }
  SUBCASE("a token of another slot is unknown in this one") {
    CHECK(rig.send(rig.dispense("o-1", 1, other_slot[0])).reason == "unknown_token");
  }
  SUBCASE("token_consumed") {
    REQUIRE(rig.send(rig.dispense("o-1", 1, tokens[0])).result == "accepted");
    CHECK(rig.send(rig.dispense("o-2", 1, tokens[0])).reason == "token_consumed");
  }
  SUBCASE("expired: a v2 command's expiry is the bound, the device adds no skew of its own") {
    CHECK(rig.send(rig.dispense("o-1", 1, tokens[0], -1)).reason == "expired");
    CHECK(rig.send(rig.dispense("o-2", 1, tokens[0], 0)).result == "accepted");
  }
  SUBCASE("busy when the queue is full") {
    CoreOptions o = Rig::default_options();
    o.dispense_queue_max = 1;
    rig.reboot(o);
    REQUIRE(rig.send(rig.dispense("o-1", 1, tokens[0])).result == "accepted");
    auto out = rig.send(rig.dispense("o-2", 1, tokens[1]));
    CHECK(out.reason == "busy");
    // Busy is transient: the token stays available and a retry later succeeds.
    CHECK(rig.ledger.find_token(tokens[1]).value()->first == TokenState::kAvailable);
    rig.run_for(600);
    CHECK(rig.send(rig.dispense("o-2", 1, tokens[1])).result == "accepted");
    max_rotations = 2;
  }
  rig.run_for(600);
  CHECK(rig.machine.rotations() <= max_rotations);
}

TEST_CASE("authenticated rejections are recorded and reported; forged ones only logged") {
  Rig rig;
  auto tokens = rig.restock(1, 1);
  rig.connect();
  rig.run_for(50);
  size_t before = rig.events().size();
  CHECK(rig.send(rig.dispense("o-1", 1, std::string(32, 'b'))).reason == "unknown_token");
  crypto::Key wrong = crypto::Key::generate();
  CHECK(rig.core->on_command(rig.sign(rig.dispense("o-2", 1, tokens[0]), &wrong)).reason ==
        "bad_mac");
  rig.run_for(50);
  auto events = rig.events();
  REQUIRE(events.size() == before + 2);  // the rejection, then one refused_commands fault
  auto r = std::get<proto::DispenseResult>(events[before].body);
  CHECK(r.reason == "unknown_token");
  CHECK_FALSE(r.token_consumed);
  auto f = std::get<proto::Fault>(events[before + 1].body);
  CHECK(f.code == "refused_commands");
  CHECK(f.message.find("bad_mac") != std::string::npos);
  CHECK(rig.log.contains("bad_mac", LogLevel::kWarn));
  // A forged command must not poison the order id: the real one still works.
  CHECK(rig.send(rig.dispense("o-2", 1, tokens[0])).result == "accepted");
}

TEST_CASE("a duplicate command returns the recorded result and never moves the motor twice") {
  Rig rig;
  auto tokens = rig.restock(1, 2);
  rig.connect();
  auto cmd = rig.dispense("o-1", 1, tokens[0]);
  REQUIRE(rig.send(cmd).result == "accepted");
  CHECK(rig.send(cmd).result == "duplicate");  // while running
  rig.run_for(600);
  auto again = rig.send(cmd);
  CHECK(again.result == "duplicate");
  CHECK(again.reason == "DISPENSED");
  rig.run_for(600);
  CHECK(rig.machine.rotations() == 1);
  auto results = rig.bodies<proto::DispenseResult>();
  REQUIRE(results.size() == 2);
  CHECK(results[1] == results[0]);
  CHECK(rig.core->stats().duplicates == 2);
}

TEST_CASE("a token is consumed exactly once, even if the ledger is asked twice") {
  Rig rig;
  auto tokens = rig.restock(1, 1);
  auto a = rig.dispense("o-1", 1, tokens[0]);
  auto b = rig.dispense("o-2", 1, tokens[0]);
  REQUIRE(rig.ledger.accept_dispense(a, rig.clock.wall_ms()).ok());
  auto second = rig.ledger.accept_dispense(b, rig.clock.wall_ms());
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == "ledger_conflict");
  // And the schema itself refuses a second spend of one token.
  auto raw = rig.ledger.db().exec(
      "INSERT INTO dispenses(order_id, slot, token, state, expires_at_ms, token_consumed, "
      "accepted_ms, updated_ms) VALUES ('o-3', 1, '" +
      tokens[0] + "', 'ACCEPTED', 1, 1, 1, 1)");
  CHECK_FALSE(raw.ok());
}

TEST_CASE("dispenses run one at a time, in order") {
  Rig rig;
  auto tokens = rig.restock(1, 3);
  rig.connect();
  for (int i = 0; i < 3; ++i) {
    REQUIRE(rig.send(rig.dispense("o-" + std::to_string(i), 1, tokens[i])).result == "accepted");
  }
  CHECK(rig.core->queued() == 2);
  rig.run_for(510);
  CHECK(rig.machine.rotations() == 2);  // the first finished, the second started
  rig.run_for(1100);
  auto results = rig.bodies<proto::DispenseResult>();
  REQUIRE(results.size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(results[i].order_id == "o-" + std::to_string(i));
  CHECK(rig.core->idle());
}

TEST_CASE("a jam or an empty slot fails the dispense and burns the token") {
  Rig rig;
  SUBCASE("jam") {
    auto tokens = rig.restock(1, 1);
    rig.machine.set_jam_probability(1.0);
    rig.connect();
    REQUIRE(rig.send(rig.dispense("o-1", 1, tokens[0])).result == "accepted");
    rig.run_for(600);
    auto r = last_result(rig);
    CHECK(r.status == proto::DispenseStatus::kFailed);
    CHECK(r.reason == "jam");
    CHECK(r.token_consumed);
    CHECK(rig.ledger.find_token(tokens[0]).value()->first == TokenState::kBurned);
    CHECK(rig.machine.items(1) == 1);  // the item is stuck, still there
    CHECK(rig.bodies<proto::Fault>().back().code == "jam");
  }
  SUBCASE("empty") {
    auto tokens = rig.restock(1, 1);
    rig.machine.set_items(1, 0);  // the item vanished
    rig.connect();
    REQUIRE(rig.send(rig.dispense("o-1", 1, tokens[0])).result == "accepted");
    rig.run_for(600);
    CHECK(last_result(rig).reason == "empty");
    CHECK(rig.ledger.slot(1).value()->physical_count == 0);
  }
}

TEST_CASE("crash recovery: a dispense left MOTOR_RUNNING becomes UNCERTAIN and never re-runs") {
  Rig rig;
  auto tokens = rig.restock(1, 2);
  rig.connect();
  REQUIRE(rig.send(rig.dispense("o-1", 1, tokens[0])).result == "accepted");
  REQUIRE(rig.send(rig.dispense("o-2", 1, tokens[1])).result == "accepted");
  rig.run_for(100);  // o-1 mid-rotation, o-2 accepted and queued
  REQUIRE(rig.ledger.find_dispense("o-1").value()->state == DispenseState::kMotorRunning);
  int64_t rotations = rig.machine.rotations();
  rig.reboot();
  auto o1 = rig.ledger.find_dispense("o-1").value();
  CHECK(o1->state == DispenseState::kUncertain);
  CHECK(o1->reason == "power_loss");
  CHECK(rig.ledger.find_token(tokens[0]).value()->first == TokenState::kBurned);
  rig.connect();
  rig.run_for(600);
  // o-2, accepted before the boot, waits for the cloud's command again.
  CHECK(rig.machine.rotations() == rotations);
  CHECK(rig.ledger.find_dispense("o-2").value()->state == DispenseState::kAccepted);
  CHECK(rig.send(rig.dispense("o-2", 1, tokens[1])).result == "accepted");
  rig.run_for(600);
  CHECK(rig.machine.rotations() == rotations + 1);  // only o-2 ran
  CHECK(rig.ledger.find_dispense("o-2").value()->state == DispenseState::kDispensed);
  // The cloud re-sending o-1 gets the UNCERTAIN result, not a rotation.
  CHECK(rig.send(rig.dispense("o-1", 1, tokens[0])).reason == "UNCERTAIN");
  rig.run_for(600);
  CHECK(rig.machine.rotations() == rotations + 1);
  bool reported = false;
  for (auto& r : rig.bodies<proto::DispenseResult>()) {
    if (r.order_id == "o-1" && r.status == proto::DispenseStatus::kUncertain) reported = true;
  }
  CHECK(reported);
}

TEST_CASE("an accepted dispense that expired before its turn gives its token back") {
  Rig rig;
  auto tokens = rig.restock(1, 2);
  REQUIRE(rig.send(rig.dispense("o-1", 1, tokens[0], 1000)).result == "accepted");
  REQUIRE(rig.send(rig.dispense("o-2", 1, tokens[1], 200)).result == "accepted");
  rig.reboot();  // o-1 was mid-rotation; o-2 waited
  rig.clock.advance(10000);
  rig.run_for(50);
  auto o2 = rig.ledger.find_dispense("o-2").value();
  CHECK(o2->state == DispenseState::kRejected);
  CHECK(o2->reason == "expired");
  CHECK_FALSE(o2->token_consumed);
  CHECK(rig.ledger.find_token(tokens[1]).value()->first == TokenState::kAvailable);
}

TEST_CASE("3,000 forged commands: every one refused and counted, a bounded number of lines") {
  Rig rig;
  auto tokens = rig.restock(1, 1);
  rig.connect();
  crypto::Key wrong = crypto::Key::generate();
  size_t lines_before = rig.log.records().size();
  for (int i = 0; i < 3000; ++i) {
    auto cmd = rig.dispense("o-" + std::to_string(i), 1, tokens[0]);
    auto out = rig.core->on_command(i % 2 == 0 ? rig.sign(cmd, &wrong) : "junk");
    CHECK(out.result == "refused");
    if (i % 100 == 0) rig.clock.advance(10);
  }
  CHECK(rig.core->stats().refused == 3000);
  CHECK(rig.log.records().size() - lines_before <= 4);
  rig.run_for(61'000);  // the interval ends: the suppressed counts are logged
  CHECK(rig.log.contains("similar line(s) (dispense, bad_mac) suppressed", LogLevel::kWarn));
  CHECK(rig.log.records().size() - lines_before <= 10);
  CHECK(rig.machine.items(1) == 1);  // nothing dispensed
}

TEST_CASE("resend: held events are published again from the asked seq") {
  Rig rig;
  rig.restock(1, 2);  // seq 1
  rig.restock(2, 1);  // seq 2
  rig.restock(1, 1);  // seq 3
  rig.connect();
  rig.run_for(500);
  REQUIRE(rig.events().size() == 3);
  auto out = rig.send(proto::ResendRequest{kDevice, 2});
  CHECK(out.result == "done");
  rig.run_for(500);
  auto events = rig.events();
  REQUIRE(events.size() == 5);  // 2 and 3 again, in order
  CHECK(events[3].seq == 2);
  CHECK(events[4].seq == 3);
  CHECK(rig.bodies<proto::EventsUnavailable>().empty());
}

TEST_CASE("resend of acknowledged events: events_unavailable names the oldest held seq") {
  Rig rig;
  rig.restock(1, 2);  // seq 1
  rig.restock(2, 1);  // seq 2
  rig.restock(1, 1);  // seq 3
  rig.connect();
  rig.run_for(500);
  REQUIRE(rig.send(proto::Ack{kDevice, 2}).result == "done");  // 1 and 2 deleted
  size_t before = rig.events().size();
  CHECK(rig.send(proto::ResendRequest{kDevice, 1}).result == "done");
  rig.run_for(500);
  auto events = rig.events();
  REQUIRE(events.size() == before + 2);  // seq 3 again, then the answer (seq 4)
  CHECK(events[before].seq == 3);
  CHECK(events[before + 1].seq == 4);
  auto gone = std::get<proto::EventsUnavailable>(events[before + 1].body);
  CHECK(gone.from_seq == 1);
  CHECK(gone.oldest_seq == 3);
  // A replay of the same command does not add another answer (the held
  // events, the answer included, are only published again).
  CHECK(rig.send(proto::ResendRequest{kDevice, 1}).result == "duplicate");
  rig.run_for(500);
  CHECK(rig.ledger.outbox_depth().value() == 2);
  CHECK(rig.events().back().seq == 4);
  // With an empty outbox the oldest held is the answer itself.
  REQUIRE(rig.send(proto::Ack{kDevice, 4}).result == "done");
  CHECK(rig.send(proto::ResendRequest{kDevice, 2}).result == "done");
  rig.run_for(500);
  REQUIRE(rig.events().back().seq == 5);
  auto last = std::get<proto::EventsUnavailable>(rig.events().back().body);
  CHECK(last.from_seq == 2);
  CHECK(last.oldest_seq == 5);
}

TEST_CASE("a forged resend is refused like any forged command") {
  Rig rig;
  rig.restock(1, 1);
  rig.connect();
  crypto::Key wrong = crypto::Key::generate();
  auto out = rig.core->on_command(rig.sign(proto::ResendRequest{kDevice, 1}, &wrong));
  CHECK(out.result == "refused");
  CHECK(out.reason == proto::reason::kBadMac);
}

TEST_CASE("status_request re-publishes the retained online status, at most once a second") {
  Rig rig;
  rig.connect();
  auto statuses = [&] {
    size_t n = 0;
    for (const auto& m : rig.transport.published) {
      if (m.topic == topics::device_status(kDevice) && m.retained) ++n;
    }
    return n;
  };
  size_t before = statuses();
  CHECK(rig.send(proto::StatusRequest{kDevice}).result == "done");
  CHECK(statuses() == before + 1);
  CHECK(rig.send(proto::StatusRequest{kDevice}).result == "duplicate");  // a replay storm
  CHECK(statuses() == before + 1);
  rig.clock.advance(1000);
  CHECK(rig.send(proto::StatusRequest{kDevice}).result == "done");
  CHECK(statuses() == before + 2);
  auto last = proto::decode_status(rig.transport.published.back().payload);
  REQUIRE(last.ok());
  CHECK(last->message.online);
}

// Fails on the code before this test: expires_at_ms + expiry_skew_ms
// overflowed to a negative deadline, so 2^63-1 was rejected `expired`.
TEST_CASE("an expires_at_ms at the int64 limit never expires, at the door or in the queue") {
  Rig rig;
  auto tokens = rig.restock(1, 2);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  proto::DispenseCommand first{vend::fw::test::kDevice, "o-1", 1, tokens[0], kMax};
  proto::DispenseCommand second{vend::fw::test::kDevice, "o-2", 1, tokens[1], kMax - 1};
  CHECK(rig.send(first).result == "accepted");
  CHECK(rig.send(second).result == "accepted");  // waits behind o-1, checked again at its turn
  rig.run_for(1500);
  CHECK(rig.ledger.find_dispense("o-1").value()->state == DispenseState::kDispensed);
  CHECK(rig.ledger.find_dispense("o-2").value()->state == DispenseState::kDispensed);
  CHECK(rig.machine.rotations() == 2);
}

namespace {

// Snapshot events written (distinct seqs: an unacknowledged one is published again).
size_t snapshot_count(Rig& rig) {
  std::set<uint64_t> seqs;
  for (const auto& e : rig.events()) {
    if (std::holds_alternative<proto::Snapshot>(e.body)) seqs.insert(e.seq);
  }
  return seqs.size();
}

// A signed command as it went over the wire once (what an attacker on the
// broker path captured).
std::string captured(Rig& rig, proto::Command command, int64_t ttl_ms) {
  std::visit([&](auto& c) { c.expires_at_ms = rig.clock.wall_ms() + ttl_ms; }, command);
  return rig.sign(command);
}

}  // namespace

// Fails on the code before this test: commands other than a dispense had no
// expiry, so a captured snapshot_request{full} could be replayed at will.
TEST_CASE("a captured snapshot_request replayed after its expiry is refused, not answered") {
  Rig rig;
  rig.restock(1, 3);
  rig.connect();
  std::string wire = captured(rig, proto::SnapshotRequest{kDevice, "full-1", true}, 30'000);
  CHECK(rig.core->on_command(wire).result == "done");
  rig.run_for(100);
  size_t answered = snapshot_count(rig);
  REQUIRE(answered == 1);
  // Within its lifetime a replay is a duplicate: nothing new in the outbox.
  auto again = rig.core->on_command(wire);
  CHECK(again.result == "duplicate");
  rig.clock.advance(30'001);
  for (int i = 0; i < 50; ++i) {
    auto out = rig.core->on_command(wire);
    CHECK(out.result == "refused");
    CHECK(out.reason == proto::reason::kExpired);
  }
  rig.run_for(100);
  CHECK(snapshot_count(rig) == answered);
  CHECK(rig.core->stats().refused >= 50);
}

TEST_CASE("every other signed command expires too: ack, resend, restock, status_request") {
  Rig rig;
  auto tokens = rig.restock(1, 1);
  rig.connect();
  std::vector<std::string> wires = {
      captured(rig, proto::Ack{kDevice, 1}, 1000),
      captured(rig, proto::ResendRequest{kDevice, 1}, 1000),
      captured(rig, proto::RestockCommand{kDevice, "rs-9", 1, 2}, 1000),
      captured(rig, proto::StatusRequest{kDevice}, 1000),
  };
  rig.clock.advance(1001);
  for (const auto& wire : wires) {
    auto out = rig.core->on_command(wire);
    CAPTURE(out.type);
    CHECK(out.result == "refused");
    CHECK(out.reason == proto::reason::kExpired);
  }
  CHECK(rig.ledger.find_token(tokens[0]).value()->first == TokenState::kAvailable);
}

TEST_CASE(
    "v1 commands are refused unless core.accept_v1_commands; then a v1 dispense keeps its skew") {
  Rig rig;
  auto tokens = rig.restock(1, 2);
  rig.connect();
  proto::SnapshotRequest old_request{kDevice, "req-1", true};
  old_request.v = 1;
  auto refused = rig.send(old_request);
  CHECK(refused.result == "refused");
  CHECK(refused.reason == "old_version");
  proto::DispenseCommand old_dispense = rig.dispense("o-1", 1, tokens[0], -4000);
  old_dispense.v = 1;
  CHECK(rig.send(old_dispense).reason == "old_version");
  CHECK(rig.machine.rotations() == 0);

  CoreOptions accepting = Rig::default_options();
  accepting.accept_v1_commands = true;
  rig.reboot(accepting);
  rig.connect();
  CHECK(rig.send(old_request).result == "done");
  // v1: expires_at_ms plus this device's expiry_skew_ms (5 s).
  CHECK(rig.send(old_dispense).result == "accepted");
  proto::DispenseCommand too_old = rig.dispense("o-2", 1, tokens[1], -6000);
  too_old.v = 1;
  CHECK(rig.send(too_old).reason == "expired");
}
