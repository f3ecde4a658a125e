// The device core's parts wired by hand, without DeviceCore: a ledger with
// two slots, a manual clock, the simulated machine (500 ms rotations) and the
// recording transport of core_rig.hpp. A test drives one part directly.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core_rig.hpp"
#include "vend/fw/dispenser.hpp"
#include "vend/fw/event_sender.hpp"
#include "vend/fw/refusals.hpp"
#include "vend/fw/storage_guard.hpp"

namespace vend::fw::test {

struct PartsRig {
  explicit PartsRig(CoreOptions opts = Rig::default_options())
      : options(opts),
        ledger(open_ledger()),
        machine(clock, random, SimulatedMachineOptions{500, 0.0}) {
    REQUIRE(ledger.sync_slots({{1, 10, "cola", -1}, {2, 5, "water", -1}}).ok());
  }

  Ledger open_ledger() {
    auto l = Ledger::open(dir.file("ledger.db"), Identity{kDevice, key, boot_id});
    REQUIRE(l.ok());
    return std::move(l).value();
  }

  std::vector<std::string> restock(int slot, int count) {
    auto minted = ledger.confirm_restock("r" + std::to_string(++restocks), slot, count,
                                         clock.wall_ms(), random);
    REQUIRE(minted.ok());
    machine.load(slot, count);
    return minted->tokens;
  }

  proto::DispenseCommand dispense(const std::string& order, int slot, const std::string& token,
                                  int64_t ttl_ms = 60000) {
    return proto::DispenseCommand{kDevice, order, slot, token, clock.wall_ms() + ttl_ms};
  }

  // Advances virtual time in 10 ms steps, calling `each` after every step.
  template <typename F>
  void run_for(int64_t ms, F&& each) {
    for (int64_t t = 0; t < ms; t += 10) {
      clock.advance(10);
      each();
    }
  }

  // The cloud acknowledges every event the ledger holds, as an agent that
  // processed them all (a fenced dispense's motor waits for that).
  void ack_all() {
    auto last = ledger.last_seq();
    REQUIRE(last.ok());
    if (*last > 0) (void)sender.on_ack(proto::Ack{kDevice, *last, ledger.identity().ledger_id});
  }

  std::vector<proto::DeviceEvent> published_events() {
    std::vector<proto::DeviceEvent> out;
    for (const auto& m : transport.published) {
      auto d = proto::decode_event(m.payload);
      REQUIRE(d.ok());
      out.push_back(d->message);
    }
    return out;
  }

  vend::test::TempDir dir;
  CoreOptions options;
  ManualClock clock;
  SeededRandom random{7};
  MemoryLogger log;
  crypto::Key key = crypto::Key::generate();
  std::string boot_id = "0123456789abcdef0123456789abcdef";
  Ledger ledger;
  SimulatedMachine machine;
  FakeTransport transport;
  CoreStats stats;
  Refusals refusals{ledger, clock, log, stats};
  StorageGuard storage{ledger, clock, log};
  EventSender sender{ledger, transport, clock, random, log, options, refusals, stats};
  int restocks = 0;
};

// Every event body of type T in the ledger's outbox.
template <typename T>
std::vector<T> outbox_bodies(Ledger& ledger) {
  std::vector<T> out;
  auto rows = ledger.outbox_after(0, 100000);
  REQUIRE(rows.ok());
  for (const auto& row : *rows) {
    auto d = proto::decode_event(row.payload);
    REQUIRE(d.ok());
    if (auto* b = std::get_if<T>(&d->message.body)) out.push_back(*b);
  }
  return out;
}

}  // namespace vend::fw::test
