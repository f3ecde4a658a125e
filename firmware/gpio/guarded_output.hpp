// GuardedOutput: a motor line as TimedMotor sees it (DigitalOutput), written
// by the MotorGuard process that owns the line (motor_guard/motor_guard.hpp).
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "gpio/timed_motor.hpp"
#include "motor_guard/motor_guard.hpp"

namespace vend::fw {

// Line `index` of `guard`, named for errors ("slot 3 motor (line 10 of
// 'gpiochip0')"). Not owned: the guard must outlive it. Non-copyable.
class GuardedOutput final : public DigitalOutput {
 public:
  GuardedOutput(MotorGuard& guard, size_t index, std::string name)
      : guard_(guard), index_(index), name_(std::move(name)) {}
  GuardedOutput(const GuardedOutput&) = delete;
  GuardedOutput& operator=(const GuardedOutput&) = delete;

  // Returns once the guard has written the line. Errors: those of
  // MotorGuard::set, naming the line.
  Status write(bool active) override {
    Status s = guard_.set(index_, active);
    if (s.ok()) return s;
    return make_error(s.error().code,
                      "cannot set " + name_ + (active ? " on: " : " off: ") + s.error().message);
  }

 private:
  MotorGuard& guard_;
  size_t index_;
  std::string name_;
};

}  // namespace vend::fw
