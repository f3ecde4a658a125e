// EventSender alone: the jittered start, the window, the rate, retransmission,
// acks and resends, and the outbox's pressure alarm. Events are written to
// the ledger directly; the sender only reads and publishes them.
#include <doctest/doctest.h>

#include "parts_rig.hpp"

using namespace vend;
using namespace vend::fw;
using vend::fw::test::kDevice;
using vend::fw::test::outbox_bodies;
using vend::fw::test::PartsRig;

namespace {

void write_events(PartsRig& rig, int n) {
  for (int i = 0; i < n; ++i) {
    REQUIRE(rig.ledger.append_event(proto::Fault{"test", std::to_string(i), 0}, rig.clock.wall_ms())
                .ok());
  }
}

std::vector<uint64_t> published_seqs(PartsRig& rig) {
  std::vector<uint64_t> out;
  for (const auto& e : rig.published_events()) out.push_back(e.seq);
  return out;
}

void drain_for(PartsRig& rig, int64_t ms) {
  rig.run_for(ms, [&] { rig.sender.drain(); });
}

PartsRig& booted(PartsRig& rig) {
  REQUIRE(rig.sender.boot().ok());
  return rig;
}

}  // namespace

TEST_CASE("EventSender: nothing is published offline or before the reconnect jitter") {
  CoreOptions o = vend::fw::test::Rig::default_options();
  o.reconnect_jitter_max_ms = 3000;
  PartsRig rig(o);
  booted(rig);
  write_events(rig, 3);
  drain_for(rig, 100);
  CHECK(rig.transport.published.empty());  // offline

  rig.transport.up = true;
  int64_t jitter = rig.sender.on_connection(true);
  CHECK(jitter >= 0);
  CHECK(jitter <= 3000);
  CHECK(rig.sender.connected());
  if (jitter > 10) {
    drain_for(rig, jitter - 10);
    CHECK(rig.transport.published.empty());
  }
  drain_for(rig, 1000);
  CHECK(published_seqs(rig) == std::vector<uint64_t>{1, 2, 3});
  CHECK(rig.stats.events_published == 3);
}

TEST_CASE("EventSender: at most outbox_window events are unacknowledged in flight") {
  CoreOptions o = vend::fw::test::Rig::default_options();
  o.outbox_window = 4;
  PartsRig rig(o);
  booted(rig);
  write_events(rig, 10);
  rig.transport.up = true;
  rig.sender.on_connection(true);
  drain_for(rig, 1000);
  CHECK(published_seqs(rig) == std::vector<uint64_t>{1, 2, 3, 4});

  CHECK(rig.sender.on_ack(proto::Ack{kDevice, 2}).result == "done");
  CHECK(rig.ledger.outbox_depth().value() == 8);
  drain_for(rig, 1000);
  CHECK(published_seqs(rig) == std::vector<uint64_t>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("EventSender: the drain rate is bounded by outbox_drain_per_s") {
  CoreOptions o = vend::fw::test::Rig::default_options();
  o.outbox_drain_per_s = 10;
  o.outbox_window = 1000;
  PartsRig rig(o);
  booted(rig);
  write_events(rig, 100);
  rig.transport.up = true;
  rig.sender.on_connection(true);
  drain_for(rig, 2000);
  // A bucket of at most one second's worth, refilled at 10/s.
  CHECK(rig.transport.published.size() >= 15);
  CHECK(rig.transport.published.size() <= 21);
}

TEST_CASE("EventSender: unacknowledged events are published again after retransmit_ms") {
  PartsRig rig;
  booted(rig);
  write_events(rig, 2);
  rig.transport.up = true;
  rig.sender.on_connection(true);
  drain_for(rig, 100);
  REQUIRE(rig.transport.published.size() == 2);
  drain_for(rig, rig.options.retransmit_ms - 200);
  CHECK(rig.transport.published.size() == 2);
  drain_for(rig, 300);
  CHECK(published_seqs(rig) == std::vector<uint64_t>{1, 2, 1, 2});
}

TEST_CASE("EventSender: an ack or resend for another ledger is refused and changes nothing") {
  PartsRig rig;
  booted(rig);
  write_events(rig, 2);
  auto ack = rig.sender.on_ack(proto::Ack{kDevice, 2, "another-ledger"});
  CHECK(ack.result == "refused");
  CHECK(ack.reason == "other_ledger");
  CHECK(rig.sender.on_resend(proto::ResendRequest{kDevice, 1, "another-ledger"}).result ==
        "refused");
  CHECK(rig.stats.refused == 2);
  CHECK(rig.ledger.outbox_depth().value() == 2);
}

TEST_CASE("EventSender: a resend of acknowledged events writes events_unavailable once") {
  PartsRig rig;
  booted(rig);
  write_events(rig, 3);
  REQUIRE(rig.sender.on_ack(proto::Ack{kDevice, 2}).result == "done");

  auto first = rig.sender.on_resend(proto::ResendRequest{kDevice, 1});
  CHECK(first.result == "done");
  CHECK(first.reason == "unavailable");
  auto gone = outbox_bodies<proto::EventsUnavailable>(rig.ledger);
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].from_seq == 1);
  CHECK(gone[0].oldest_seq == 3);
  CHECK(rig.sender.on_resend(proto::ResendRequest{kDevice, 1}).result == "duplicate");
  CHECK(outbox_bodies<proto::EventsUnavailable>(rig.ledger).size() == 1);

  // Still held: published again from there, nothing written.
  CHECK(rig.sender.on_resend(proto::ResendRequest{kDevice, 3}).reason == "3");
}

TEST_CASE("EventSender: the pressure alarm rises at 80 % of outbox_max and clears at 60 %") {
  CoreOptions o = vend::fw::test::Rig::default_options();
  o.outbox_max = 10;
  PartsRig rig(o);
  booted(rig);
  write_events(rig, 7);
  rig.clock.advance(1000);
  rig.sender.check_pressure();
  CHECK_FALSE(rig.sender.under_pressure());

  write_events(rig, 1);         // 8 of 10
  rig.sender.check_pressure();  // checked at most once a second
  CHECK_FALSE(rig.sender.under_pressure());
  rig.clock.advance(1000);
  rig.sender.check_pressure();
  CHECK(rig.sender.under_pressure());
  CHECK(outbox_bodies<proto::Fault>(rig.ledger).back().code == "outbox_near_full");
  CHECK_FALSE(rig.sender.outbox_full());  // 9 with the fault
  write_events(rig, 1);
  CHECK(rig.sender.outbox_full());  // 10: new work is refused

  REQUIRE(rig.sender.on_ack(proto::Ack{kDevice, 4}).result == "done");  // 6 left
  rig.clock.advance(1000);
  rig.sender.check_pressure();
  CHECK_FALSE(rig.sender.under_pressure());
}
