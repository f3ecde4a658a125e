// MachineHal: the hardware the config names — the simulated machine or the
// GPIO one — owned for the daemon's lifetime.
#pragma once

#include <memory>

#include "sim_hal/sim_hal.hpp"
#include "vend/clock.hpp"
#include "vend/fw/config.hpp"
#include "vend/fw/hal.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/log.hpp"
#include "vend/random.hpp"
#include "vend/result.hpp"

#ifdef VEND_HAVE_GPIOD
#include "gpio/gpio_hal.hpp"
#endif

namespace vend::fw {

// Not thread-safe. Non-copyable.
class MachineHal {
 public:
  // hal "sim": a SimulatedMachine seeded from `seed`, loaded with the
  // ledger's physical counts. hal "gpio": the GPIO lines of the config
  // (error "no_gpio" in a build without libgpiod).
  static Result<std::unique_ptr<MachineHal>> create(const DeviceConfig& config, Ledger& ledger,
                                                    const Clock& clock, uint64_t seed, Logger& log);
  MachineHal(const MachineHal&) = delete;
  MachineHal& operator=(const MachineHal&) = delete;
  ~MachineHal();

  Hal hal();

  // Whether the hardware can still be driven. GPIO: the motor guard runs;
  // errors "motor_guard" (it is gone). Sim: always.
  Status check();

  // Between two core ticks. GPIO: nothing (TimedMotor times the motor and
  // watches the drop sensor on its own thread). Sim: while the
  // core is idle (no rotation under way, so the ledger and the machine
  // agree), the simulated slots take the ledger's physical counts — that is
  // how a restock confirmed with `vend-firmware restock` loads the machine.
  void between_ticks(Ledger& ledger, bool core_idle);

 private:
  MachineHal(const Clock& clock, Logger& log) : clock_(clock), log_(log) {}
  Status load_from_ledger(Ledger& ledger);

  const Clock& clock_;
  Logger& log_;
  std::unique_ptr<SeededRandom> sim_random_;
  std::unique_ptr<SimulatedMachine> sim_;
  int64_t next_follow_ms_ = 0;
#ifdef VEND_HAVE_GPIOD
  std::unique_ptr<GpioMachine> gpio_;
#endif
};

}  // namespace vend::fw
