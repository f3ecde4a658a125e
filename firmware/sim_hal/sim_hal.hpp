// SimulatedMachine: a vending machine's mechanics on an injected clock with
// seeded randomness. It is the physical truth of the simulation: how many
// items each slot really holds, whatever the ledger believes.
#pragma once

#include <cstdint>
#include <map>

#include "vend/clock.hpp"
#include "vend/fw/hal.hpp"
#include "vend/random.hpp"

namespace vend::fw {

struct SimulatedMachineOptions {
  int64_t motor_run_ms = 1200;   // one rotation
  double jam_probability = 0.0;  // per rotation
};

// Implements all three roles. Not thread-safe; non-copyable (the Hal points
// into it).
class SimulatedMachine final : public SlotMotor,
                               public DropSensor,
                               public InventorySensor,
                               public RestockLoader {
 public:
  SimulatedMachine(const Clock& clock, Random& random, SimulatedMachineOptions options = {});
  SimulatedMachine(const SimulatedMachine&) = delete;
  SimulatedMachine& operator=(const SimulatedMachine&) = delete;

  Hal hal() { return Hal{this, this, this, this}; }

  // Physical state, for restockers, faults and checkers.
  int items(int slot) const;
  void set_items(int slot, int count);
  void load(int slot, int count) { set_items(slot, items(slot) + count); }
  int64_t rotations() const { return rotations_; }
  void set_jam_probability(double p) { options_.jam_probability = p; }
  // Power is cut: a rotation under way stops where it is. `item_dropped`
  // says whether its item had already fallen (the simulator decides).
  void power_cut(bool item_dropped);

  // SlotMotor
  Status start(int slot) override;
  MotorState poll() override;
  // DropSensor
  void arm() override { dropped_ = false; }
  bool dropped() override;
  // InventorySensor
  std::optional<int> count(int slot) override { return items(slot); }
  // RestockLoader: the simulated operator loads everything asked.
  int load_items(int slot, int count) override {
    load(slot, count);
    return count;
  }

 private:
  const Clock& clock_;
  Random& random_;
  SimulatedMachineOptions options_;
  std::map<int, int> items_;
  MotorState state_ = MotorState::kIdle;
  int running_slot_ = 0;
  int64_t done_at_ms_ = 0;
  bool will_jam_ = false;
  bool dropped_ = false;
  int64_t rotations_ = 0;
};

}  // namespace vend::fw
