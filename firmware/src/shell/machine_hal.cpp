#include "shell/machine_hal.hpp"

#include <sstream>

namespace vend::fw {

namespace {
constexpr const char* kLog = "hal";
constexpr int64_t kFollowEveryMs = 250;
}  // namespace

MachineHal::~MachineHal() = default;

Result<std::unique_ptr<MachineHal>> MachineHal::create(const DeviceConfig& config, Ledger& ledger,
                                                       const Clock& clock, uint64_t seed,
                                                       Logger& log) {
  std::unique_ptr<MachineHal> m(new MachineHal(clock, log));
  if (config.hal == "gpio") {
#ifdef VEND_HAVE_GPIOD
    auto gpio = GpioMachine::open(config.gpio, config.slots, log);
    if (!gpio.ok()) return gpio.error();
    m->gpio_ = std::move(gpio).value();
    return m;
#else
    return make_error("no_gpio",
                      "hal \"gpio\": this build has no GPIO support "
                      "(libgpiod was not found when it was built)");
#endif
  }
  m->sim_random_ = std::make_unique<SeededRandom>(seed);
  m->sim_ = std::make_unique<SimulatedMachine>(clock, *m->sim_random_, config.sim);
  if (auto s = m->load_from_ledger(ledger); !s.ok()) return s.error();
  std::ostringstream what;
  what << "simulated machine (seed " << seed << ", rotation " << config.sim.motor_run_ms
       << " ms, jam probability " << config.sim.jam_probability << ")";
  log.info(kLog, what.str());
  return m;
}

Hal MachineHal::hal() {
#ifdef VEND_HAVE_GPIOD
  if (gpio_) return gpio_->hal();
#endif
  return sim_->hal();
}

Status MachineHal::check() {
#ifdef VEND_HAVE_GPIOD
  if (gpio_) return gpio_->check();
#endif
  return {};
}

Status MachineHal::load_from_ledger(Ledger& ledger) {
  auto slots = ledger.slots();
  if (!slots.ok()) return slots.error();
  for (const auto& s : *slots) {
    if (sim_->items(s.slot) == s.physical_count) continue;
    log_.info(kLog, "simulated slot " + std::to_string(s.slot) + " now holds " +
                        std::to_string(s.physical_count) + " items");
    sim_->set_items(s.slot, s.physical_count);
  }
  return {};
}

void MachineHal::between_ticks(Ledger& ledger, bool core_idle) {
#ifdef VEND_HAVE_GPIOD
  if (gpio_) return;  // the motor controller watches the sensor on its own thread
#endif
  int64_t now = clock_.monotonic_ms();
  if (!core_idle || now < next_follow_ms_) return;
  next_follow_ms_ = now + kFollowEveryMs;
  if (auto s = load_from_ledger(ledger); !s.ok()) {
    log_.warn(kLog, "cannot read slot counts: " + s.error().to_string());
  }
}

}  // namespace vend::fw
