// One vending machine of the deterministic world. The physical machine (what
// the slots really hold) and the ledger file survive a crash; the firmware
// core, the ledger connection and the bus client are rebuilt at every boot,
// with a new boot id, exactly as after a power cycle.
// Not thread-safe. Non-copyable.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim_hal/sim_hal.hpp"
#include "vend/crypto.hpp"
#include "vend/fw/device_core.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/in_memory_bus.hpp"
#include "vend/log.hpp"
#include "world/skewed_clock.hpp"
#include "world/trace.hpp"

namespace vend::sim {

struct MachineSetup {
  std::string id;
  crypto::Key key;
  std::string ledger_path;
  std::vector<fw::SlotConfig> slots;
  fw::CoreOptions core;
  fw::SimulatedMachineOptions mechanics;
};

class WorldMachine {
 public:
  // References must outlive the machine.
  WorldMachine(MachineSetup setup, InMemoryBus& bus, const Clock& clock, Random& random,
               Logger& log, Trace& trace);
  ~WorldMachine();
  WorldMachine(const WorldMachine&) = delete;
  WorldMachine& operator=(const WorldMachine&) = delete;

  // Power on: open the ledger, recover, connect. REQUIRES: !up().
  Status boot();
  // Power loss: the process dies (will published), a rotation under way stops
  // (its item dropped or not, as `item_dropped` says). REQUIRES: up().
  void crash(bool item_dropped);
  bool up() const { return core_ != nullptr; }
  // Advances the core. No-op while down.
  void tick();
  // True when no dispense is queued or running (or the machine is down).
  bool idle() const { return !core_ || core_->idle(); }
  // Events not yet acknowledged by the agent (0 while down).
  int64_t outbox_depth();
  // Copies what the ledger file holds, committed, to `path` (created or
  // replaced), on a connection of its own: a backup of the SD card.
  Status copy_ledger_to(const std::string& path) const;
  // The ledger file's content becomes that of the copy at `path`: a card
  // restored from a backup. REQUIRES: !up().
  Status restore_ledger_from(const std::string& path);

  const std::string& id() const { return setup_.id; }
  const std::string& ledger_path() const { return setup_.ledger_path; }
  // The last will of the current (or last) session.
  const Message& will() const { return will_; }
  SkewedClock& clock() { return clock_; }
  fw::SimulatedMachine& mechanics() { return mechanics_; }

 private:
  void on_command(const Message& message);

  MachineSetup setup_;
  InMemoryBus& bus_;
  Random& random_;
  Logger& log_;
  Trace& trace_;
  SkewedClock clock_;
  fw::SimulatedMachine mechanics_;
  Message will_;
  std::unique_ptr<InMemoryClient> client_;
  std::optional<fw::Ledger> ledger_;
  std::unique_ptr<fw::DeviceCore> core_;
};

}  // namespace vend::sim
