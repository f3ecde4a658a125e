// Store-and-forward: the outbox publishes in seq order and keeps every event
// until the cloud's cumulative ack covers it.
#include <doctest/doctest.h>

#include "core_rig.hpp"

using namespace vend;
using namespace vend::fw;
using vend::fw::test::Rig;

TEST_CASE("events wait offline, publish in seq order on connect, and stay until acked") {
  Rig rig;
  rig.restock(1, 2);
  rig.restock(2, 1);
  rig.run_for(100);
  CHECK(rig.transport.published.empty());  // offline: nothing sent, nothing lost
  CHECK(rig.ledger.outbox_depth().value() == 2);

  rig.connect();
  rig.run_for(100);
  auto events = rig.events();
  REQUIRE(events.size() == 2);
  CHECK(events[0].seq == 1);
  CHECK(events[1].seq == 2);
  CHECK(rig.transport.published[0].topic == topics::device_status(vend::fw::test::kDevice));
  CHECK(rig.transport.published[0].retained);
  CHECK(rig.ledger.outbox_depth().value() == 2);  // a PUBACK is not proof

  CHECK(rig.send(proto::Ack{vend::fw::test::kDevice, 1}).result == "done");
  CHECK(rig.ledger.outbox_depth().value() == 1);
  CHECK(rig.ledger.acked_seq().value() == 1);
  CHECK(rig.send(proto::Ack{vend::fw::test::kDevice, 2}).result == "done");
  CHECK(rig.ledger.outbox_depth().value() == 0);
}

TEST_CASE("unacknowledged events are sent again after the retransmit delay") {
  Rig rig;
  rig.restock(1, 1);
  rig.connect();
  rig.run_for(100);
  REQUIRE(rig.events().size() == 1);
  rig.run_for(10500);  // retransmit_ms defaults to 10 s
  auto events = rig.events();
  REQUIRE(events.size() == 2);
  CHECK(events[1].seq == events[0].seq);  // same event, same seq: the cloud dedups
  rig.send(proto::Ack{vend::fw::test::kDevice, 1});
  rig.run_for(11000);
  CHECK(rig.events().size() == 2);
}

TEST_CASE("an ack beyond the last event drops nothing: the ledger went back, a new one starts") {
  Rig rig;
  rig.restock(1, 1);
  const std::string old_id = rig.ledger.identity().ledger_id;
  auto out = rig.send(proto::Ack{vend::fw::test::kDevice, 99});
  CHECK(out.result == "new_ledger");
  CHECK(rig.ledger.identity().ledger_id != old_id);
  CHECK(rig.ledger.outbox_depth().value() == 2);  // the tokens event, then ledger_regressed
  CHECK(rig.ledger.last_seq().value() == 2);
}

TEST_CASE("a forged ack cannot drop events") {
  Rig rig;
  rig.restock(1, 1);
  crypto::Key wrong = crypto::Key::generate();
  auto out = rig.core->on_command(rig.sign(proto::Ack{vend::fw::test::kDevice, 1}, &wrong));
  CHECK(out.reason == "bad_mac");
  CHECK(rig.ledger.outbox_depth().value() == 1);
}

TEST_CASE("after a reconnect the backlog drains at a bounded rate after a per-device delay") {
  CoreOptions o = Rig::default_options();
  o.reconnect_jitter_max_ms = 3000;
  o.outbox_drain_per_s = 20;
  o.outbox_window = 1000;
  Rig rig(o);
  for (int i = 0; i < 60; ++i) {
    REQUIRE(rig.ledger.append_event(proto::Fault{"backlog", std::to_string(i), 0}, 1).ok());
  }
  rig.connect();
  // Find when draining started, then count what one second allows.
  int64_t waited = 0;
  while (rig.events().empty() && waited < 4000) {
    rig.run_for(10);
    waited += 10;
  }
  CHECK(waited <= 3010);
  size_t first = rig.events().size();
  CHECK(first <= 21);
  rig.run_for(1000);
  size_t after = rig.events().size();
  CHECK(after - first >= 15);
  CHECK(after - first <= 25);

  // The delay is derived from the device id: the same device waits the same.
  Rig twin(o);
  twin.restock(1, 1);
  twin.connect();
  int64_t twin_waited = 0;
  while (twin.events().empty() && twin_waited < 4000) {
    twin.run_for(10);
    twin_waited += 10;
  }
  CHECK(twin_waited == waited);
}

TEST_CASE("near the outbox bound a fault is raised; at it new work is refused, results kept") {
  CoreOptions o = Rig::default_options();
  o.outbox_max = 10;  // fault at 8
  Rig rig(o);
  auto tokens = rig.restock(1, 9);  // event 1
  for (int i = 0; i < 6; ++i) {
    REQUIRE(rig.send(rig.dispense("o-" + std::to_string(i), 1, tokens[i])).result == "accepted");
  }
  rig.run_for(6 * 520);  // six results: events 2..7
  REQUIRE(rig.ledger.append_event(proto::Fault{"filler", "x", 0}, 1).ok());  // event 8
  rig.run_for(1100);
  auto rows = rig.ledger.outbox_after(0, 100).value();
  REQUIRE(rows.size() == 9);
  CHECK(rows.back().type == "fault");
  CHECK(rows.back().payload.find("outbox_near_full") != std::string::npos);
  REQUIRE(rig.ledger.append_event(proto::Fault{"filler", "x", 0}, 1).ok());  // at the bound
  auto out = rig.send(rig.dispense("o-late", 1, tokens[7]));
  CHECK(out.result == "refused");
  CHECK(out.reason == "outbox_full");
  CHECK(rig.ledger.find_token(tokens[7]).value()->first == TokenState::kAvailable);
  // Every dispense result is still there for the cloud.
  int results = 0;
  for (auto& r : rig.ledger.outbox_after(0, 100).value()) results += r.type == "dispense_result";
  CHECK(results == 6);
}

TEST_CASE("the online status is re-published while connected, so a late will cannot stick") {
  CoreOptions o = Rig::default_options();
  o.presence_interval_ms = 1000;
  Rig rig(o);
  rig.connect();
  rig.run_for(2050);
  int online = 0;
  for (const auto& m : rig.transport.published) {
    if (m.topic != topics::device_status(vend::fw::test::kDevice)) continue;
    auto s = proto::decode_status(m.payload);
    REQUIRE(s.ok());
    CHECK(s->message.online);
    CHECK(m.retained);
    ++online;
  }
  CHECK(online == 3);  // on connect, then at 1 s and 2 s
}

TEST_CASE("an ack or resend naming another ledger changes nothing; one naming this ledger works") {
  Rig rig;
  rig.restock(1, 1);
  rig.restock(2, 1);
  rig.connect();
  rig.run_for(100);
  REQUIRE(rig.events().size() == 2);
  const std::string self = rig.ledger.identity().ledger_id;
  REQUIRE(self.size() == 32);
  const std::string other(32, 'e');  // the ledger of the SD card this one replaced
  auto stale = rig.send(proto::Ack{vend::fw::test::kDevice, 2, other});
  CHECK(stale.result == "refused");
  CHECK(stale.reason == "other_ledger");
  CHECK(rig.ledger.outbox_depth().value() == 2);
  CHECK(rig.ledger.acked_seq().value() == 0);
  auto resend = rig.send(proto::ResendRequest{vend::fw::test::kDevice, 1, other});
  CHECK(resend.reason == "other_ledger");
  CHECK(rig.ledger.outbox_depth().value() == 2);

  CHECK(rig.send(proto::Ack{vend::fw::test::kDevice, 1, self}).result == "done");
  CHECK(rig.ledger.outbox_depth().value() == 1);
  CHECK(rig.send(proto::Ack{vend::fw::test::kDevice, 2}).result == "done");  // names none
  CHECK(rig.ledger.outbox_depth().value() == 0);
}
