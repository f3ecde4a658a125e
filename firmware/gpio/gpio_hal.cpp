#include "gpio/gpio_hal.hpp"

#include <gpiod.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <optional>

#include "gpio/guarded_output.hpp"

namespace vend::fw {

namespace {

constexpr const char* kLog = "gpio";

Error gpio_error(const std::string& what) {
  return make_error("gpio_error", what + ": " + std::strerror(errno));
}

// A motor line as the guard process writes it: one ioctl, no allocation
// (libgpiod v1's gpiod_line_set_value), as GuardLine requires.
class GpiodGuardLine final : public GuardLine {
 public:
  explicit GpiodGuardLine(gpiod_line* line) : line_(line) {}
  bool set(bool active) noexcept override {
    return gpiod_line_set_value(line_, active ? 1 : 0) == 0;
  }

 private:
  gpiod_line* line_;
};

constexpr int64_t kSampleEveryNs = 1'000'000;  // lines without edge events

int64_t to_ns(const timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

timespec to_timespec(int64_t ns) {
  return timespec{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

class GpiodInput final : public DigitalInput {
 public:
  GpiodInput(gpiod_line* line, std::string name, bool edges)
      : line_(line), name_(std::move(name)), edges_(edges) {}
  Result<bool> read() override {
    int v = gpiod_line_get_value(line_);
    if (v < 0) return gpio_error("cannot read " + name_);
    return v == 1;
  }
  Result<std::optional<Edge>> wait_edge(int64_t timeout_ns) override {
    if (!edges_) return sample_edge(timeout_ns);
    timespec wait = to_timespec(std::max<int64_t>(timeout_ns, 0));
    int ready = gpiod_line_event_wait(line_, &wait);
    if (ready < 0) return gpio_error("cannot wait for edges on " + name_);
    if (ready == 0) return std::optional<Edge>();
    gpiod_line_event event;
    if (gpiod_line_event_read(line_, &event) != 0) {
      return gpio_error("cannot read an edge of " + name_);
    }
    // The kernel's timestamp: CLOCK_MONOTONIC since Linux 5.7.
    return std::optional<Edge>(Edge{to_ns(event.ts)});
  }

 private:
  // No edge interrupts: sample the level every millisecond on the caller's
  // (the motor controller's) thread; a change is an edge.
  Result<std::optional<Edge>> sample_edge(int64_t timeout_ns) {
    int64_t until = monotonic_ns() + std::max<int64_t>(timeout_ns, 0);
    while (true) {
      auto level = read();
      if (!level.ok()) return level.error();
      if (last_level_ && *last_level_ != *level) {
        last_level_ = *level;
        return std::optional<Edge>(Edge{monotonic_ns()});
      }
      last_level_ = *level;
      int64_t now = monotonic_ns();
      if (now >= until) return std::optional<Edge>();
      timespec next = to_timespec(std::min(until, now + kSampleEveryNs));
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr);
    }
  }

  gpiod_line* line_;
  std::string name_;
  bool edges_;
  std::optional<bool> last_level_;
};

}  // namespace

// ---- GpioMachine --------------------------------------------------------

struct GpioMachine::Lines {
  gpiod_chip* chip = nullptr;
  std::unique_ptr<MotorGuard> guard;
  std::vector<std::unique_ptr<DigitalOutput>> outputs;
  std::unique_ptr<DigitalInput> input;
  std::unique_ptr<TimedMotor> motor;

  ~Lines() {
    motor.reset();  // switches a running motor off through the guard
    guard.reset();  // the guard switches every line off, exits and is reaped
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

// The motor lines of `slots`, requested as outputs, inactive.
struct MotorLines {
  std::vector<gpiod_line*> lines;
  std::vector<std::string> names;
};

Result<MotorLines> request_motors(gpiod_chip* chip, const GpioConfig& gpio,
                                  const std::vector<SlotConfig>& slots,
                                  const std::string& consumer) {
  MotorLines m;
  for (const auto& s : slots) {
    std::string purpose = "slot " + std::to_string(s.slot) + " motor";
    auto line = get_line(chip, gpio.chip, s.motor_line, purpose);
    if (!line.ok()) return line.error();
    if (gpiod_line_request_output_flags(*line, consumer.c_str(), 0, 0) != 0) {
      return gpio_error("cannot request line " + std::to_string(s.motor_line) + " of GPIO chip '" +
                        gpio.chip + "' as output for " + purpose);
    }
    m.lines.push_back(*line);
    m.names.push_back(line_name(gpio.chip, s.motor_line, purpose));
  }
  return m;
}

// Hands the motor lines to a guard process (motor_guard.hpp) and releases
// this process's handles of them: from then on only the guard holds them, so
// the motor stops when this process dies, however it dies.
Status guard_motors(const MotorLines& motors, const GpioConfig& gpio,
                    const std::vector<SlotConfig>& slots, Logger& log,
                    std::unique_ptr<MotorGuard>& guard_out,
                    std::vector<std::unique_ptr<DigitalOutput>>& outputs,
                    std::map<int, DigitalOutput*>& by_slot) {
  std::vector<std::unique_ptr<GpiodGuardLine>> guarded;
  std::vector<GuardLine*> lines;
  for (gpiod_line* l : motors.lines) {
    guarded.push_back(std::make_unique<GpiodGuardLine>(l));
    lines.push_back(guarded.back().get());
  }
  auto guard = MotorGuard::spawn(lines, gpio.motor_run_ms, kMotorRealtimePriority, log);
  if (!guard.ok()) return guard.error();
  guard_out = std::move(guard).value();
  for (gpiod_line* l : motors.lines) gpiod_line_release(l);
  for (size_t i = 0; i < slots.size(); ++i) {
    outputs.push_back(std::make_unique<GuardedOutput>(*guard_out, i, motors.names[i]));
    by_slot[slots[i].slot] = outputs.back().get();
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
                                                       Logger& log, const std::string& consumer) {
  auto lines = std::make_unique<Lines>();
  lines->chip = gpiod_chip_open_lookup(gpio.chip.c_str());
  if (lines->chip == nullptr) return gpio_error("cannot open GPIO chip '" + gpio.chip + "'");
  auto motors = request_motors(lines->chip, gpio, slots, consumer);
  if (!motors.ok()) return motors.error();
  auto input = open_sensor(lines->chip, gpio, consumer, log);
  if (!input.ok()) return input.error();
  lines->input = std::move(*input);
  // Forked before TimedMotor starts its thread.
  std::map<int, DigitalOutput*> by_slot;
  Status guarded = guard_motors(*motors, gpio, slots, log, lines->guard, lines->outputs, by_slot);
  if (!guarded.ok()) return guarded.error();
  lines->motor = std::make_unique<TimedMotor>(log, std::move(by_slot), *lines->input,
                                              gpio.motor_run_ms, gpio.drop_window_ms);
  log.info(kLog, "opened GPIO chip '" + gpio.chip + "': " + std::to_string(slots.size()) +
                     " motor lines, drop sensor on line " + std::to_string(gpio.drop_sensor_line));
  return std::unique_ptr<GpioMachine>(new GpioMachine(std::move(lines)));
}

GpioMachine::GpioMachine(std::unique_ptr<Lines> lines) : lines_(std::move(lines)) {}
GpioMachine::~GpioMachine() = default;

Status GpioMachine::check() { return lines_->guard->check(); }

Hal GpioMachine::hal() { return Hal{lines_->motor.get(), lines_->motor.get(), nullptr}; }

}  // namespace vend::fw
