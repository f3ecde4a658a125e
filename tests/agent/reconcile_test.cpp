// Reconciliation against real firmware device cores on an InMemoryBus: each
// discrepancy class is created, detected, reported and repaired — store
// drift, tokens the cloud lacks (a lost tokens event), an item loaded outside
// a restock, a stuck dispatch and a device ledger ahead of the cloud (a
// restored database) — and an operator subscriber sees the ops topics.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <set>

#include "agent_rig.hpp"
#include "fresh_command.hpp"
#include "vend/ops.hpp"
#include "vend/sqlite.hpp"

using namespace vend;
using namespace vend::agent;
using vend::agent::test::AgentRig;
using vend::agent::test::DeviceSim;
namespace rig_test = vend::agent::test;

namespace {

const std::vector<SlotSpec> kSlots = {{1, "cola", 150, 10}, {2, "water", 90, 5}};

AgentOptions reconcile_options() {
  AgentOptions o = rig_test::test_agent_options();
  o.resend_interval_ms = 500;
  o.reconcile_interval_ms = 0;  // only the requests a test makes
  return o;
}

// The latest report, once one with `request_id` (or any, if empty) exists.
std::optional<ops::ReconcileReport> report_of(AgentRig& rig, const std::string& request_id = "") {
  auto json = rig.core->reconcile_report("vm-1");
  if (!json.ok()) return std::nullopt;
  auto report = ops::decode_reconcile(*json);
  REQUIRE(report.ok());
  if (!request_id.empty() && report->request_id != request_id) return std::nullopt;
  return *report;
}

ops::ReconcileReport reconcile_now(AgentRig& rig) {
  auto id = rig.core->request_reconcile("vm-1");
  REQUIRE(id.ok());
  REQUIRE(rig.run_until([&] { return report_of(rig, *id).has_value(); }, 5000));
  return *report_of(rig, *id);
}

const ops::SlotReconcile& slot_of(const ops::ReconcileReport& r, int slot) {
  for (const auto& s : r.slots) {
    if (s.slot == slot) return s;
  }
  FAIL("no slot " << slot << " in the report");
  return r.slots.front();
}

// A command to the device, signed with its key as the agent would.
void send_to_device(DeviceSim& dev, const proto::Command& unstamped) {
  proto::Command command = vend::test::fresh_command(unstamped, SystemClock().wall_ms());
  std::string mac = crypto::sign(dev.key, proto::encode_canonical(command));
  dev.core->on_command(proto::encode(command, mac));
}

// A consistent copy of the agent's database (what a backup would hold).
void backup_agent_db(AgentRig& rig, const std::string& to) {
  rig.db();  // everything queued is committed
  auto db = sql::Database::open(rig.dir.file("agent.db"));
  REQUIRE(db.ok());
  REQUIRE(db->exec("VACUUM INTO '" + to + "'").ok());
}

// The agent restarts from `backup`: everything after it is lost to the cloud.
void restore_agent_db(AgentRig& rig, const std::string& backup) {
  rig.crash_agent();
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::remove(rig.dir.file(std::string("agent.db") + suffix));
  }
  std::filesystem::copy_file(backup, rig.dir.file("agent.db"));
  rig.start_agent();
}

// An order paid while its command is lost; the agent's database is backed
// up then (the order DISPATCHED, no result); the command is then delivered
// and the order completes. Restoring `backup` later loses the result.
Order completed_after_backup(AgentRig& rig, DeviceSim& dev, const std::string& backup) {
  rig.bus.set_filter([](const InMemoryBus::Envelope& e) {
    bool dispense = e.message.payload.find("\"type\":\"dispense\"") != std::string::npos;
    return dispense ? InMemoryBus::Fault::drop() : InMemoryBus::Fault::deliver();
  });
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  REQUIRE(rig.pay(o->id, "pay-1", 150).ok());
  backup_agent_db(rig, backup);
  rig.bus.set_filter({});
  send_to_device(dev, proto::DispenseCommand{"vm-1", o->id, 1, o->token,
                                             rig.order(o->id).dispatch_expires_at_ms});
  REQUIRE(rig.run_until([&] { return rig.state_of(o->id) == OrderState::kCompleted; }));
  return rig.order(o->id);
}

}  // namespace

TEST_CASE("consistent views: every slot matches, nothing is repaired") {
  AgentRig rig(reconcile_options());
  rig.stocked_device(kSlots, 3);
  REQUIRE(rig.create_order("vm-1", 1, "", "").ok());  // a reservation is part of the view
  ops::ReconcileReport r = reconcile_now(rig);
  CHECK(r.verdict == "ok");
  CHECK(r.trigger == "on_demand");
  CHECK(r.full);
  const auto& s1 = slot_of(r, 1);
  CHECK(s1.verdict == "match");
  CHECK(s1.digest_match);
  CHECK(s1.pool == 2);
  CHECK(s1.reserved == 1);
  CHECK(s1.device_tokens == 3);
  CHECK(s1.physical_count == 3);
  CHECK(s1.actions.empty());
  CHECK(rig.core->take_metrics().reconcile_runs_total == 1);
  // Kept in the database: readable after a restart.
  rig.crash_agent();
  rig.start_agent();
  auto again = rig.core->reconcile_report("vm-1");
  REQUIRE(again.ok());
  CHECK(ops::decode_reconcile(*again)->id == r.id);
}

TEST_CASE("an item loaded outside a restock raises an alert naming the slot, never a sale") {
  AgentRig rig(reconcile_options());
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  dev.machine.load(1, 1);  // three items, two tokens
  ops::ReconcileReport r = reconcile_now(rig);
  CHECK(r.verdict == "alert");
  const auto& s1 = slot_of(r, 1);
  CHECK(s1.verdict == "alert");
  CHECK(s1.physical_count == 3);
  CHECK(s1.device_tokens == 2);
  CHECK(s1.pool == 2);  // no token for the extra item
  auto m = rig.core->take_metrics();
  CHECK(m.alerts_raised_total == 1);
  for (int i = 0; i < 2; ++i) REQUIRE(rig.create_order("vm-1", 1, "", "").ok());
  CHECK(rig.create_order("vm-1", 1, "", "").error().code == "sold_out");
  // A second run does not raise it again; the item taken out clears it.
  reconcile_now(rig);
  CHECK(rig.core->take_metrics().alerts_raised_total == 1);
  dev.machine.load(1, -1);
  CHECK(reconcile_now(rig).verdict == "ok");
}

TEST_CASE("lost tokens event: tokens the cloud lacks are verified and added to the pool") {
  AgentRig rig(reconcile_options());
  // The machine has a slot 3 the cloud does not sell yet: its minted tokens
  // are recorded as a fault, not sold.
  auto provisioned = rig.core->provision_device("vm-1", kSlots);
  REQUIRE(provisioned.ok());
  std::vector<fw::SlotConfig> configs = {
      {1, 10, "cola", -1}, {2, 5, "water", -1}, {3, 8, "tea", -1}};
  rig.devices.push_back(
      std::make_unique<DeviceSim>(rig.bus, rig.clock, rig.dir.file("vm-1.ledger"), "vm-1",
                                  crypto::Key::from_hex(provisioned->key_hex).value(), configs));
  DeviceSim& dev = *rig.devices.back();
  dev.boot();
  rig.bus.deliver_all();
  dev.restock(3, 4);
  REQUIRE(rig.run_until([&] { return dev.ledger->outbox_depth().value() == 0; }));

  ops::ReconcileReport before = reconcile_now(rig);
  CHECK(before.verdict == "alert");
  CHECK(slot_of(before, 3).verdict == "alert");  // unknown_slot

  REQUIRE(rig.core->set_slot("vm-1", SlotSpec{3, "tea", 120, 8}).ok());
  ops::ReconcileReport after = reconcile_now(rig);
  const auto& s3 = slot_of(after, 3);
  CHECK(s3.tokens_added == 4);
  CHECK(s3.verdict == "repaired");
  CHECK(rig.slot("vm-1", 3).pool == 4);
  rig.check_stock_invariant();
  CHECK(rig.core->take_metrics().tokens_added_total == 4);
  CHECK(rig.core->take_metrics().alerts_active.empty());  // unknown_slot cleared
  // They sell, and dispense.
  auto o = rig.create_order("vm-1", 3, "", "");
  REQUIRE(o.ok());
  REQUIRE(rig.pay(o->id, "pay-3", 120).ok());
  REQUIRE(rig.run_until([&] { return rig.state_of(o->id) == OrderState::kCompleted; }));
  // Consistent now.
  CHECK(slot_of(reconcile_now(rig), 3).verdict == "match");
}

TEST_CASE("tokens the device no longer has leave the pool and cancel a reservation") {
  AgentRig rig(reconcile_options());
  DeviceSim& dev = rig.stocked_device(kSlots, 3);
  auto held = rig.create_order("vm-1", 1, "", "");
  REQUIRE(held.ok());
  // The device's ledger loses two tokens (one of them reserved) and the
  // slot its two items (a restored or tampered ledger).
  std::string lost_reserved = held->token;
  auto ledger_db = sql::Database::open(rig.dir.file("vm-1.ledger"));
  REQUIRE(ledger_db.ok());
  auto snap = dev.ledger->snapshot("", true, dev.machine.hal().inventory);
  REQUIRE(snap.ok());
  std::string lost_pool;
  for (const auto& t : *snap->slots.at(0).tokens) {
    if (t != lost_reserved) lost_pool = t;
  }
  for (const auto& t : {lost_reserved, lost_pool}) {
    REQUIRE(ledger_db->exec("DELETE FROM tokens WHERE token = '" + t + "'").ok());
  }
  dev.machine.load(1, -2);

  ops::ReconcileReport r = reconcile_now(rig);
  const auto& s1 = slot_of(r, 1);
  CHECK(s1.tokens_removed == 2);
  CHECK(s1.verdict == "repaired");
  CHECK(rig.slot("vm-1", 1).pool == 1);
  CHECK(rig.slot("vm-1", 1).reserved == 0);
  CHECK(rig.slot("vm-1", 1).burned == 2);
  rig.check_stock_invariant();
  CHECK(rig.state_of(held->id) == OrderState::kCancelled);
  CHECK(rig.order(held->id).reason == "token_lost");
  // A payment arriving for it is refunded, never dispatched.
  auto late = rig.pay(held->id, "pay-late", 150);
  REQUIRE(late.ok());
  CHECK(late->payment_outcome == "late_payment_refunded");
  CHECK(reconcile_now(rig).verdict == "ok");
}

TEST_CASE("a dispatch in flight explains a digest difference") {
  AgentRig rig(reconcile_options());
  DeviceSim& dev = rig.stocked_device(kSlots, 3);
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  REQUIRE(rig.pay(o->id, "pay-1", 150).ok());
  rig.bus.deliver_all();  // the device accepts: token consumed, motor running
  REQUIRE(
      dev.ledger->snapshot("", false, dev.machine.hal().inventory)->slots.at(0).available_tokens ==
      2);
  send_to_device(dev, proto::SnapshotRequest{"vm-1", "rec-inflight", false});
  rig.bus.deliver_all();
  REQUIRE(rig.run_until([&] { return report_of(rig, "rec-inflight").has_value(); }, 1000));
  ops::ReconcileReport r = *report_of(rig, "rec-inflight");
  CHECK(r.trigger == "periodic");
  CHECK_FALSE(r.full);
  CHECK(slot_of(r, 1).verdict == "in_flight");
  CHECK(slot_of(r, 1).actions.empty());
  CHECK(r.verdict == "ok");
  REQUIRE(rig.run_until([&] { return rig.state_of(o->id) == OrderState::kCompleted; }));
}

// The bug this pins: a gap was accepted after a grace, and the ack past it
// made the device delete events the agent never saw.
TEST_CASE("a seq gap the device can fill is resent, never acknowledged past") {
  AgentRig rig(reconcile_options());
  fw::CoreOptions slow = rig_test::test_device_options();
  slow.retransmit_ms = 600'000;  // only the agent's resend request can fill the gap
  DeviceSim& dev = rig.add_device("vm-1", kSlots, slow);
  REQUIRE(rig.online("vm-1"));
  dev.restock(1, 3);
  REQUIRE(rig.run_until([&] { return rig.slot("vm-1", 1).pool == 3; }));
  uint64_t seq_before = rig.core->devices().front().last_processed_seq;

  int dropped = 0;  // the next tokens event is lost on its way to the agent
  rig.bus.set_filter([&](const InMemoryBus::Envelope& e) {
    bool tokens = e.message.topic == topics::device_evt("vm-1") &&
                  e.message.payload.find(R"("type":"tokens")") != std::string::npos;
    if (tokens && dropped == 0) {
      ++dropped;
      return InMemoryBus::Fault::drop();
    }
    return InMemoryBus::Fault::deliver();
  });
  dev.restock(1, 2);  // seq +1: lost
  rig.run_for(1000);
  dev.restock(1, 1);  // seq +2: beyond the gap
  rig.run_for(5000);  // past the old 3 s grace
  dev.restock(2, 1);  // seq +3
  REQUIRE(rig.run_until([&] { return dev.ledger->outbox_depth().value() == 0; }, 10'000));
  CHECK(dropped == 1);
  CHECK(rig.slot("vm-1", 1).pool == 6);  // 3 + 2 + 1: the lost event was resent
  CHECK(rig.slot("vm-1", 2).pool == 1);
  CHECK(rig.core->devices().front().last_processed_seq == seq_before + 3);
  auto m = rig.core->take_metrics();
  CHECK(m.seq_gaps_total == 0);
  CHECK(m.resend_requests_total >= 1);
  CHECK(m.events_processed_total >= 4);
  CHECK_FALSE(rig.log.contains("acknowledged to the device but are missing"));
  rig.check_stock_invariant();
}

TEST_CASE("a forged-looking jump of +1000 is never acknowledged past") {
  AgentRig rig(reconcile_options());
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  uint64_t seq = rig.core->devices().front().last_processed_seq;
  auto attacker = rig.bus.make_client("replayer");
  REQUIRE(attacker->connect().ok());
  // Signed with the device key (a device bug, or a key holder): seq +1000.
  proto::DeviceEvent jump{"vm-1",
                          seq + 1000,
                          dev.boot_id,
                          rig.clock.wall_ms(),
                          proto::Fault{"x", "far ahead", 0},
                          dev.ledger->identity().ledger_id};
  std::string payload = proto::encode(jump, crypto::sign(dev.key, proto::encode_canonical(jump)));
  for (int i = 0; i < 10; ++i) {
    REQUIRE(attacker->publish(Message{topics::device_evt("vm-1"), payload, 1, false}).ok());
    rig.run_for(1000);
  }
  CHECK(rig.core->devices().front().last_processed_seq == seq);
  CHECK(rig.core->take_metrics().seq_gaps_total == 0);
  CHECK(dev.ledger->acked_seq().value() == seq);
  dev.restock(1, 1);  // the device's real next event still counts
  REQUIRE(rig.run_until([&] { return rig.slot("vm-1", 1).pool == 3; }));
}

TEST_CASE("a restored database: the device is ahead; it says so, the gap is skipped and repaired") {
  AgentRig rig(reconcile_options());
  DeviceSim& dev = rig.stocked_device(kSlots, 3);
  std::string backup = rig.dir.file("backup.db");
  Order o = completed_after_backup(rig, dev, backup);
  dev.restock(1, 2);  // tokens the backup will not have
  REQUIRE(rig.run_until([&] { return rig.slot("vm-1", 1).pool == 4; }));
  REQUIRE(rig.run_until([&] { return dev.ledger->outbox_depth().value() == 0; }));

  restore_agent_db(rig, backup);
  CHECK(rig.state_of(o.id) == OrderState::kDispatched);
  CHECK(rig.slot("vm-1", 1).pool == 2);
  // The agent re-sends the live command at start; the device re-reports the
  // stored result with a seq beyond the cloud's gap. The agent asks for a
  // resend from its next seq; the device no longer holds it and says so
  // (events_unavailable): the gap is skipped, the result settles the order,
  // a full snapshot adds the minted tokens.
  REQUIRE(rig.run_until([&] { return rig.state_of(o.id) == OrderState::kCompleted; }, 15000));
  auto m = rig.core->take_metrics();
  CHECK(m.seq_gaps_total == 1);
  CHECK(m.resend_requests_total >= 1);
  CHECK(dev.log.contains("acknowledged earlier; oldest held"));
  REQUIRE(rig.run_until([&] { return rig.slot("vm-1", 1).pool == 4; }, 5000));
  auto r = report_of(rig);
  REQUIRE(r.has_value());
  CHECK(r->trigger == "seq_gap");
  CHECK(slot_of(*r, 1).tokens_added == 2);
  rig.check_stock_invariant();
  CHECK(reconcile_now(rig).verdict == "ok");
}

TEST_CASE("a stuck dispatch past its deadline is resolved from the device's ledger") {
  AgentRig rig(reconcile_options());
  DeviceSim& dev = rig.stocked_device(kSlots, 3);
  std::string backup = rig.dir.file("backup.db");
  Order o = completed_after_backup(rig, dev, backup);
  REQUIRE(rig.run_until([&] { return dev.ledger->outbox_depth().value() == 0; }));
  // Restored after the command expired: nothing is re-sent at start, the
  // deadline asks the device, the device's answer lies beyond the gap.
  rig.run_for(4000);
  restore_agent_db(rig, backup);
  REQUIRE(rig.run_until([&] { return rig.state_of(o.id) == OrderState::kCompleted; }, 20000));
  CHECK(rig.order(o.id).reason.empty());
  CHECK(rig.core->take_metrics().seq_gaps_total == 1);
  CHECK(rig.log.contains("asking it to report the result again"));
  CHECK(rig.slot("vm-1", 1).sold == 1);
  CHECK(rig.db().refunds_of(o.id)->empty());  // dispensed: no refund
}

TEST_CASE("an operator subscriber sees order events, device status and reconcile reports") {
  AgentRig rig(reconcile_options());
  auto op = rig.bus.make_client("operator", std::nullopt, true);
  std::vector<Message> seen;
  op->on_message([&](const Message& m) { seen.push_back(m); });
  REQUIRE(op->connect().ok());
  REQUIRE(op->subscribe(topics::ops_all(), 1).ok());
  rig.stocked_device(kSlots, 2);
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  REQUIRE(rig.pay(o->id, "pay-1", 150).ok());
  REQUIRE(rig.run_until([&] { return rig.state_of(o->id) == OrderState::kCompleted; }));
  reconcile_now(rig);
  rig.run_for(1500);  // the rate-limited views

  std::vector<std::string> states;
  bool fleet = false, device = false, report = false;
  for (const auto& m : seen) {
    if (m.topic == topics::ops_orders()) {
      auto batch = ops::decode_order_events(m.payload);
      REQUIRE(batch.ok());
      for (const auto& e : batch->events) {
        if (e.order_id == o->id) states.push_back(e.to_state);
      }
    } else if (m.topic == topics::ops_fleet()) {
      auto f = ops::decode_fleet(m.payload);
      REQUIRE(f.ok());
      fleet = f->devices == 1 && f->online == 1;
    } else if (m.topic == topics::ops_device("vm-1")) {
      auto d = ops::decode_device(m.payload);
      REQUIRE(d.ok());
      device = d->online && d->slots.size() == 2;
    } else if (m.topic == topics::ops_reconcile("vm-1")) {
      report = ops::decode_reconcile(m.payload).ok();
    }
  }
  CHECK(states == std::vector<std::string>{"RESERVED", "PAID", "DISPATCHED", "COMPLETED"});
  CHECK(fleet);
  CHECK(device);
  CHECK(report);
}

TEST_CASE("periodic requests are staggered across the fleet, one per device per interval") {
  AgentOptions options = reconcile_options();
  options.reconcile_interval_ms = 10'000;
  AgentRig rig(options);
  for (const char* id : {"vm-a", "vm-b", "vm-c", "vm-d"}) rig.add_device(id, kSlots);
  std::map<std::string, std::vector<int64_t>> at;  // device -> report times
  for (int64_t t = 0; t < 20'000; t += 10) {
    rig.step();
    for (const char* id : {"vm-a", "vm-b", "vm-c", "vm-d"}) {
      auto json = rig.core->reconcile_report(id);
      if (!json.ok()) continue;
      auto r = ops::decode_reconcile(*json);
      REQUIRE(r.ok());
      CHECK(r->trigger == "periodic");
      auto& times = at[id];
      if (times.empty() || times.back() != r->ts_ms) times.push_back(r->ts_ms);
    }
  }
  std::set<int64_t> first;
  for (const auto& [id, times] : at) {
    CHECK_MESSAGE(times.size() == 2, id);  // 20 s, one per 10 s interval
    if (times.size() == 2) CHECK(times[1] - times[0] == doctest::Approx(10'000).epsilon(0.01));
    first.insert(times.front());
  }
  CHECK(at.size() == 4);
  CHECK(first.size() == 4);  // not all at once
}

TEST_CASE("DISPENSED for an order settled otherwise is an alert and a fault record") {
  AgentRig rig(reconcile_options());
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  REQUIRE(rig.run_until([&] { return rig.state_of(o->id) == OrderState::kExpired; }, 5000));
  // A command for the expired order reaches the machine anyway (a stale
  // copy, an operator's tool): the item drops, the device reports DISPENSED.
  send_to_device(dev,
                 proto::DispenseCommand{"vm-1", o->id, 1, o->token, rig.clock.wall_ms() + 10'000});
  REQUIRE(rig.run_until([&] { return rig.core->take_metrics().contradictions_total == 1; }));
  CHECK(rig.state_of(o->id) == OrderState::kExpired);  // nothing changed automatically
  auto m = rig.core->take_metrics();
  bool alerted = false;
  for (const auto& [code, n] : m.alerts_active)
    alerted |= code == "dispense_contradiction" && n == 1;
  CHECK(alerted);
  auto faults = rig.db().faults("vm-1", 10);
  REQUIRE(faults.ok());
  bool recorded = false;
  for (const auto& f : *faults) {
    if (f.code == "dispense_contradiction") {
      recorded = true;
      CHECK(f.slot == 1);
      CHECK(f.message.find(o->id) != std::string::npos);
      CHECK(f.message.find("EXPIRED") != std::string::npos);
    }
  }
  CHECK(recorded);
}
