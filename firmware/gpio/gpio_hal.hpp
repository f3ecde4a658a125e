// GPIO hardware: slot motors and the drop sensor on Linux GPIO lines through
// libgpiod (v1.6 C API). Built only when libgpiod is found (the build then
// defines VEND_HAVE_GPIOD).
//
// The motor controller (TimedMotor, timed_motor.hpp) sees abstract lines, so
// its timing is tested with fake lines; GpioMachine opens the real chip and
// wires libgpiod lines into it: motor lines as outputs, handed to a motor
// guard process that alone holds them from then on (motor_guard.hpp: the
// motor stops when the daemon dies, however it dies), the drop sensor with
// both-edge events (kernel timestamps), or sampled every millisecond on the
// controller's thread when the chip has no edge interrupts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpio/timed_motor.hpp"
#include "vend/fw/config.hpp"
#include "vend/fw/hal.hpp"
#include "vend/log.hpp"
#include "vend/result.hpp"

namespace vend::fw {

// The machine on a real GPIO chip: one output line per slot (slots[i].
// motor_line) owned by a MotorGuard process, one input line for the drop
// sensor, and the TimedMotor that drives them. Motors are switched off, the
// guard stopped and lines released on destruction.
// Not thread-safe (its TimedMotor is for one core thread). Non-copyable.
class GpioMachine {
 public:
  // Opens gpio.chip (a name like "gpiochip0", a path, a label or a number),
  // requests every line for `consumer` and forks the motor guard (each
  // rotation at most gpio.motor_run_ms). REQUIRES: no later fork() without
  // exec while it lives (that child would hold the guard's socket open). Errors: "gpio_error",
  // naming the chip, the line and what it was for; "motor_guard".
  static Result<std::unique_ptr<GpioMachine>> open(const GpioConfig& gpio,
                                                   const std::vector<SlotConfig>& slots,
                                                   Logger& log,
                                                   const std::string& consumer = "vend-firmware");
  ~GpioMachine();
  GpioMachine(const GpioMachine&) = delete;
  GpioMachine& operator=(const GpioMachine&) = delete;

  // Whether the motor guard still runs. Errors: "motor_guard" (it is gone:
  // the motors cannot be driven; the daemon exits and is restarted).
  Status check();

  // Motor and drop sensor (both the TimedMotor); no inventory sensor (the
  // ledger's count is used).
  Hal hal();

 private:
  struct Lines;
  explicit GpioMachine(std::unique_ptr<Lines> lines);
  std::unique_ptr<Lines> lines_;
};

}  // namespace vend::fw
