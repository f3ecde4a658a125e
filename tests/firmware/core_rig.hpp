// A device core on a manual clock, a seeded random source, the simulated
// machine and a transport fake that records what is published.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "fresh_command.hpp"
#include "sim_hal/sim_hal.hpp"
#include "test_support.hpp"
#include "vend/clock.hpp"
#include "vend/crypto.hpp"
#include "vend/fw/device_core.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/log.hpp"
#include "vend/protocol.hpp"
#include "vend/random.hpp"
#include "vend/topics.hpp"
#include "vend/transport.hpp"

namespace vend::fw::test {

class FakeTransport final : public Transport {
 public:
  void on_message(MessageHandler) override {}
  void on_connection(ConnectionHandler) override {}
  Status connect() override {
    up = true;
    return {};
  }
  void disconnect() override { up = false; }
  bool connected() const override { return up; }
  Status publish(const Message& m) override {
    if (!up) return make_error("not_connected", "fake transport is down");
    published.push_back(m);
    return {};
  }
  Status subscribe(const std::string& filter, int) override {
    subscriptions.push_back(filter);
    return {};
  }

  bool up = false;
  std::vector<Message> published;
  std::vector<std::string> subscriptions;
};

inline const char* kDevice = "vm-1";

struct Rig {
  explicit Rig(CoreOptions options = default_options(), std::string ledger_path = "")
      : path(ledger_path.empty() ? dir.file("ledger.db") : ledger_path),
        ledger(open_ledger()),
        machine(clock, random, SimulatedMachineOptions{500, 0.0}),
        core(std::make_unique<DeviceCore>(ledger, machine.hal(), transport, clock, random, log,
                                          options)) {
    REQUIRE(ledger.sync_slots({{1, 10, "cola", -1}, {2, 5, "water", -1}}).ok());
    REQUIRE(core->boot().ok());
  }

  static CoreOptions default_options() {
    CoreOptions o;
    o.reconnect_jitter_max_ms = 0;
    o.snapshot_interval_ms = 0;
    return o;
  }

  Ledger open_ledger() {
    auto l = Ledger::open(path, Identity{kDevice, key, boot_id});
    REQUIRE(l.ok());
    return std::move(l).value();
  }

  // Loads items at the machine and confirms them (the operator's restock).
  std::vector<std::string> restock(int slot, int count, const std::string& id = "") {
    std::string restock_id = id.empty() ? "r" + std::to_string(++restocks) : id;
    auto minted = ledger.confirm_restock(restock_id, slot, count, clock.wall_ms(), random);
    REQUIRE(minted.ok());
    machine.load(slot, count);
    return minted->tokens;
  }

  // Signed as the agent signs (fresh_command: an expiry when it has none).
  std::string sign(const proto::Command& unstamped, const crypto::Key* with = nullptr) {
    const crypto::Key& k = with ? *with : key;
    proto::Command command = vend::test::fresh_command(unstamped, clock.wall_ms());
    return proto::encode(command, crypto::sign(k, proto::encode_canonical(command)));
  }

  proto::DispenseCommand dispense(const std::string& order, int slot, const std::string& token,
                                  int64_t ttl_ms = 60000) {
    return proto::DispenseCommand{kDevice, order, slot, token, clock.wall_ms() + ttl_ms};
  }

  CommandOutcome send(const proto::Command& command) { return core->on_command(sign(command)); }

  void connect() {
    transport.up = true;
    core->on_connection(true);
  }

  // Advances virtual time in 10 ms steps, ticking the core.
  void run_for(int64_t ms) {
    for (int64_t t = 0; t < ms; t += 10) {
      clock.advance(10);
      core->tick();
    }
  }

  // Device events published so far, decoded and signature-checked.
  std::vector<proto::DeviceEvent> events() {
    std::vector<proto::DeviceEvent> out;
    for (const auto& m : transport.published) {
      if (m.topic != topics::device_evt(kDevice)) continue;
      auto d = proto::decode_event(m.payload);
      REQUIRE(d.ok());
      CHECK(crypto::verify(key, d->canonical, d->mac));
      out.push_back(d->message);
    }
    return out;
  }

  template <typename T>
  std::vector<T> bodies() {
    std::vector<T> out;
    for (const auto& e : events()) {
      if (auto* b = std::get_if<T>(&e.body)) out.push_back(*b);
    }
    return out;
  }

  // Simulates a power cut: the core object is gone, the ledger file stays.
  void reboot(CoreOptions options = default_options(), bool item_dropped = false) {
    core.reset();
    machine.power_cut(item_dropped);
    transport.up = false;
    boot_id = random.id128();
    ledger = open_ledger();
    core =
        std::make_unique<DeviceCore>(ledger, machine.hal(), transport, clock, random, log, options);
    REQUIRE(core->boot().ok());
  }

  vend::test::TempDir dir;
  std::string path;
  ManualClock clock;
  SeededRandom random{7};
  MemoryLogger log;
  crypto::Key key = crypto::Key::generate();
  std::string boot_id = "0123456789abcdef0123456789abcdef";
  Ledger ledger;
  SimulatedMachine machine;
  FakeTransport transport;
  std::unique_ptr<DeviceCore> core;
  int restocks = 0;
};

}  // namespace vend::fw::test
