// A payment that finds its reservation past the deadline before the timer
// fired (agent_rig.hpp): the expiry and the refund are one changeset, one
// commit, after one check that the log can take it. With one write of room
// left in the queue the payment is recorded and refunded and storage stays
// healthy; with none, nothing changes and the gateway's retry is honoured.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "agent_rig.hpp"
#include "write_gate.hpp"

using namespace vend;
using namespace vend::agent;
using vend::agent::test::AgentRig;

namespace {

const std::vector<SlotSpec> kSlots = {{1, "cola", 150, 10}};

// An agent whose repository queues at most `queue_max` writes, with a
// device holding 2 tokens in slot 1.
void start_small_queue(AgentRig& rig, size_t queue_max) {
  rig.crash_agent();
  rig.repo_options.queue_max = queue_max;
  rig.start_agent();
  auto& dev = rig.add_device("vm-1", kSlots);
  REQUIRE(rig.online("vm-1"));
  dev.restock(1, 2);
  REQUIRE(rig.run_until([&] { return rig.slot("vm-1", 1).pool == 2; }));
}

// Holds the writer and fills its queue until `room` writes are left.
void fill_queue(AgentRig& rig, vend::test::WriteGate& gate, size_t queue_max, size_t room) {
  REQUIRE(rig.repo->submit(gate.write()).ok());
  gate.wait_started();
  for (size_t i = 0; i + room < queue_max; ++i) {
    REQUIRE(rig.repo->submit([](WriteContext&) { return Status{}; }).ok());
  }
  REQUIRE(rig.repo->accepting() == (room > 0));
}

std::vector<std::string> transitions(AgentRig& rig, const std::string& order_id) {
  auto events = rig.db().order_events(order_id);
  REQUIRE(events.ok());
  std::vector<std::string> out;
  for (const auto& e : *events) out.push_back(e.to_state);
  return out;
}

}  // namespace

TEST_CASE("a late payment with one write of room left: expired, refunded, storage healthy") {
  constexpr size_t kQueueMax = 4;
  AgentRig rig;
  start_small_queue(rig, kQueueMax);
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  rig.clock.advance(2500);  // past its deadline; no tick: the timer has not fired
  vend::test::WriteGate gate;
  fill_queue(rig, gate, kQueueMax, 1);
  // The writer stays held until the payment's write filled the queue.
  auto opener = std::async(std::launch::async, [&] {
    while (rig.repo->accepting()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    gate.open();
  });
  auto late = rig.pay(o->id, "pay-late", 150);
  opener.get();
  REQUIRE_MESSAGE(late.ok(), late.error().to_string());
  CHECK(late->state == OrderState::kRefunded);
  CHECK(late->payment_outcome == "late_payment_refunded");
  CHECK(rig.core->health().ok());
  CHECK_FALSE(rig.core->take_metrics().storage_failed);
  // Through EXPIRED (the state table's path), in the log as in memory.
  CHECK(transitions(rig, o->id) == std::vector<std::string>{"RESERVED", "EXPIRED", "REFUNDED"});
  auto refunds = rig.db().refunds_of(o->id);
  REQUIRE(refunds.ok());
  REQUIRE(refunds->size() == 1);
  CHECK((*refunds)[0].payment_id == "pay-late");
  CHECK(rig.slot("vm-1", 1).pool == 2);
  rig.check_stock_invariant();
  // The core still sells.
  auto next = rig.create_order("vm-1", 1, "", "");
  REQUIRE(next.ok());
  CHECK(rig.pay(next->id, "pay-next", 150)->state == OrderState::kDispatched);
}

TEST_CASE("a late payment with no room in the queue changes nothing; its retry is refunded") {
  constexpr size_t kQueueMax = 3;
  AgentRig rig;
  start_small_queue(rig, kQueueMax);
  auto o = rig.create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  rig.clock.advance(2500);
  vend::test::WriteGate gate;
  fill_queue(rig, gate, kQueueMax, 0);
  auto refused = rig.pay(o->id, "pay-late", 150);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == "unavailable");
  gate.open();
  rig.repo->flush();
  CHECK(rig.core->health().ok());
  CHECK(rig.db().payments_of(o->id)->empty());
  // The gateway's retry: recorded and refunded now.
  auto late = rig.pay(o->id, "pay-late", 150);
  REQUIRE(late.ok());
  CHECK(late->payment_outcome == "late_payment_refunded");
  CHECK(transitions(rig, o->id) == std::vector<std::string>{"RESERVED", "EXPIRED", "REFUNDED"});
  CHECK(rig.db().refunds_of(o->id)->size() == 1);
  rig.check_stock_invariant();
}
