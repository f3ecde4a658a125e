// device_rules alone: where an event falls in its device's stream (ledger,
// seq, gaps and how one closes) and what a presence status says.
#include "devices/device_rules.hpp"

#include <doctest/doctest.h>

#include <future>
#include <string>

using vend::agent::DeviceRecord;
using vend::agent::device_rules::decide_presence;
using vend::agent::device_rules::Intake;
using vend::agent::device_rules::Presence;
namespace proto = vend::proto;

namespace {

// The mac of the event the record processed last, and of another one.
const std::string kMac(64, 'a');
const std::string kOtherMac(64, 'b');

// A record counting ledger "L1" up to `last` (its event's mac kMac).
DeviceRecord counted(uint64_t last, const std::string& ledger = "L1") {
  DeviceRecord d;
  d.id = "vm-1";
  d.ledger_id = ledger;
  std::promise<vend::Status> done;
  done.set_value({});
  d.acks.restore(0);
  if (last > 0) d.acks.processed(last, done.get_future().share(), kMac);
  return d;
}

// Where `e`, signed `mac`, falls for `d`.
Intake decide_intake(const DeviceRecord& d, const proto::DeviceEvent& e,
                     const std::string& mac = kMac) {
  return vend::agent::device_rules::decide_intake(d, e, mac);
}

proto::DeviceEvent event(uint64_t seq, const std::string& ledger = "L1",
                         proto::EventBody body = proto::Fault{}) {
  proto::DeviceEvent e;
  e.device = "vm-1";
  e.seq = seq;
  e.ledger_id = ledger;
  e.body = std::move(body);
  return e;
}

proto::DeviceEvent gone(uint64_t seq, uint64_t from, uint64_t oldest) {
  return event(seq, "L1", proto::EventsUnavailable{from, oldest});
}

}  // namespace

TEST_CASE("an event of the current ledger is processed next, re-acked when old, held past a gap") {
  DeviceRecord d = counted(5);
  Intake next = decide_intake(d, event(6));
  CHECK(next.ledger == Intake::Ledger::kCurrent);
  CHECK(next.action == Intake::Action::kProcess);
  CHECK(decide_intake(d, event(5)).action == Intake::Action::kReack);
  CHECK(decide_intake(d, event(1)).action == Intake::Action::kReack);
  // Beyond the next seq: never acknowledged past, the device is asked to resend.
  CHECK(decide_intake(d, event(7)).action == Intake::Action::kResend);
  CHECK(decide_intake(d, event(1006)).action == Intake::Action::kResend);
}

TEST_CASE("another event under the last processed seq: the ledger went back in time") {
  DeviceRecord d = counted(5);
  CHECK(decide_intake(d, event(5), kMac).action == Intake::Action::kReack);  // a resend
  Intake other = decide_intake(d, event(5), kOtherMac);
  CHECK(other.ledger == Intake::Ledger::kCurrent);
  CHECK(other.action == Intake::Action::kDiverged);
  // Below the last seq the record knows no mac: the device compares (the ack's mac).
  CHECK(decide_intake(d, event(4), kOtherMac).action == Intake::Action::kReack);
  SUBCASE("once diverged, nothing more of that ledger is processed or re-acked") {
    d.acks.diverge();
    CHECK(decide_intake(d, event(6), kOtherMac).action == Intake::Action::kDiverged);
    CHECK(decide_intake(d, event(3)).action == Intake::Action::kDiverged);
    // The device's new ledger is the board-replacement path, counted from 1.
    Intake fresh = decide_intake(d, event(1, "L2"), kOtherMac);
    CHECK(fresh.ledger == Intake::Ledger::kReplaced);
    CHECK(fresh.action == Intake::Action::kProcess);
  }
  SUBCASE("no mac known (a seq skipped over a gap, a log older than the macs): a duplicate") {
    DeviceRecord unknown = counted(0);
    std::promise<vend::Status> done;
    done.set_value({});
    unknown.acks.processed(5, done.get_future().share(), "");
    CHECK(decide_intake(unknown, event(5), kOtherMac).action == Intake::Action::kReack);
  }
}

TEST_CASE("only the device's events_unavailable covering the gap's start closes it") {
  DeviceRecord d = counted(5);  // next is 6
  SUBCASE("it names the gap from 6 and holds events from 9: skip to 8, then itself next") {
    Intake i = decide_intake(d, gone(9, 6, 9));
    CHECK(i.action == Intake::Action::kSkip);
    CHECK(i.gap_from == 6);
    CHECK(i.skip_to == 8);
    CHECK(i.process_after_skip);
  }
  SUBCASE("it holds older events than itself: skip, then those first (resend)") {
    Intake i = decide_intake(d, gone(12, 4, 9));
    CHECK(i.action == Intake::Action::kSkip);
    CHECK(i.skip_to == 8);
    CHECK_FALSE(i.process_after_skip);
  }
  SUBCASE("a gap it does not cover stays open") {
    CHECK(decide_intake(d, gone(12, 7, 9)).action == Intake::Action::kResend);  // starts after 6
    CHECK(decide_intake(d, gone(12, 6, 6)).action == Intake::Action::kResend);  // 6 is held
    // It holds nothing older than itself, yet points past it.
    CHECK(decide_intake(d, gone(12, 6, 13)).action == Intake::Action::kResend);
  }
  SUBCASE("in order, it is just the next event") {
    CHECK(decide_intake(d, gone(6, 2, 3)).action == Intake::Action::kProcess);
  }
}

TEST_CASE("a new ledger counts from 1; a replaced one's late events are refused") {
  SUBCASE("a device that never sent an event names its first ledger") {
    DeviceRecord d = counted(0, "");
    Intake i = decide_intake(d, event(1, "L1"));
    CHECK(i.ledger == Intake::Ledger::kFirst);
    CHECK(i.action == Intake::Action::kProcess);
  }
  SUBCASE("a reflashed card: its seq 1 is new, not a duplicate of the old ledger's") {
    DeviceRecord d = counted(40, "L1");
    Intake i = decide_intake(d, event(1, "L2"));
    CHECK(i.ledger == Intake::Ledger::kReplaced);
    CHECK(i.action == Intake::Action::kProcess);
    CHECK(decide_intake(d, event(3, "L2")).action == Intake::Action::kResend);
  }
  SUBCASE("events under the first ledger, then its id is named: replaced") {
    DeviceRecord d = counted(3, "");
    CHECK(decide_intake(d, event(1, "L1")).ledger == Intake::Ledger::kReplaced);
  }
  SUBCASE("retired") {
    DeviceRecord d = counted(2, "L2");
    d.retired_ledgers.insert("L1");
    Intake i = decide_intake(d, event(41, "L1"));
    CHECK(i.ledger == Intake::Ledger::kRetired);
    CHECK(i.action == Intake::Action::kRefuse);
    d.acks.diverge();  // a retired ledger stays retired, whatever the current one did
    CHECK(decide_intake(d, event(41, "L1")).ledger == Intake::Ledger::kRetired);
  }
}

TEST_CASE(
    "presence: online under its boot, a stale will ignored, a current will takes it offline") {
  DeviceRecord d;
  d.id = "vm-1";
  proto::PresenceStatus online{"vm-1", "b1", true, 100};
  Presence first = decide_presence(d, online, true);
  CHECK(first.kind == Presence::Kind::kOnline);
  CHECK(first.changed);
  CHECK(first.clock_sample);
  CHECK_FALSE(decide_presence(d, online, false).clock_sample);  // a retained copy: an old stamp
  d.online = true;
  d.boot_id = "b1";
  CHECK_FALSE(decide_presence(d, online, true).changed);
  CHECK(decide_presence(d, proto::PresenceStatus{"vm-1", "b2", true, 200}, true).changed);
  // The will of an older session, published late: the device is up.
  Presence stale = decide_presence(d, proto::PresenceStatus{"vm-1", "b0", false, 0}, true);
  CHECK(stale.kind == Presence::Kind::kStaleWill);
  CHECK_FALSE(stale.clock_sample);
  Presence off = decide_presence(d, proto::PresenceStatus{"vm-1", "b1", false, 0}, true);
  CHECK(off.kind == Presence::Kind::kOffline);
  CHECK(off.changed);
  CHECK_FALSE(off.clock_sample);
  d.online = false;
  CHECK_FALSE(decide_presence(d, proto::PresenceStatus{"vm-1", "b1", false, 0}, true).changed);
  // A device never seen online: any will is its current one.
  DeviceRecord fresh;
  CHECK(decide_presence(fresh, proto::PresenceStatus{"vm-1", "bx", false, 0}, true).kind ==
        Presence::Kind::kOffline);
}
