// DeviceKeys, AckWindow and ClockSkew alone: which key signed, a rotation
// promoted; acks never beyond what is committed; skew from the largest
// recent sample, with hysteresis.
#include "devices/device_link.hpp"

#include <doctest/doctest.h>

#include <future>

#include "vend/crypto.hpp"

using vend::Status;
using vend::agent::AckWindow;
using vend::agent::ClockSkew;
using vend::agent::DeviceKeys;
using vend::crypto::Key;

namespace {

Key key_of(char c) { return Key::from_hex(std::string(64, c)).value(); }

// A write whose commit the test completes by hand.
struct Write {
  std::promise<Status> promise;
  AckWindow::Ticket ticket = promise.get_future().share();
  void commit(Status s = {}) { promise.set_value(s); }
};

}  // namespace

TEST_CASE("keys: the current one, the issued next one, promotion and revocation") {
  DeviceKeys keys(key_of('a'));
  const std::string msg = "{\"v\":1}";
  std::string by_a = vend::crypto::sign(key_of('a'), msg);
  std::string by_b = vend::crypto::sign(key_of('b'), msg);
  CHECK(keys.verify(msg, by_a) == DeviceKeys::Signed::kCurrent);
  CHECK(keys.verify(msg, by_b) == DeviceKeys::Signed::kNo);
  CHECK(keys.verify("{\"v\":2}", by_a) == DeviceKeys::Signed::kNo);

  keys.issue_next(key_of('b'));
  CHECK(keys.verify(msg, by_a) == DeviceKeys::Signed::kCurrent);
  CHECK(keys.verify(msg, by_b) == DeviceKeys::Signed::kNext);
  keys.promote();
  CHECK_FALSE(keys.next().has_value());
  CHECK(keys.verify(msg, by_b) == DeviceKeys::Signed::kCurrent);
  CHECK(keys.verify(msg, by_a) == DeviceKeys::Signed::kNo);  // the old key is revoked

  keys.issue_next(key_of('c'));
  keys.drop_next();
  CHECK(keys.verify(msg, vend::crypto::sign(key_of('c'), msg)) == DeviceKeys::Signed::kNo);
}

TEST_CASE("seqs: duplicate, next, ahead") {
  AckWindow acks;
  acks.restore(5);
  CHECK(acks.place(4) == AckWindow::Place::kDuplicate);
  CHECK(acks.place(5) == AckWindow::Place::kDuplicate);
  CHECK(acks.place(6) == AckWindow::Place::kNext);
  CHECK(acks.place(8) == AckWindow::Place::kAhead);
  CHECK(acks.committed() == 5);
  CHECK(acks.unacked() == 0);
}

TEST_CASE("an ack covers only committed writes, in order, batched per interval") {
  AckWindow acks;
  Write w1, w2;
  acks.processed(1, w1.ticket);
  CHECK(acks.schedule(0, 50));
  acks.processed(2, w2.ticket);
  CHECK_FALSE(acks.schedule(10, 50));  // already due at 50
  CHECK_FALSE(acks.due(49));
  CHECK(acks.due(50));
  CHECK(acks.unacked() == 2);

  w2.commit();  // the later write alone: nothing may be acked yet
  auto f = acks.flush(50, 50);
  CHECK(f.status.ok());
  CHECK_FALSE(f.ack_upto.has_value());
  CHECK(f.still_due);
  CHECK_FALSE(acks.due(99));

  w1.commit();
  f = acks.flush(100, 50);
  CHECK(f.ack_upto == 2u);
  CHECK_FALSE(f.still_due);
  CHECK(acks.committed() == 2);
  CHECK(acks.unacked() == 0);
  CHECK_FALSE(acks.newest_ticket().has_value());
  CHECK_FALSE(acks.due(1'000));
}

TEST_CASE("an expedited seq is acked once committed, not batched") {
  AckWindow acks;
  Write w1, w2;
  acks.processed(1, w1.ticket);
  CHECK(acks.schedule(0, 50));
  acks.processed(2, w2.ticket);       // a dispense_started: the device's motor waits
  CHECK_FALSE(acks.expedite(2, 10));  // already listed as due; now due at 10, not 50
  CHECK(acks.due(10));

  w1.commit();  // seq 2 still committing: the ack of 1 goes, and it stays due now
  auto f = acks.flush(10, 50);
  CHECK(f.ack_upto == 1u);
  CHECK(f.still_due);
  CHECK(acks.due(20));

  w2.commit();
  f = acks.flush(20, 50);
  CHECK(f.ack_upto == 2u);
  CHECK_FALSE(f.still_due);

  Write w3;  // an idle window: expedite schedules it
  acks.processed(3, w3.ticket);
  CHECK(acks.expedite(3, 30));
  w3.commit();
  f = acks.flush(30, 50);
  CHECK(f.ack_upto == 3u);
}

TEST_CASE("a duplicate asks for a re-ack without progress") {
  AckWindow acks;
  acks.restore(3);
  acks.want_ack();
  CHECK(acks.schedule(0, 50));
  auto f = acks.flush(50, 50);
  CHECK(f.ack_upto == 3u);
  f = acks.flush(60, 50);
  CHECK_FALSE(f.ack_upto.has_value());  // said once
}

TEST_CASE("a failed write stops the acks there") {
  AckWindow acks;
  Write w1, w2;
  acks.processed(1, w1.ticket);
  acks.processed(2, w2.ticket);
  acks.schedule(0, 50);
  w1.commit(vend::make_error("io", "disk full"));
  w2.commit();
  auto f = acks.flush(50, 50);
  CHECK_FALSE(f.status.ok());
  CHECK_FALSE(f.ack_upto.has_value());
  CHECK(acks.committed() == 0);
}

TEST_CASE("a new ledger starts from seq 1 once its switch commits") {
  AckWindow acks;
  acks.restore(40);
  acks.want_ack();
  Write sw;
  acks.restart(sw.ticket);
  CHECK(acks.last_processed() == 0);
  CHECK(acks.committed() == 0);
  CHECK(acks.place(1) == AckWindow::Place::kNext);
  Write e1;
  acks.processed(1, e1.ticket);
  acks.schedule(0, 50);
  REQUIRE(acks.newest_ticket().has_value());
  e1.commit();
  auto f = acks.flush(50, 50);
  CHECK_FALSE(f.ack_upto.has_value());  // the switch first; the old re-ack is moot
  sw.commit();
  f = acks.flush(100, 50);
  CHECK(f.ack_upto == 1u);
}

TEST_CASE("an ack names the mac of the committed event it covers up to") {
  const std::string mac1(64, '1'), mac2(64, '2'), restored(64, 'r');
  AckWindow acks;
  acks.restore(4, restored);
  CHECK(acks.last_mac() == restored);
  acks.want_ack();
  acks.schedule(0, 50);
  auto f = acks.flush(50, 50);
  CHECK(f.ack_upto == 4u);
  CHECK(f.ack_mac == restored);
  Write w5, w6;
  acks.processed(5, w5.ticket, mac1);
  acks.processed(6, w6.ticket, mac2);
  CHECK(acks.last_mac() == mac2);
  acks.schedule(50, 50);
  w5.commit();
  f = acks.flush(100, 50);
  CHECK(f.ack_upto == 5u);  // 6 still commits: the ack and its mac are 5's
  CHECK(f.ack_mac == mac1);
  w6.commit();
  f = acks.flush(150, 50);
  CHECK(f.ack_upto == 6u);
  CHECK(f.ack_mac == mac2);
  // A skip over a gap knows no mac: the ack names none.
  Write skip;
  acks.processed(9, skip.ticket);
  acks.schedule(150, 50);
  skip.commit();
  f = acks.flush(200, 50);
  CHECK(f.ack_upto == 9u);
  CHECK(f.ack_mac.empty());
}

TEST_CASE("a diverged ledger stays so until a new ledger restarts the window") {
  AckWindow acks;
  acks.restore(7, std::string(64, 'a'));
  CHECK_FALSE(acks.diverged());
  acks.diverge();
  CHECK(acks.diverged());
  Write sw;
  acks.restart(sw.ticket);
  CHECK_FALSE(acks.diverged());
  CHECK(acks.last_mac().empty());
}

TEST_CASE("clock skew: the largest recent sample, a bounded window") {
  ClockSkew skew;
  CHECK_FALSE(skew.skew_ms().has_value());
  CHECK(skew.judge(1'000) == ClockSkew::Alert::kKeep);
  CHECK(skew.observe(0, 10'500, 10'000, 60'000));  // +500
  CHECK(skew.skew_ms() == 500);
  CHECK_FALSE(skew.observe(10, 10'200, 10'000, 60'000));  // a delayed one: smaller
  CHECK(skew.skew_ms() == 500);
  CHECK(skew.observe(70'000, 10'100, 10'000, 60'000));  // the +500 left the window
  CHECK(skew.skew_ms() == 100);
  for (int i = 0; i < 40; ++i) skew.observe(70'001 + i, 9'000, 10'000, 60'000);
  CHECK(skew.skew_ms() == -1'000);  // at most 32 samples: the old ones are gone
}

TEST_CASE("clock skew alert: raise above, clear below 80 %, keep between") {
  ClockSkew skew;
  skew.observe(0, 12'001, 10'000, 60'000);  // +2001
  CHECK(skew.judge(2'000) == ClockSkew::Alert::kRaise);
  CHECK(skew.judge(0) == ClockSkew::Alert::kKeep);  // alert off
  ClockSkew behind;
  behind.observe(0, 8'299, 10'000, 60'000);  // -1701
  CHECK(behind.judge(2'000) == ClockSkew::Alert::kKeep);
  ClockSkew near;
  near.observe(0, 11'599, 10'000, 60'000);  // +1599
  CHECK(near.judge(2'000) == ClockSkew::Alert::kClear);
}

TEST_CASE("clock skew: a backlog of old messages never says behind, it asks") {
  ClockSkew skew;
  // An outbox drained after an outage (or the agent's restart): events of
  // 10 and 5 minutes ago, and a status queued in the agent's session.
  skew.observe(0, 10'000 - 600'000, 10'000, 600'000);
  skew.observe(1, 10'001 - 300'000, 10'001, 600'000);
  skew.observe(2, 10'002 - 60'000, 10'002, 600'000, true);
  CHECK(skew.skew_ms() == -60'000);
  CHECK(skew.judge(2'000) == ClockSkew::Alert::kKeep);
  CHECK(skew.wants_round_trip(2, 2'000));
  CHECK_FALSE(skew.wants_round_trip(2, 0));  // the alert is off
  // Asked; the answer comes in 30 ms: the clocks agree.
  skew.asked(10, 10'010);
  CHECK_FALSE(skew.wants_round_trip(20, 2'000));  // an answer is due
  skew.observe(40, 10'040, 10'040, 600'000, true);
  CHECK(skew.skew_ms() == 0);
  CHECK(skew.judge(2'000) == ClockSkew::Alert::kClear);
  skew.observe(3'000, 13'000 - 120'000, 13'000, 600'000);  // more backlog, window closed
  CHECK(skew.upper_bound_ms() == 30);
  CHECK(skew.judge(2'000) == ClockSkew::Alert::kClear);
  CHECK_FALSE(skew.wants_round_trip(3'000, 2'000));
}

TEST_CASE("clock skew: behind is proven by a round trip, judged once its window closed") {
  ClockSkew skew;
  skew.observe(0, 10'000 - 4'000, 10'000, 600'000);  // an event: -4 s, a lower bound only
  CHECK(skew.judge(2'000) == ClockSkew::Alert::kKeep);
  REQUIRE(skew.wants_round_trip(0, 2'000));
  skew.asked(100, 10'100);
  // A status queued long ago arrives first, then the answer (stamped 20 ms
  // after the request by a clock 4 s behind).
  skew.observe(110, 10'110 - 90'000, 10'110, 600'000, true);
  skew.observe(150, 10'120 - 4'000, 10'150, 600'000, true);
  CHECK(skew.judge(2'000) == ClockSkew::Alert::kKeep);  // the window is open
  CHECK_FALSE(skew.upper_bound_ms().has_value());
  skew.observe(2'200, 12'200 - 4'000, 12'200, 600'000);
  CHECK(skew.upper_bound_ms() == -3'980);  // skew <= 10'120 - 4'000 - 10'100
  CHECK(skew.judge(2'000) == ClockSkew::Alert::kRaise);
  // NTP fixes the device: a sample above the bound drops it, the alert clears.
  skew.observe(5'000, 15'000, 15'000, 600'000);
  CHECK_FALSE(skew.upper_bound_ms().has_value());
  CHECK(skew.judge(2'000) == ClockSkew::Alert::kClear);
}

TEST_CASE("clock skew: a round trip without an answer bounds nothing") {
  ClockSkew skew;
  skew.observe(0, 10'000 - 30'000, 10'000, 600'000);
  skew.asked(10, 10'010);
  skew.observe(3'000, 13'000 - 30'000, 13'000, 600'000);  // an event, no status
  CHECK_FALSE(skew.upper_bound_ms().has_value());
  CHECK(skew.judge(2'000) == ClockSkew::Alert::kKeep);
  CHECK(skew.wants_round_trip(3'000, 2'000));  // ask again
  // A bound leaves with the window.
  skew.asked(3'000, 13'000);
  skew.observe(3'050, 13'050 - 30'000, 13'050, 60'000, true);
  skew.observe(5'100, 15'100 - 30'000, 15'100, 60'000);
  REQUIRE(skew.upper_bound_ms().has_value());
  skew.observe(70'000, 80'000 - 30'000, 80'000, 60'000);
  CHECK_FALSE(skew.upper_bound_ms().has_value());
}
