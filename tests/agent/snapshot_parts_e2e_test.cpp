// A full snapshot of the largest machine (255 slots x 1000 tokens) from a real
// firmware DeviceCore to a real AgentCore on the InMemoryBus: it goes out in
// parts, every message under the cap, and reconciles with every slot a match;
// an agent that crashes halfway through the parts asks for a new snapshot.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "agent_rig.hpp"
#include "vend/ops.hpp"
#include "vend/protocol.hpp"

using namespace vend;
using namespace vend::agent;
using vend::agent::test::AgentRig;
using vend::agent::test::DeviceSim;

namespace {

AgentOptions parts_options() {
  AgentOptions o = vend::agent::test::test_agent_options();
  o.reconcile_interval_ms = 0;  // only the requests a test makes
  return o;
}

std::vector<SlotSpec> machine_slots(int n) {
  std::vector<SlotSpec> slots;
  for (int s = 1; s <= n; ++s) slots.push_back({s, "p" + std::to_string(s), 100, 1000});
  return slots;
}

// Restocks every slot full and waits until the agent's pools hold it all.
DeviceSim& full_machine(AgentRig& rig, int slots) {
  DeviceSim& dev = rig.add_device("vm-1", machine_slots(slots));
  REQUIRE(rig.online("vm-1"));
  for (int s = 1; s <= slots; ++s) dev.restock(s, 1000);
  auto pooled = [&] {
    auto views = rig.core->slots("vm-1");
    REQUIRE(views.ok());
    int64_t total = 0;
    for (const auto& v : *views) total += v.pool;
    return total;
  };
  REQUIRE(rig.run_until([&] { return pooled() == int64_t{slots} * 1000; }, 60'000));
  return dev;
}

std::optional<ops::ReconcileReport> report_of(AgentRig& rig) {
  auto json = rig.core->reconcile_report("vm-1");
  if (!json.ok()) return std::nullopt;
  auto report = ops::decode_reconcile(*json);
  REQUIRE(report.ok());
  return *report;
}

bool is_snapshot(const Message& m) {
  return m.payload.find(R"("type":"snapshot")") != std::string::npos;
}

// The `part` of a snapshot event on the wire (1 when absent: 1 of 1).
int part_of(const Message& m) {
  auto at = m.payload.find(R"("part":)");
  return at == std::string::npos ? 1 : std::stoi(m.payload.substr(at + 7, 4));
}

void check_all_match(const ops::ReconcileReport& r, int slots) {
  CHECK(r.verdict == "ok");
  CHECK(r.full);
  REQUIRE(static_cast<int>(r.slots.size()) == slots);
  int matched = 0;
  for (const auto& s : r.slots) {
    matched += s.verdict == "match" && s.digest_match && s.device_tokens == 1000 &&
               s.physical_count == 1000 && s.pool == 1000;
  }
  CHECK(matched == slots);
}

}  // namespace

TEST_CASE("255 slots x 1000 tokens: a full snapshot in parts under the cap reconciles") {
  AgentRig rig(parts_options());
  full_machine(rig, 255);
  size_t largest = 0;
  int snapshot_messages = 0;
  rig.bus.set_filter([&](const InMemoryBus::Envelope& e) {
    largest = std::max(largest, e.message.payload.size());
    snapshot_messages += is_snapshot(e.message);
    return InMemoryBus::Fault::deliver();
  });
  auto id = rig.core->request_reconcile("vm-1");
  REQUIRE(id.ok());
  REQUIRE(rig.run_until(
      [&] {
        auto r = report_of(rig);
        return r && r->request_id == *id;
      },
      10'000));
  MESSAGE("snapshot messages: " << snapshot_messages << ", largest message: " << largest
                                << " bytes");
  CHECK(largest <= proto::kMaxPayloadBytes);
  CHECK(snapshot_messages >= 30);
  check_all_match(*report_of(rig), 255);
  CHECK(rig.core->take_metrics().events_rejected_total == 0);
  rig.check_stock_invariant();
}

TEST_CASE("an agent that crashes with part of a snapshot acknowledged asks for a new one") {
  AgentRig rig(parts_options());
  DeviceSim& dev = full_machine(rig, 20);  // 20 x 1000 tokens: 3 parts
  // Part 1 reaches the agent (processed, acknowledged, deleted on the
  // device); the later parts are lost until the agent has crashed.
  bool cut = true;
  rig.bus.set_filter([&](const InMemoryBus::Envelope& e) {
    if (cut && is_snapshot(e.message) && part_of(e.message) > 1) return InMemoryBus::Fault::drop();
    return InMemoryBus::Fault::deliver();
  });
  auto first_seq = dev.ledger->last_seq();
  REQUIRE(first_seq.ok());
  auto id = rig.core->request_reconcile("vm-1");
  REQUIRE(id.ok());
  // The device drops part 1 from its outbox once the agent acknowledges it.
  REQUIRE(rig.run_until([&] { return *dev.ledger->acked_seq() == *first_seq + 1; }, 5'000));
  CHECK(*dev.ledger->last_seq() >= *first_seq + 3);  // all parts were written at once
  rig.crash_agent();
  cut = false;
  rig.start_agent();
  REQUIRE(rig.run_until(
      [&] {
        auto r = report_of(rig);
        return r && r->trigger == "incomplete_snapshot";
      },
      10'000));
  check_all_match(*report_of(rig), 20);
}
