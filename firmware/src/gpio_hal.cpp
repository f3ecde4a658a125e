#include "vend/fw/gpio_hal.hpp"

#include <gpiod.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace vend::fw {

namespace {

constexpr const char* kLog = "gpio";
// Edges read per take_edges() call: bounded, and more than any item makes.
constexpr int kMaxEdgesPerCall = 64;

Error gpio_error(const std::string& what) {
  return make_error("gpio_error", what + ": " + std::strerror(errno));
}

// A line requested from libgpiod; released by closing its chip.
class GpiodOutput final : public DigitalOutput {
 public:
  GpiodOutput(gpiod_line* line, std::string name) : line_(line), name_(std::move(name)) {}
  Status write(bool active) override {
    if (gpiod_line_set_value(line_, active ? 1 : 0) != 0) {
      return gpio_error("cannot set " + name_ + (active ? " on" : " off"));
    }
    return {};
  }

 private:
  gpiod_line* line_;
  std::string name_;
};

class GpiodInput final : public DigitalInput {
 public:
  GpiodInput(gpiod_line* line, std::string name, bool edges)
      : line_(line), name_(std::move(name)), edges_(edges) {}
  Result<bool> read() override {
    int v = gpiod_line_get_value(line_);
    if (v < 0) return gpio_error("cannot read " + name_);
    return v == 1;
  }
  Result<int> take_edges() override {
    if (!edges_) return 0;
    int count = 0;
    timespec no_wait{0, 0};
    while (count < kMaxEdgesPerCall) {
      int ready = gpiod_line_event_wait(line_, &no_wait);
      if (ready < 0) return gpio_error("cannot wait for edges on " + name_);
      if (ready == 0) break;
      gpiod_line_event event;
      if (gpiod_line_event_read(line_, &event) != 0) {
        return gpio_error("cannot read an edge of " + name_);
      }
      ++count;
    }
    return count;
  }

 private:
  gpiod_line* line_;
  std::string name_;
  bool edges_;
};

}  // namespace

// ---- GpioMotor ----------------------------------------------------------

GpioMotor::GpioMotor(const Clock& clock, Logger& log, std::map<int, DigitalOutput*> lines,
                     int64_t run_ms, int64_t settle_ms)
    : clock_(clock), log_(log), lines_(std::move(lines)), run_ms_(run_ms), settle_ms_(settle_ms) {}

GpioMotor::~GpioMotor() { switch_off(); }

Status GpioMotor::start(int slot) {
  if (poll() == MotorState::kRunning) {
    return make_error("motor_busy", "slot " + std::to_string(running_slot_) + " is still rotating");
  }
  auto it = lines_.find(slot);
  if (it == lines_.end()) {
    return make_error("unknown_slot", "no motor line for slot " + std::to_string(slot));
  }
  running_slot_ = slot;
  started_ms_ = clock_.monotonic_ms();
  running_ = it->second;
  if (auto s = running_->write(true); !s.ok()) {
    switch_off();  // the line may be half-set; make sure it is off
    state_ = MotorState::kIdle;
    return s;
  }
  state_ = MotorState::kRunning;
  return {};
}

MotorState GpioMotor::poll() {
  if (state_ != MotorState::kRunning) return state_;
  int64_t elapsed = clock_.monotonic_ms() - started_ms_;
  if (running_ != nullptr && elapsed >= run_ms_) {
    if (auto s = running_->write(false); !s.ok()) {
      // The motor may still be turning: say so rather than report a clean stop.
      log_.error(kLog, "slot " + std::to_string(running_slot_) + ": " + s.error().to_string());
      state_ = MotorState::kJammed;
      return state_;
    }
    running_ = nullptr;
  }
  if (elapsed >= run_ms_ + settle_ms_) state_ = MotorState::kDone;
  return state_;
}

void GpioMotor::switch_off() {
  if (running_ == nullptr) return;
  if (auto s = running_->write(false); !s.ok()) {
    log_.error(kLog, "cannot switch off slot " + std::to_string(running_slot_) + ": " +
                         s.error().to_string());
  }
  running_ = nullptr;
}

// ---- GpioDropSensor -----------------------------------------------------

void GpioDropSensor::arm() {
  latched_ = false;
  (void)input_.take_edges();  // forget what happened before this rotation
  auto level = input_.read();
  blocked_at_arm_ = level.ok() && *level;
  if (blocked_at_arm_) log_.warn(kLog, "drop sensor beam already interrupted when armed");
}

bool GpioDropSensor::dropped() {
  sample();
  return latched_;
}

void GpioDropSensor::sample() {
  auto edges = input_.take_edges();
  auto level = input_.read();
  if (!edges.ok() || !level.ok()) {
    if (!error_logged_) {
      log_.error(kLog, (edges.ok() ? level.error() : edges.error()).to_string());
      error_logged_ = true;
    }
    return;
  }
  if (*edges > 0 || (*level && !blocked_at_arm_)) latched_ = true;
}

// ---- GpioMachine --------------------------------------------------------

struct GpioMachine::Lines {
  gpiod_chip* chip = nullptr;
  std::vector<std::unique_ptr<DigitalOutput>> outputs;
  std::unique_ptr<DigitalInput> input;
  std::unique_ptr<GpioMotor> motor;
  std::unique_ptr<GpioDropSensor> sensor;

  ~Lines() {
    motor.reset();  // switches a running motor off while the lines are still held
    if (chip != nullptr) gpiod_chip_close(chip);
  }
};

namespace {

Result<gpiod_line*> get_line(gpiod_chip* chip, const std::string& chip_name, int offset,
                             const std::string& purpose) {
  gpiod_line* line = gpiod_chip_get_line(chip, static_cast<unsigned>(offset));
  if (line == nullptr) {
    return gpio_error("cannot get line " + std::to_string(offset) + " of GPIO chip '" + chip_name +
                      "' (" + purpose + ")");
  }
  return line;
}

std::string line_name(const std::string& chip, int offset, const std::string& purpose) {
  return purpose + " (line " + std::to_string(offset) + " of '" + chip + "')";
}

Status open_motors(gpiod_chip* chip, const GpioConfig& gpio, const std::vector<SlotConfig>& slots,
                   const std::string& consumer,
                   std::vector<std::unique_ptr<DigitalOutput>>& outputs,
                   std::map<int, DigitalOutput*>& by_slot) {
  for (const auto& s : slots) {
    std::string purpose = "slot " + std::to_string(s.slot) + " motor";
    auto line = get_line(chip, gpio.chip, s.motor_line, purpose);
    if (!line.ok()) return line.error();
    if (gpiod_line_request_output_flags(*line, consumer.c_str(), 0, 0) != 0) {
      return gpio_error("cannot request line " + std::to_string(s.motor_line) + " of GPIO chip '" +
                        gpio.chip + "' as output for " + purpose);
    }
    outputs.push_back(
        std::make_unique<GpiodOutput>(*line, line_name(gpio.chip, s.motor_line, purpose)));
    by_slot[s.slot] = outputs.back().get();
  }
  return {};
}

Result<std::unique_ptr<DigitalInput>> open_sensor(gpiod_chip* chip, const GpioConfig& gpio,
                                                  const std::string& consumer, Logger& log) {
  const std::string purpose = "drop sensor";
  auto line = get_line(chip, gpio.chip, gpio.drop_sensor_line, purpose);
  if (!line.ok()) return line.error();
  int flags = gpio.drop_sensor_active_low ? GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW : 0;
  std::string name = line_name(gpio.chip, gpio.drop_sensor_line, purpose);
  // Edge events catch a pulse shorter than a tick; a chip without interrupt
  // support still works by sampling the level.
  bool edges = gpiod_line_request_both_edges_events_flags(*line, consumer.c_str(), flags) == 0;
  if (!edges) {
    log.warn(kLog, name + ": no edge events (" + std::strerror(errno) + "); sampling the level");
    if (gpiod_line_request_input_flags(*line, consumer.c_str(), flags) != 0) {
      return gpio_error("cannot request line " + std::to_string(gpio.drop_sensor_line) +
                        " of GPIO chip '" + gpio.chip + "' as input for the " + purpose);
    }
  }
  return std::unique_ptr<DigitalInput>(std::make_unique<GpiodInput>(*line, name, edges));
}

}  // namespace

Result<std::unique_ptr<GpioMachine>> GpioMachine::open(const GpioConfig& gpio,
                                                       const std::vector<SlotConfig>& slots,
                                                       const Clock& clock, Logger& log,
                                                       const std::string& consumer) {
  auto lines = std::make_unique<Lines>();
  lines->chip = gpiod_chip_open_lookup(gpio.chip.c_str());
  if (lines->chip == nullptr) return gpio_error("cannot open GPIO chip '" + gpio.chip + "'");
  std::map<int, DigitalOutput*> by_slot;
  auto motors = open_motors(lines->chip, gpio, slots, consumer, lines->outputs, by_slot);
  if (!motors.ok()) return motors.error();
  auto input = open_sensor(lines->chip, gpio, consumer, log);
  if (!input.ok()) return input.error();
  lines->input = std::move(*input);
  lines->motor = std::make_unique<GpioMotor>(clock, log, std::move(by_slot), gpio.motor_run_ms,
                                             gpio.drop_window_ms);
  lines->sensor = std::make_unique<GpioDropSensor>(*lines->input, log);
  log.info(kLog, "opened GPIO chip '" + gpio.chip + "': " + std::to_string(slots.size()) +
                     " motor lines, drop sensor on line " + std::to_string(gpio.drop_sensor_line));
  return std::unique_ptr<GpioMachine>(new GpioMachine(std::move(lines)));
}

GpioMachine::GpioMachine(std::unique_ptr<Lines> lines) : lines_(std::move(lines)) {}
GpioMachine::~GpioMachine() = default;

Hal GpioMachine::hal() { return Hal{lines_->motor.get(), lines_->sensor.get(), nullptr}; }

void GpioMachine::sample_inputs() { lines_->sensor->sample(); }

}  // namespace vend::fw
