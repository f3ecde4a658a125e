// StorageGuard alone: which errors enter the degraded mode, how often it
// probes, and the fault that ends it. A read-only ledger connection
// (PRAGMA query_only) stands in for a full disk: every write fails.
#include <doctest/doctest.h>

#include "parts_rig.hpp"

using namespace vend;
using namespace vend::fw;
using vend::fw::test::outbox_bodies;
using vend::fw::test::PartsRig;

namespace {
Error full_error() { return make_error("sqlite_full", "database or disk is full"); }
}  // namespace

TEST_CASE("StorageGuard: only SQLITE_FULL enters the mode, logged once per episode") {
  PartsRig rig;
  CHECK_FALSE(rig.storage.note_error(make_error("sqlite_busy", "locked")));
  CHECK_FALSE(rig.storage.full());
  CHECK(rig.storage.note_error(full_error()));
  CHECK(rig.storage.note_error(full_error()));
  CHECK(rig.storage.full());
  int lines = 0;
  for (const auto& r : rig.log.records()) {
    if (r.message.find("storage is full") != std::string::npos) ++lines;
  }
  CHECK(lines == 1);
}

TEST_CASE("StorageGuard: a probe while not full writes nothing") {
  PartsRig rig;
  rig.clock.advance(10 * StorageGuard::kProbeMs);
  CHECK_FALSE(rig.storage.probe());
  CHECK(rig.ledger.outbox_depth().value() == 0);
}

TEST_CASE("StorageGuard: probes every kProbeMs, ends once its fault is written") {
  PartsRig rig;
  REQUIRE(rig.ledger.db().exec("PRAGMA query_only = 1").ok());
  rig.storage.note_error(full_error());
  rig.storage.count_refused();
  rig.storage.count_refused();

  rig.clock.advance(StorageGuard::kProbeMs - 1);
  CHECK_FALSE(rig.storage.probe());  // too early: not tried
  rig.clock.advance(1);
  CHECK_FALSE(rig.storage.probe());  // tried: still no room
  CHECK(rig.storage.full());

  REQUIRE(rig.ledger.db().exec("PRAGMA query_only = 0").ok());  // the operator freed space
  rig.clock.advance(StorageGuard::kProbeMs / 2);
  CHECK_FALSE(rig.storage.probe());  // the next try is a whole period after the last
  rig.clock.advance(StorageGuard::kProbeMs / 2);
  CHECK(rig.storage.probe());
  CHECK_FALSE(rig.storage.full());

  auto faults = outbox_bodies<proto::Fault>(rig.ledger);
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].code == "storage_full");
  CHECK(faults[0].message.find("full for 4 s") != std::string::npos);
  CHECK(faults[0].message.find("2 dispense command(s) refused") != std::string::npos);
  CHECK_FALSE(rig.storage.probe());  // over: nothing more
}
