// The agent core against real firmware device cores on an in-memory bus
// (issue 36): a dispense command lost after it was published (a broker or
// session that lost it, a firmware killed with it in its inbox) is re-sent
// until a result arrives or it expires, so a paid order dispenses instead of
// being refunded; deadlines run on the monotonic clock, so a wall-clock step
// decides no order; presence converges after a restart whatever the order of
// connect and retained status; a restock command the transport refused is
// sent again within seconds; no reservation is made without a broker
// connection.
#include <doctest/doctest.h>

#include <algorithm>

#include "agent_rig.hpp"

using namespace vend;
using namespace vend::agent;
using vend::agent::test::AgentRig;
using vend::agent::test::DeviceSim;
namespace rig_test = vend::agent::test;

namespace {

const std::vector<SlotSpec> kSlots = {{1, "cola", 150, 10}};

Order paid_order(AgentRig& rig) {
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  auto paid = rig.pay(o->id, "pay-" + o->id, o->price_cents);
  REQUIRE(paid.ok());
  REQUIRE(paid->state == OrderState::kDispatched);
  return *paid;
}

bool is_dispense(const InMemoryBus::Envelope& e) {
  return e.message.payload.find("\"type\":\"dispense\"") != std::string::npos;
}

// Drops the first `n` dispense deliveries, as a broker that lost them after
// its PUBACK; counts every dispense delivery asked for.
struct DropDispenses {
  int to_drop = 1;
  int seen = 0;
  InMemoryBus::Fault operator()(const InMemoryBus::Envelope& e) {
    if (!is_dispense(e)) return InMemoryBus::Fault::deliver();
    ++seen;
    if (to_drop == 0) return InMemoryBus::Fault::deliver();
    --to_drop;
    return InMemoryBus::Fault::drop();
  }
};

AgentOptions options_with_resend(int64_t resend_ms) {
  AgentOptions o = rig_test::test_agent_options();
  o.command_resend_ms = resend_ms;
  o.command_resend_max_ms = resend_ms * 4;
  return o;
}

void install(AgentRig& rig, DropDispenses& drops) {
  rig.bus.set_filter([&drops](const InMemoryBus::Envelope& e) { return drops(e); });
}

}  // namespace

TEST_CASE("a dispense command lost after its publish is re-sent until it runs") {
  AgentRig rig(options_with_resend(500));
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  DropDispenses drops;
  install(rig, drops);
  Order o = paid_order(rig);
  REQUIRE(rig.run_until([&] { return rig.state_of(o.id) == OrderState::kCompleted; }, 3000));
  CHECK(dev.machine.rotations() == 1);
  CHECK(drops.seen == 2);
  rig.run_for(3000);  // settled: nothing more is sent
  CHECK(drops.seen == 2);
  CHECK(dev.machine.rotations() == 1);
}

TEST_CASE("re-sent commands back off and stop at the command's expiry") {
  AgentOptions options = options_with_resend(200);
  options.command_resend_max_ms = 800;
  AgentRig rig(options);
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  DropDispenses drops;
  drops.to_drop = 1000;
  install(rig, drops);
  Order o = paid_order(rig);
  rig.run_for(10'000);
  // Sent at 0, 200, 600, 1400 (backoff 200, 400, 800, capped at 800), then
  // at half the remaining life, busy_retry_ms (200) at least: 2200, 2600,
  // 2800; 3000 is the expiry. 7, not 15.
  CHECK(drops.seen == 7);
  CHECK(rig.state_of(o.id) == OrderState::kRefunded);
  CHECK(dev.machine.rotations() == 0);
}

TEST_CASE("a dispense command lost after its publish is re-sent on the agent's reconnect") {
  AgentRig rig(options_with_resend(60'000));  // no periodic re-send before the expiry
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  DropDispenses drops;
  install(rig, drops);
  Order o = paid_order(rig);
  rig.run_for(200);
  REQUIRE(drops.seen == 1);
  rig.bus.disconnect(rig_test::kAgentClient, false);
  rig.run_for(100);
  REQUIRE(rig.bus.reconnect(rig_test::kAgentClient));
  REQUIRE(rig.run_until([&] { return rig.state_of(o.id) == OrderState::kCompleted; }, 2000));
  CHECK(dev.machine.rotations() == 1);
}

// The re-send on a reconnect is lost too, after the backoff grew past the
// command's expiry (sent at 0, 500, 1500; the next would be at 3500): the
// backoff starts again, so the next copy goes 500 ms later, not never.
TEST_CASE("a re-send on reconnect that is lost too is followed by another before the expiry") {
  AgentRig rig(options_with_resend(500));  // backoff 500, 1000, 2000
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  DropDispenses drops;
  drops.to_drop = 4;
  install(rig, drops);
  Order o = paid_order(rig);
  REQUIRE(rig.run_until([&] { return drops.seen == 3; }, 2000));
  rig.bus.disconnect(rig_test::kAgentClient, false);
  rig.run_for(50);
  REQUIRE(rig.bus.reconnect(rig_test::kAgentClient));
  REQUIRE(rig.run_until([&] { return drops.seen == 4; }, 200));
  REQUIRE(rig.run_until([&] { return rig.state_of(o.id) == OrderState::kCompleted; }, 1200));
  CHECK(drops.seen == 5);
  CHECK(dev.machine.rotations() == 1);
}

TEST_CASE("a dispense command lost after its publish is re-sent when the machine returns") {
  AgentRig rig(options_with_resend(60'000));
  DeviceSim& dev = rig.stocked_device(kSlots, 2);
  DropDispenses drops;
  install(rig, drops);
  Order o = paid_order(rig);
  rig.run_for(200);
  REQUIRE(drops.seen == 1);
  // The firmware restarts (the command was in its inbox, never stored).
  dev.power_cut();
  rig.run_for(100);
  REQUIRE_FALSE(rig.online("vm-1"));
  dev.boot();
  REQUIRE(rig.run_until([&] { return rig.state_of(o.id) == OrderState::kCompleted; }, 2000));
  CHECK(dev.machine.rotations() == 1);
}

TEST_CASE("a wall clock stepped back 10 minutes expires no reservation early") {
  AgentRig rig;
  rig.stocked_device(kSlots, 2);
  rig.clock.set_wall_skew(-10 * 60 * 1000);
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  rig.run_for(1500);  // the reservation TTL is 2 s
  CHECK(rig.state_of(o->id) == OrderState::kReserved);
  REQUIRE(rig.run_until([&] { return rig.state_of(o->id) == OrderState::kExpired; }, 1000));
}

TEST_CASE("a wall clock stepped forward 40 minutes expires nothing, reviews nothing") {
  AgentRig rig;
  rig.stocked_device(kSlots, 2);
  DropDispenses drops;
  drops.to_drop = 1000;  // no result: the order stays DISPATCHED
  install(rig, drops);
  Order paid = paid_order(rig);
  auto reserved = rig.create_order("vm-1", 1, "", "");
  REQUIRE(reserved.ok());
  rig.run_for(100);
  rig.clock.set_wall_skew(40 * 60 * 1000);
  rig.run_for(1000);
  CHECK(rig.state_of(paid.id) == OrderState::kDispatched);
  CHECK(rig.state_of(reserved->id) == OrderState::kReserved);
  // The reservation still expires on time, measured on the monotonic clock.
  REQUIRE(rig.run_until([&] { return rig.state_of(reserved->id) == OrderState::kExpired; }, 1500));
}

namespace {

// The agent is down; the broker holds the device's `offline` (a restored
// old will) although the device is up and will not publish on its own.
void stale_retained_offline(AgentRig& rig, DeviceSim& dev) {
  rig.crash_agent();
  auto replayer = rig.bus.make_client("replayer");
  REQUIRE(replayer->connect().ok());
  Message will = fw::DeviceCore::presence(dev.ledger->identity(), false, rig.clock.wall_ms());
  REQUIRE(replayer->publish(Message{will.topic, will.payload, 1, true}).ok());
  rig.bus.deliver_all();
}

}  // namespace

TEST_CASE("presence converges when the retained offline is seen before the connect") {
  AgentRig rig;
  DeviceSim& dev = rig.add_device("vm-1", kSlots);
  rig.run_for(200);
  stale_retained_offline(rig, dev);
  rig.start_agent();
  // Paho may hand over the retained statuses before its connected callback:
  // the core sees the `offline` while it believes the broker is down.
  rig.core->on_connection(false);
  rig.bus.deliver_all();
  REQUIRE_FALSE(rig.online("vm-1"));
  rig.core->on_connection(true);
  CHECK(rig.run_until([&] { return rig.online("vm-1"); }, 2000));
}

TEST_CASE("presence converges when the answer to the first status request is lost") {
  AgentRig rig;
  DeviceSim& dev = rig.add_device("vm-1", kSlots);
  rig.run_for(200);
  stale_retained_offline(rig, dev);
  int dropped = 0;
  rig.bus.set_filter([&dropped](const InMemoryBus::Envelope& e) {
    bool online = e.to == rig_test::kAgentClient &&
                  e.message.topic == topics::device_status("vm-1") &&
                  e.message.payload.find("\"state\":\"online\"") != std::string::npos;
    if (!online || dropped > 0) return InMemoryBus::Fault::deliver();
    ++dropped;
    return InMemoryBus::Fault::drop();
  });
  rig.start_agent();
  CHECK(rig.run_until([&] { return rig.online("vm-1"); }, 10'000));
  CHECK(dropped == 1);
}

namespace {

// Every command the agent sent to vm-1, decoded.
struct CommandLog {
  std::vector<proto::Command> sent;
  InMemoryBus::Fault operator()(const InMemoryBus::Envelope& e) {
    if (e.message.topic == topics::device_cmd("vm-1")) {
      auto decoded = proto::decode_command(e.message.payload);
      REQUIRE(decoded.ok());
      sent.push_back(decoded->message);
    }
    return InMemoryBus::Fault::deliver();
  }
};

}  // namespace

// One skew bound: the device used to add its own core.expiry_skew_ms (up to
// an hour) to the order's expiry while the agent settled the order as never
// run at expiry + 5 s. The v2 command carries expiry + 5 s as its bound.
TEST_CASE("every command goes out v2 with an expiry; a dispense's is the order's plus the skew") {
  AgentRig rig;
  CommandLog log;
  rig.bus.set_filter([&log](const InMemoryBus::Envelope& e) { return log(e); });
  rig.stocked_device(kSlots, 2);
  Order paid = paid_order(rig);
  REQUIRE(rig.run_until([&] { return rig.state_of(paid.id) == OrderState::kCompleted; }, 3000));
  REQUIRE(rig.core->request_reconcile("vm-1").ok());
  rig.run_for(200);
  bool saw_dispense = false;
  bool saw_other = false;
  for (const proto::Command& c : log.sent) {
    CAPTURE(proto::encode_canonical(c));
    CHECK(proto::command_version(c) == 2);
    if (auto* d = std::get_if<proto::DispenseCommand>(&c)) {
      saw_dispense = true;
      CHECK(d->expires_at_ms == paid.dispatch_expires_at_ms + rig_test::kSkewMs);
    } else {
      saw_other = true;
      CHECK(proto::command_expires_at_ms(c) > rig.clock.wall_ms() - 1000);
      CHECK(proto::command_expires_at_ms(c) <=
            rig.clock.wall_ms() + AgentOptions{}.command_ttl_ms + rig_test::kSkewMs);
    }
  }
  CHECK(saw_dispense);
  CHECK(saw_other);
}

TEST_CASE("command_version 1: commands as before v2, for firmware that accepts only those") {
  AgentOptions options = rig_test::test_agent_options();
  options.command_version = 1;
  AgentRig rig(options);
  CommandLog log;
  rig.bus.set_filter([&log](const InMemoryBus::Envelope& e) { return log(e); });
  DeviceSim& dev = rig.add_device("vm-1", kSlots);
  REQUIRE(rig.online("vm-1"));
  dev.restock(1, 1);
  rig.run_for(300);
  REQUIRE_FALSE(log.sent.empty());
  for (const proto::Command& c : log.sent) {
    CHECK(proto::command_version(c) == 1);
    CHECK(proto::command_expires_at_ms(c) == 0);
  }
}

// Issue 36: a restock command the transport refused while connected (Paho's
// queue full) waited for the next reconcile, 10 minutes by default, and
// forever with --reconcile-interval-s 0.
TEST_CASE("a restock whose publish fails while connected is sent again within seconds") {
  AgentOptions agent_options = rig_test::test_agent_options();
  agent_options.reconcile_interval_ms = 0;  // no periodic resend to fall back on
  AgentRig rig(agent_options);
  fw::CoreOptions options = rig_test::test_device_options();
  options.auto_confirm_restock = true;
  DeviceSim& dev = rig.add_device("vm-1", kSlots, options);
  rig.run_for(5000);  // past the presence probe after connect (which re-sends restocks too)
  int to_refuse = 2;
  int restocks_published = 0;
  rig.transport->refuse = [&](const Message& m) {
    if (m.payload.find("\"type\":\"restock\"") == std::string::npos) return false;
    if (to_refuse > 0) return to_refuse-- > 0;
    ++restocks_published;
    return false;
  };
  auto id = rig.core->request_restock("vm-1", 1, 4);
  REQUIRE(id.ok());  // recorded and queued; the transport then refused it
  CHECK(rig.transport->refused == 1);
  CHECK(rig.log.contains("restock command to vm-1 not published; sent again in 1000 ms"));
  rig.run_for(900);
  CHECK(rig.slot("vm-1", 1).pool == 0);
  // 1 s later refused again, 2 s after that sent.
  REQUIRE(rig.run_until([&] { return rig.slot("vm-1", 1).pool == 4; }, 5000));
  CHECK(rig.transport->refused == 2);
  CHECK(rig.log.contains("sent again in 2000 ms"));
  CHECK(restocks_published == 1);
  CHECK(dev.machine.items(1) == 4);
  rig.run_for(60'000);  // minted: nothing is sent again
  CHECK(restocks_published == 1);
  rig.check_stock_invariant();
}

// Issue 36: reservations made while the agent had no broker connection
// could not be dispatched; their payments all ended refunded.
TEST_CASE("no broker connection: no new reservation; a payment for one made before is kept") {
  AgentRig rig;
  rig.stocked_device(kSlots, 3);
  auto before = rig.create_order("vm-1", 1, "app", "key-before");
  REQUIRE(before.ok());
  rig.bus.disconnect(rig_test::kAgentClient, false);
  rig.step();
  auto refused = rig.create_order("vm-1", 1, "app", "key-new");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == "broker_unreachable");
  CHECK(refused.error().message.find("no connection to the machines' broker") != std::string::npos);
  // A repeat of a reservation made before is answered as before.
  auto again = rig.create_order("vm-1", 1, "app", "key-before");
  REQUIRE(again.ok());
  CHECK(again->id == before->id);
  // Its payment is recorded and dispatched once the connection is back.
  auto paid = rig.pay(before->id, "pay-before", before->price_cents);
  REQUIRE(paid.ok());
  CHECK(paid->payment_outcome == "applied");
  AgentMetrics m = rig.core->take_metrics();
  CHECK(m.reservations_broker_unreachable_total == 1);
  CHECK(m.reservations_rejected_total == 1);
  CHECK(rig.slot("vm-1", 1).pool == 2);  // nothing taken by the refusal

  REQUIRE(rig.bus.reconnect(rig_test::kAgentClient));
  rig.step();
  REQUIRE(rig.run_until([&] { return rig.state_of(before->id) == OrderState::kCompleted; }));
  auto after = rig.create_order("vm-1", 1, "app", "key-new");
  REQUIRE(after.ok());
  CHECK(after->state == OrderState::kReserved);
  rig.check_stock_invariant();
}
