// A full ledger disk (SQLite's max_page_count on the ledger's connection):
// the core stays up, refuses new dispenses with a clear reason, keeps the
// outcome of a rotation under way, and reports a `storage_full` fault once
// there is room.
#include <doctest/doctest.h>

#include "core_rig.hpp"

using namespace vend;
using namespace vend::fw;
using vend::fw::test::Rig;

namespace {

int64_t page_count(Ledger& ledger) {
  auto st = ledger.db().prepare("PRAGMA page_count");
  REQUIRE(st.ok());
  REQUIRE(st->step().value());
  return st->column_int64(0);
}

// Caps the ledger file at its current size plus a few pages, fills every
// free page with junk rows, and the outbox's last page with events: from now
// on every write that reports to the cloud fails with SQLITE_FULL, as on a
// full SD card.
void fill(Rig& rig) {
  sql::Database& db = rig.ledger.db();
  REQUIRE(db.exec("CREATE TABLE IF NOT EXISTS filler(x BLOB)").ok());
  REQUIRE(db.exec("PRAGMA max_page_count = " + std::to_string(page_count(rig.ledger) + 2)).ok());
  for (int size : {4000, 1000, 200, 20, 1}) {
    for (int i = 0; i < 100000; ++i) {
      auto s = db.exec("INSERT INTO filler VALUES (randomblob(" + std::to_string(size) + "))");
      if (s.ok()) continue;
      REQUIRE(s.error().code == "sqlite_full");
      break;
    }
  }
  for (size_t size : {500, 100, 10, 0}) {
    for (int i = 0; i < 10000; ++i) {
      auto seq = rig.ledger.append_event(proto::Fault{"filler", std::string(size, 'x'), 0},
                                         rig.clock.wall_ms());
      if (seq.ok()) continue;
      REQUIRE(seq.error().code == "sqlite_full");
      break;
    }
  }
  REQUIRE_FALSE(rig.ledger.append_event(proto::Fault{"probe", "", 0}, rig.clock.wall_ms()).ok());
}

// The operator frees space.
void make_room(Ledger& ledger) {
  REQUIRE(ledger.db().exec("PRAGMA max_page_count = 1073741823").ok());
}

std::vector<proto::Fault> faults(Rig& rig, const std::string& code) {
  std::vector<proto::Fault> out;
  for (const auto& f : rig.bodies<proto::Fault>()) {
    if (f.code == code) out.push_back(f);
  }
  return out;
}

}  // namespace

// Fails on the code before this test: nothing noticed the full disk (the
// refusal reason was the generic "storage", a finished rotation's outcome was
// retried and logged every tick) and no storage_full fault was ever sent.
TEST_CASE(
    "a full ledger refuses dispenses, keeps running, and reports the fault once it has room") {
  Rig rig;
  auto tokens = rig.restock(1, 3);
  rig.connect();
  rig.run_for(100);
  fill(rig);

  // The first write that fails: the accept itself, or the outcome after the
  // rotation (kept in memory, never re-run).
  auto first = rig.send(rig.dispense("o-1", 1, tokens[0]));
  rig.run_for(1000);
  CHECK(rig.core->storage_full());
  CHECK(rig.log.contains("ledger storage is full", LogLevel::kError));
  int64_t rotations = rig.machine.rotations();
  CHECK(rotations <= 1);

  auto refused = rig.send(rig.dispense("o-2", 1, tokens[1]));
  CHECK(refused.result == "refused");
  CHECK(refused.reason == "storage_full");
  CHECK(rig.ledger.find_token(tokens[1]).value()->first == TokenState::kAvailable);
  rig.run_for(5000);  // the core keeps ticking; nothing new moves
  CHECK(rig.machine.rotations() == rotations);
  CHECK(faults(rig, "storage_full").empty());  // no room to say it yet
  size_t errors = 0;
  for (const auto& r : rig.log.records()) errors += r.level == LogLevel::kError ? 1 : 0;
  CHECK(errors == 1);  // said once, not every tick

  make_room(rig.ledger);
  rig.run_for(2500);
  auto reported = faults(rig, "storage_full");
  REQUIRE(reported.size() == 1);
  CHECK(reported[0].message.find("dispense command(s) refused") != std::string::npos);
  CHECK_FALSE(rig.core->storage_full());
  if (first.result == "accepted") {
    CHECK(rig.ledger.find_dispense("o-1").value()->state == DispenseState::kDispensed);
  } else {
    CHECK(first.reason == "storage_full");
  }
  CHECK(rig.send(rig.dispense("o-2", 1, tokens[1])).result == "accepted");  // the cloud re-sent
  rig.run_for(600);
  CHECK(rig.ledger.find_dispense("o-2").value()->state == DispenseState::kDispensed);
}

TEST_CASE("booting on a full ledger: the core starts degraded and recovers later") {
  Rig rig;
  auto tokens = rig.restock(1, 2);
  REQUIRE(rig.send(rig.dispense("o-1", 1, tokens[0])).result == "accepted");
  // Power is cut mid-rotation; the board comes back with a full disk.
  rig.core.reset();
  rig.machine.power_cut(false);
  rig.ledger = rig.open_ledger();
  fill(rig);
  rig.core = std::make_unique<DeviceCore>(rig.ledger, rig.machine.hal(), rig.transport, rig.clock,
                                          rig.random, rig.log, Rig::default_options());
  REQUIRE(rig.core->boot().ok());  // before: the error ended the daemon (exit 1, restart loop)
  CHECK(rig.core->storage_full());
  rig.connect();
  CHECK(rig.send(rig.dispense("o-2", 1, tokens[1])).reason == "storage_full");
  rig.run_for(1000);
  CHECK(rig.ledger.find_dispense("o-1").value()->state == DispenseState::kMotorRunning);

  make_room(rig.ledger);
  rig.run_for(2500);
  CHECK(rig.ledger.find_dispense("o-1").value()->state == DispenseState::kUncertain);
  CHECK(faults(rig, "storage_full").size() == 1);
  CHECK(faults(rig, "uncertain_dispense").size() == 1);
}
