#include "vend/fw/ledger.hpp"

#include <doctest/doctest.h>

#include <set>

#include "core_rig.hpp"

using namespace vend;
using namespace vend::fw;
using vend::fw::test::Rig;

TEST_CASE("a confirmed restock mints one token per item and a signed tokens event, atomically") {
  Rig rig;
  auto tokens = rig.restock(1, 4, "restock-a");
  CHECK(tokens.size() == 4);
  CHECK(std::set<std::string>(tokens.begin(), tokens.end()).size() == 4);
  for (auto& t : tokens) CHECK(proto::is_valid_token(t));
  auto slot = rig.ledger.slot(1).value();
  CHECK(slot->physical_count == 4);
  CHECK(slot->available_tokens == 4);
  CHECK(rig.ledger.available_tokens(1).value() == tokens);  // queue order kept

  auto rows = rig.ledger.outbox_after(0, 10).value();
  REQUIRE(rows.size() == 1);
  auto ev = proto::decode_event(rows[0].payload).value();
  CHECK(crypto::verify(rig.key, ev.canonical, ev.mac));
  auto minted = std::get<proto::TokensMinted>(ev.message.body);
  CHECK(minted.restock_id == "restock-a");
  CHECK(minted.tokens == tokens);
  CHECK(minted.physical_count == 4);
  CHECK(ev.message.seq == 1);
  CHECK(rig.ledger.last_seq().value() == 1);
}

TEST_CASE("restock refuses to exceed capacity, an unknown slot, and a second confirmation") {
  Rig rig;
  rig.restock(2, 5);  // capacity 5
  auto over = rig.ledger.confirm_restock("r-over", 2, 1, 0, rig.random);
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().code == "over_capacity");
  auto unknown = rig.ledger.confirm_restock("r-x", 7, 1, 0, rig.random);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().code == "unknown_slot");
  rig.restock(1, 1, "r-once");
  auto again = rig.ledger.confirm_restock("r-once", 1, 1, 0, rig.random);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == "already_confirmed");
  CHECK(rig.ledger.slot(1).value()->available_tokens == 1);
  CHECK(rig.ledger.outbox_depth().value() == 2);  // failed attempts wrote nothing
}

TEST_CASE("a cloud restock is loaded at once by a simulated operator, once per restock id") {
  CoreOptions o = Rig::default_options();
  o.auto_confirm_restock = true;
  Rig rig(o);
  auto out = rig.send(proto::RestockCommand{vend::fw::test::kDevice, "rs-1", 1, 4});
  CHECK(out.result == "done");
  CHECK(rig.machine.items(1) == 4);
  CHECK(rig.send(proto::RestockCommand{vend::fw::test::kDevice, "rs-1", 1, 4}).result ==
        "duplicate");
  CHECK(rig.machine.items(1) == 4);
  CHECK(rig.ledger.slot(1).value()->available_tokens == 4);
  // More than fits: only what fits is loaded and minted.
  CHECK(rig.send(proto::RestockCommand{vend::fw::test::kDevice, "rs-2", 1, 50}).reason == "6");
  CHECK(rig.ledger.slot(1).value()->available_tokens == 10);
}

TEST_CASE("without an operator a cloud restock waits as PENDING") {
  Rig rig;
  CHECK(rig.send(proto::RestockCommand{vend::fw::test::kDevice, "rs-1", 1, 4}).result == "pending");
  CHECK(rig.ledger.slot(1).value()->available_tokens == 0);
  rig.restock(1, 4, "rs-1");  // the operator confirms it at the machine
  CHECK(rig.ledger.slot(1).value()->available_tokens == 4);
}

TEST_CASE("a snapshot reports counts, a digest of available tokens, and the list when asked") {
  Rig rig;
  auto tokens = rig.restock(1, 3);
  rig.machine.load(1, 1);  // an item loaded outside a restock: the sensor sees 4
  rig.connect();
  REQUIRE(rig.send(rig.dispense("o-1", 1, tokens[0])).result == "accepted");
  rig.run_for(600);
  CHECK(rig.send(proto::SnapshotRequest{vend::fw::test::kDevice, "req-1", true}).result == "done");
  rig.run_for(50);
  auto snap = rig.bodies<proto::Snapshot>().back();
  CHECK(snap.request_id == "req-1");
  REQUIRE(snap.slots.size() == 2);
  auto& s1 = snap.slots[0];
  CHECK(s1.slot == 1);
  CHECK(s1.physical_count == 3);  // what the machine holds
  CHECK(s1.available_tokens == 2);
  CHECK(s1.digest == crypto::token_digest({tokens[1], tokens[2]}));
  REQUIRE(s1.tokens.has_value());
  CHECK(s1.tokens->size() == 2);
  CHECK(snap.slots[1].digest == crypto::token_digest({}));
}

TEST_CASE("a periodic snapshot goes out on its interval") {
  CoreOptions o = Rig::default_options();
  o.snapshot_interval_ms = 1000;
  Rig rig(o);
  rig.connect();
  rig.run_for(2050);
  auto snaps = rig.bodies<proto::Snapshot>();
  CHECK(snaps.size() == 2);
  CHECK(snaps[0].request_id.empty());
  CHECK_FALSE(snaps[0].slots[0].tokens.has_value());
}

TEST_CASE("the ledger survives reopening: seq, tokens and dispenses persist") {
  Rig rig;
  auto tokens = rig.restock(1, 2);
  REQUIRE(rig.send(rig.dispense("o-1", 1, tokens[0])).result == "accepted");
  rig.run_for(600);
  rig.reboot();
  CHECK(rig.ledger.last_seq().value() == 2);
  CHECK(rig.ledger.find_dispense("o-1").value()->state == DispenseState::kDispensed);
  CHECK(rig.ledger.available_tokens(1).value() == std::vector<std::string>{tokens[1]});
  rig.restock(1, 1);
  CHECK(rig.ledger.last_seq().value() == 3);
}
