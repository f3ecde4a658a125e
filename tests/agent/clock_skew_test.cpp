// A device's clock skew as the agent core measures it (devices/device_link.hpp
// ClockSkew): shown and alerted when the device's clock is really off, never
// for a backlog of old events or statuses (an outbox replayed after an
// outage, the agent's broker session drained after its restart).
#include <doctest/doctest.h>

#include <string>

#include "agent_rig.hpp"
#include "http/metrics.hpp"

using namespace vend;
using namespace vend::agent;
using vend::agent::test::AgentRig;
using vend::agent::test::DeviceSim;
namespace rig_test = vend::agent::test;

namespace {

// No periodic snapshot requests: the tests' own stamped events take the
// device's next seqs, so the real device must not send any.
AgentOptions quiet_options() {
  AgentOptions o = rig_test::test_agent_options();
  o.reconcile_interval_ms = 0;
  return o;
}

// Eleven minutes on, without a step: every sample so far left the window.
void leave_window(AgentRig& rig) { rig.clock.advance(11 * 60 * 1000); }

const std::vector<SlotSpec> kSlots = {{1, "cola", 150, 10}};

// A well-signed event of the device with the next seq, stamped `ts_ms` by
// "its clock".
void send_stamped_event(AgentRig& rig, DeviceSim& dev, int64_t ts_ms) {
  auto view = rig.core->devices().front();
  proto::DeviceEvent e{"vm-1", view.last_processed_seq + 1, dev.boot_id, ts_ms,
                       proto::Fault{"note", "stamped", 0}};
  rig.core->on_message(Message{topics::device_evt("vm-1"),
                               proto::encode(e, crypto::sign(dev.key, proto::encode_canonical(e))),
                               1, false});
}

bool skew_alert_active(AgentRig& rig) {
  for (const auto& [code, n] : rig.core->take_metrics().alerts_active) {
    if (code == "clock_skew") return n > 0;
  }
  return false;
}

int alerts_raised(AgentRig& rig) {
  int n = 0;
  for (const auto& r : rig.log.records()) {
    if (r.message.find("ALERT clock_skew vm-1") != std::string::npos) ++n;
  }
  return n;
}

// vm-1 as a machine whose wall clock runs `skew_ms` off the agent's: its
// real statuses (stamped by the shared clock) are dropped on the bus, and
// answer() publishes one stamped by the skewed clock, as the device does for
// each status_request.
class SkewedStatuses {
 public:
  SkewedStatuses(AgentRig& rig, DeviceSim& dev) : rig_(rig), dev_(dev) {
    rig.bus.set_filter([this](const InMemoryBus::Envelope& e) {
      if (e.from == "vm-1" && e.message.topic == topics::device_status("vm-1")) {
        return InMemoryBus::Fault::drop();
      }
      if (e.to == "vm-1" && e.message.payload.find("\"status_request\"") != std::string::npos) {
        ++requests;
      }
      return InMemoryBus::Fault::deliver();
    });
  }
  // The status the device publishes now, delivered live.
  void answer(int64_t skew_ms) {
    Message m =
        fw::DeviceCore::presence(dev_.ledger->identity(), true, rig_.clock.wall_ms() + skew_ms);
    m.retained = false;
    rig_.core->on_message(m);
  }
  // Waits for the agent's next status_request and answers it.
  void answer_next_request(int64_t skew_ms) {
    int before = requests;
    REQUIRE(rig_.run_until([&] { return requests > before; }, 10'000));
    rig_.step();  // the device's answer takes a moment
    answer(skew_ms);
  }
  int requests = 0;

 private:
  AgentRig& rig_;
  DeviceSim& dev_;
};

}  // namespace

TEST_CASE("a backlog replayed after an agent restart raises no clock_skew alert") {
  AgentRig rig;
  DeviceSim& dev = rig.stocked_device(kSlots, 1);
  REQUIRE(rig.core->devices().front().clock_skew_ms.has_value());
  // Away for two minutes: the device's new stock and its periodic presence
  // wait in the agent's broker session and the device's outbox.
  rig.crash_agent();
  dev.restock(1, 2);
  rig.run_for(120'000);
  rig.start_agent();
  REQUIRE(rig.run_until([&] { return rig.slot("vm-1", 1).pool == 3; }, 10'000));
  rig.run_for(5'000);
  CHECK_FALSE(skew_alert_active(rig));
  CHECK(alerts_raised(rig) == 0);
  // Every process shares one clock: once a status answered a request, the
  // estimate is the delivery delay at most.
  auto skew = rig.core->devices().front().clock_skew_ms;
  REQUIRE(skew.has_value());
  CHECK(*skew <= 0);
  CHECK(*skew > -1'000);
}

TEST_CASE("old events alone never say a device is behind; its answer to a request does") {
  AgentRig rig(quiet_options());
  DeviceSim& dev = rig.stocked_device(kSlots, 1);
  SkewedStatuses statuses(rig, dev);
  leave_window(rig);
  // A drained outbox: the agent checks with a status request before judging.
  int64_t now = rig.clock.wall_ms();
  send_stamped_event(rig, dev, now - 600'000);
  send_stamped_event(rig, dev, now - 300'000);
  statuses.answer_next_request(0);
  rig.run_for(3'000);
  send_stamped_event(rig, dev, rig.clock.wall_ms() - 60'000);
  CHECK_FALSE(skew_alert_active(rig));
  CHECK(*rig.core->devices().front().clock_skew_ms > -100);

  // Its clock really falls 4 s behind (11 min later: the old samples are
  // gone): its events say so, its answer confirms it.
  leave_window(rig);
  send_stamped_event(rig, dev, rig.clock.wall_ms() - 4'000);
  CHECK_FALSE(skew_alert_active(rig));  // a lower bound only, so far
  statuses.answer_next_request(-4'000);
  rig.run_for(3'000);  // the reply window closes; judged at the next message
  send_stamped_event(rig, dev, rig.clock.wall_ms() - 4'000);
  CHECK(skew_alert_active(rig));
  CHECK(rig.log.contains("device clock behind by at least 39", LogLevel::kWarn));
  send_stamped_event(rig, dev, rig.clock.wall_ms() - 4'100);
  CHECK(alerts_raised(rig) == 1);  // said once

  // NTP fixes it: its next message clears the alert.
  rig.run_for(1'000);
  statuses.answer(0);
  CHECK_FALSE(skew_alert_active(rig));
  CHECK(alerts_raised(rig) == 1);
}

TEST_CASE("a stale status delivered beside the answer does not make a device behind") {
  AgentRig rig(quiet_options());
  DeviceSim& dev = rig.stocked_device(kSlots, 1);
  SkewedStatuses statuses(rig, dev);
  leave_window(rig);
  send_stamped_event(rig, dev, rig.clock.wall_ms() - 120'000);
  int before = statuses.requests;
  REQUIRE(rig.run_until([&] { return statuses.requests > before; }, 10'000));
  statuses.answer(-120'000);  // queued two minutes ago, delivered now
  rig.step();
  statuses.answer(0);  // the answer
  rig.run_for(3'000);
  send_stamped_event(rig, dev, rig.clock.wall_ms() - 60'000);
  CHECK_FALSE(skew_alert_active(rig));
  CHECK(alerts_raised(rig) == 0);
}

TEST_CASE("device clock ahead: any message proves it; shown, alerted, cleared") {
  AgentRig rig;
  DeviceSim& dev = rig.stocked_device(kSlots, 1);
  REQUIRE(rig.core->devices().front().clock_skew_ms.has_value());
  CHECK(*rig.core->devices().front().clock_skew_ms <= 0);  // same clock, minus delivery delay
  CHECK_FALSE(skew_alert_active(rig));

  // The device's clock runs 3 s ahead; deliveries take 0..500 ms.
  int64_t now = rig.clock.wall_ms();
  send_stamped_event(rig, dev, now + 3000 - 500);
  send_stamped_event(rig, dev, now + 3000);
  send_stamped_event(rig, dev, now + 3000 - 200);
  send_stamped_event(rig, dev, now - 3'600'000);  // an hour-old event from its outbox
  CHECK(rig.core->devices().front().clock_skew_ms == 3000);
  CHECK(skew_alert_active(rig));
  AgentMetrics m = rig.core->take_metrics();
  std::string text = MetricsExporter().render(m, AgentHealth{});
  CHECK(text.find("vend_device_clock_skew_ms{device=\"vm-1\"} 3000\n") != std::string::npos);
  CHECK(rig.log.contains("ALERT clock_skew vm-1", LogLevel::kWarn));
  CHECK(rig.log.contains("device clock ahead by at least 2500 ms"));  // when first beyond 2 s
  CHECK(rig.core->devices().front().clock_skew_ms == 3000);

  // Fixed (NTP): once the old samples leave the window the alert clears.
  leave_window(rig);
  send_stamped_event(rig, dev, rig.clock.wall_ms() + 100);
  CHECK(rig.core->devices().front().clock_skew_ms == 100);
  CHECK_FALSE(skew_alert_active(rig));
}
