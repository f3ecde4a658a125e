// Hardware role interfaces (CONVENTIONS.md #3). The core never touches a pin:
// it sees a motor per slot, a drop sensor, and optionally an inventory sensor.
// Implementations: SimulatedMachine (sim_hal.hpp), GPIO via libgpiod
// (gpio_hal.hpp, built when libgpiod is found), and test fakes.
#pragma once

#include <optional>

#include "vend/result.hpp"

namespace vend::fw {

enum class MotorState {
  kIdle,     // nothing started
  kRunning,  // a vend rotation is under way
  kDone,     // the rotation completed
  kJammed,   // the motor stalled or timed out
};

// One vend rotation at a time, for any slot. Not thread-safe: owned by the
// core's thread.
class SlotMotor {
 public:
  virtual ~SlotMotor() = default;
  // Starts one rotation of `slot`. REQUIRES: poll() != kRunning.
  virtual Status start(int slot) = 0;
  // Progress of the rotation last started; kDone/kJammed stay until the
  // next start().
  virtual MotorState poll() = 0;
};

// The drop sensor (light curtain) below the slots.
class DropSensor {
 public:
  virtual ~DropSensor() = default;
  // Clears the latch; call just before starting the motor.
  virtual void arm() = 0;
  // True if an item fell since arm().
  virtual bool dropped() = 0;
};

// Optional: a machine that can count items (weight cells, the simulator's
// truth). Without one, the ledger's own count is reported.
class InventorySensor {
 public:
  virtual ~InventorySensor() = default;
  virtual std::optional<int> count(int slot) = 0;
};

// Optional: someone at the machine who loads a restock the cloud ordered as
// soon as it arrives (the simulator's operator). Real machines have none: a
// person confirms with `vend-firmware restock`.
class RestockLoader {
 public:
  virtual ~RestockLoader() = default;
  // Puts `count` items into `slot`; returns how many were loaded.
  virtual int load_items(int slot, int count) = 0;
};

// The parts a device core needs. Pointers are not owned; only motor and
// drop_sensor are required.
struct Hal {
  SlotMotor* motor = nullptr;
  DropSensor* drop_sensor = nullptr;
  InventorySensor* inventory = nullptr;
  RestockLoader* loader = nullptr;
};

}  // namespace vend::fw
