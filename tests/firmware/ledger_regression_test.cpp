// A ledger that goes back in time (docs/firmware.md, "A ledger that goes back
// in time"): an ack that covers events this file does not hold -- beyond its
// last seq, or another event at the acked seq than the one the cloud names
// by its mac -- deletes nothing; the sender starts a new ledger that carries
// the held facts on from seq 1.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>

#include "parts_rig.hpp"

using namespace vend;
using namespace vend::fw;
using vend::fw::test::kDevice;
using vend::fw::test::outbox_bodies;
using vend::fw::test::PartsRig;

namespace {

void write_faults(PartsRig& rig, int n, const std::string& tag) {
  for (int i = 0; i < n; ++i) {
    REQUIRE(
        rig.ledger.append_event(proto::Fault{tag, std::to_string(i), 0}, rig.clock.wall_ms()).ok());
  }
}

// The mac the cloud saw on the held event `seq`.
std::string mac_of(Ledger& ledger, uint64_t seq) {
  auto rows = ledger.outbox_after(seq - 1, 1);
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 1);
  auto decoded = proto::decode_event(rows->front().payload);
  REQUIRE(decoded.ok());
  return decoded->mac;
}

std::vector<proto::DeviceEvent> held(Ledger& ledger) {
  std::vector<proto::DeviceEvent> out;
  auto rows = ledger.outbox_after(0, 1000);
  REQUIRE(rows.ok());
  for (const auto& row : *rows) {
    auto decoded = proto::decode_event(row.payload);
    REQUIRE(decoded.ok());
    out.push_back(decoded->message);
  }
  return out;
}

}  // namespace

TEST_CASE("an ack naming the held event's mac deletes; another mac deletes nothing") {
  PartsRig rig;
  REQUIRE(rig.sender.boot().ok());
  write_faults(rig, 3, "a");
  const std::string mac2 = mac_of(rig.ledger, 2);
  CHECK(rig.ledger.acknowledge(2, mac2).value() == 2);
  CHECK(rig.ledger.acked_seq().value() == 2);
  auto other = rig.ledger.acknowledge(3, mac2);  // seq 3 under event 2's mac
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().code == "ledger_regressed");
  CHECK(rig.ledger.outbox_depth().value() == 1);
  CHECK(rig.ledger.acked_seq().value() == 2);
  // At or below the acked seq nothing is held to compare, nor deleted.
  CHECK(rig.ledger.acknowledge(1, std::string(64, 'f')).value() == 0);
  // Without a mac (an agent that sends none) only the seq is checked.
  CHECK(rig.ledger.acknowledge(3).value() == 1);
  auto beyond = rig.ledger.acknowledge(4);
  REQUIRE_FALSE(beyond.ok());
  CHECK(beyond.error().code == "ledger_regressed");
}

TEST_CASE("an ack beyond the last seq: a new ledger carries the held facts on from seq 1") {
  PartsRig rig;
  REQUIRE(rig.sender.boot().ok());
  const std::string old_id = rig.ledger.identity().ledger_id;
  write_faults(rig, 2, "fact");
  REQUIRE(rig.ledger.append_snapshot("s1", false, nullptr, rig.clock.wall_ms()).ok());
  write_faults(rig, 1, "late");
  REQUIRE(rig.ledger.last_seq().value() == 4);
  rig.transport.up = true;
  rig.sender.on_connection(true);
  rig.run_for(200, [&] { rig.sender.drain(); });
  REQUIRE(rig.transport.published.size() == 4);

  // The cloud processed up to 9 under this id: this file lost 5..9.
  CommandOutcome out = rig.sender.on_ack(proto::Ack{kDevice, 9, old_id, std::string(64, 'c')});
  CHECK(out.result == "new_ledger");
  const std::string new_id = rig.ledger.identity().ledger_id;
  CHECK(new_id != old_id);
  CHECK(out.reason == new_id);
  auto events = held(rig.ledger);
  REQUIRE(events.size() == 4);  // 3 facts and the fault saying why; the snapshot is dropped
  for (size_t i = 0; i < events.size(); ++i) {
    CHECK(events[i].seq == i + 1);
    CHECK(events[i].ledger_id == new_id);
    CHECK(events[i].boot_id == rig.boot_id);
  }
  auto faults = outbox_bodies<proto::Fault>(rig.ledger);
  REQUIRE(faults.size() == 4);
  CHECK(faults[0].code == "fact");
  CHECK(faults[2].code == "late");
  CHECK(faults[3].code == "ledger_regressed");
  CHECK(rig.ledger.acked_seq().value() == 0);
  CHECK(rig.ledger.last_seq().value() == 4);

  // The new ledger goes out from seq 1; an ack of the old id is another ledger's.
  rig.transport.published.clear();
  rig.run_for(200, [&] { rig.sender.drain(); });
  auto sent = rig.published_events();
  REQUIRE(sent.size() == 4);
  CHECK(sent.front().seq == 1);
  CHECK(sent.front().ledger_id == new_id);
  CHECK(rig.sender.on_ack(proto::Ack{kDevice, 2, old_id}).reason == "other_ledger");
  CHECK(rig.sender.on_ack(proto::Ack{kDevice, 4, new_id, mac_of(rig.ledger, 4)}).result == "done");
  CHECK(rig.ledger.outbox_depth().value() == 0);
}

TEST_CASE("another process that opened the ledger before the switch signs with the new id") {
  PartsRig rig;
  REQUIRE(rig.sender.boot().ok());
  auto restock_cli =
      Ledger::open(rig.dir.file("ledger.db"), Identity{kDevice, rig.key, std::string(32, 'c')});
  REQUIRE(restock_cli.ok());
  write_faults(rig, 1, "a");
  REQUIRE(rig.sender.on_ack(proto::Ack{kDevice, 5}).result == "new_ledger");
  const std::string new_id = rig.ledger.identity().ledger_id;
  REQUIRE(restock_cli->append_event(proto::Fault{"cli", "", 0}, 1).ok());
  auto events = held(rig.ledger);
  REQUIRE(events.size() == 3);
  CHECK(events.back().seq == 3);
  CHECK(events.back().ledger_id == new_id);
  CHECK(restock_cli->identity().ledger_id == new_id);
}

TEST_CASE("the switch is one transaction: it fails whole, and the next ack tries again") {
  PartsRig rig;
  REQUIRE(rig.sender.boot().ok());
  const std::string old_id = rig.ledger.identity().ledger_id;
  write_faults(rig, 3, "a");
  // A held row the switch cannot read: it fails after reading the others.
  auto other = sql::Database::open(rig.dir.file("ledger.db"), {});
  REQUIRE(other.ok());
  REQUIRE(other
              ->exec("INSERT INTO outbox(seq, type, payload, created_ms) VALUES (4, 'fault', "
                     "'{}', 1); UPDATE meta SET value = 4 WHERE key = 'last_seq'")
              .ok());
  CommandOutcome refused = rig.sender.on_ack(proto::Ack{kDevice, 8});
  CHECK(refused.result == "refused");
  CHECK(rig.ledger.identity().ledger_id == old_id);
  CHECK(rig.ledger.last_seq().value() == 4);
  REQUIRE(other->exec("DELETE FROM outbox WHERE seq = 4").ok());
  CHECK(held(rig.ledger).front().ledger_id == old_id);
  CHECK(rig.sender.on_ack(proto::Ack{kDevice, 8}).result == "new_ledger");
  auto reopened =
      Ledger::open(rig.dir.file("ledger.db"), Identity{kDevice, rig.key, std::string(32, 'd')});
  REQUIRE(reopened.ok());
  CHECK(reopened->identity().ledger_id == rig.ledger.identity().ledger_id);
  CHECK(reopened->last_seq().value() == 4);
}
