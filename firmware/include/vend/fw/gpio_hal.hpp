// GPIO hardware: slot motors and the drop sensor on Linux GPIO lines through
// libgpiod (v1.6 C API). Built only when libgpiod is found (the build then
// defines VEND_HAVE_GPIOD).
//
// The role classes (GpioMotor, GpioDropSensor) see abstract lines, never a
// chip or a line number (CONVENTIONS.md #3), so their timing is tested with
// fake lines; GpioMachine opens the real chip and wires them up.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vend/clock.hpp"
#include "vend/fw/config.hpp"
#include "vend/fw/hal.hpp"
#include "vend/log.hpp"
#include "vend/result.hpp"

namespace vend::fw {

// One digital output (a motor driver input). `active` true = motor on.
class DigitalOutput {
 public:
  virtual ~DigitalOutput() = default;
  virtual Status write(bool active) = 0;
};

// One digital input (the drop sensor's beam). Logical levels: polarity
// (active-low wiring) is already applied.
class DigitalInput {
 public:
  virtual ~DigitalInput() = default;
  // True while the beam is interrupted.
  virtual Result<bool> read() = 0;
  // Edges seen since the last call; always 0 for a line that cannot report
  // edges (then only read() sampling sees a drop).
  virtual Result<int> take_edges() = 0;
};

// Drives one slot's motor line high for `run_ms`, then waits `settle_ms` for
// the item to fall through the sensor before reporting kDone. Never sleeps:
// progress happens in poll() against the injected clock. It cannot sense a
// stall, so it never reports kJammed except when a line write fails (motor
// state unknown); the core's motor timeout covers stalls.
// Not thread-safe. Non-copyable. Lines are not owned and must outlive it.
class GpioMotor final : public SlotMotor {
 public:
  GpioMotor(const Clock& clock, Logger& log, std::map<int, DigitalOutput*> lines, int64_t run_ms,
            int64_t settle_ms);
  ~GpioMotor() override;  // switches a running motor off
  GpioMotor(const GpioMotor&) = delete;
  GpioMotor& operator=(const GpioMotor&) = delete;

  // Errors: "unknown_slot" (no line for it), "motor_busy", "gpio_error".
  Status start(int slot) override;
  MotorState poll() override;

 private:
  void switch_off();

  const Clock& clock_;
  Logger& log_;
  std::map<int, DigitalOutput*> lines_;
  int64_t run_ms_;
  int64_t settle_ms_;
  MotorState state_ = MotorState::kIdle;
  DigitalOutput* running_ = nullptr;  // line switched on, or null
  int running_slot_ = 0;
  int64_t started_ms_ = 0;
};

// The light curtain below the slots, as a latch: an edge or an active level
// since arm() means an item fell. A beam already interrupted at arm() (a stuck
// item, a dirty sensor) counts only through new edges, and is logged.
// Not thread-safe. Non-copyable. The input is not owned.
class GpioDropSensor final : public DropSensor {
 public:
  GpioDropSensor(DigitalInput& input, Logger& log) : input_(input), log_(log) {}
  GpioDropSensor(const GpioDropSensor&) = delete;
  GpioDropSensor& operator=(const GpioDropSensor&) = delete;

  void arm() override;
  bool dropped() override;
  // Reads the line into the latch. dropped() calls it; the daemon also calls
  // it every tick so that a short pulse on a line without edge events is seen.
  void sample();

 private:
  DigitalInput& input_;
  Logger& log_;
  bool latched_ = false;
  bool blocked_at_arm_ = false;
  bool error_logged_ = false;
};

// The machine on a real GPIO chip: one output line per slot (slots[i].
// motor_line), one input line for the drop sensor. Lines are released and
// motors switched off on destruction. Not thread-safe. Non-copyable.
class GpioMachine {
 public:
  // Opens gpio.chip (a name like "gpiochip0", a path, a label or a number)
  // and requests every line for `consumer`. Errors: "gpio_error", naming the
  // chip, the line and what it was for.
  static Result<std::unique_ptr<GpioMachine>> open(const GpioConfig& gpio,
                                                   const std::vector<SlotConfig>& slots,
                                                   const Clock& clock, Logger& log,
                                                   const std::string& consumer = "vend-firmware");
  ~GpioMachine();
  GpioMachine(const GpioMachine&) = delete;
  GpioMachine& operator=(const GpioMachine&) = delete;

  // Motor and drop sensor; no inventory sensor (the ledger's count is used).
  Hal hal();
  // Samples the inputs; call every tick.
  void sample_inputs();

 private:
  struct Lines;
  explicit GpioMachine(std::unique_ptr<Lines> lines);
  std::unique_ptr<Lines> lines_;
};

}  // namespace vend::fw
