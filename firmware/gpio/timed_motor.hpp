// TimedMotor: the motor controller of real hardware. A rotation is timed by a
// thread of its own, so the motor stops on time whatever the core's thread is
// doing (an fsync'd SQLite write on a slow SD card, a held write lock, a burst
// of commands); the drop sensor's edges are read on that thread too, with the
// timestamps the kernel gave them. The core only polls the outcome.
//
// The role classes see abstract lines (DigitalOutput, DigitalInput), never a
// chip or a line number (CONVENTIONS.md #3): GpioMachine (gpio_hal.hpp) wires
// libgpiod lines in; tests use fakes. Not for the simulator: it has real
// threads and real time (the simulator uses SimulatedMachine).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "vend/fw/hal.hpp"
#include "vend/log.hpp"
#include "vend/result.hpp"

namespace vend::fw {

// The SCHED_FIFO priority of the motor's timing (TimedMotor's thread and the
// motor guard process): above ordinary work, below kernel IRQ threads (50).
inline constexpr int kMotorRealtimePriority = 20;

// CLOCK_MONOTONIC in nanoseconds: the clock of the kernel's GPIO edge
// timestamps (Linux >= 5.7) and of TimedMotor's deadlines.
int64_t monotonic_ns();

// One digital output (a motor driver input). `active` true = motor on.
// Called from TimedMotor's thread only.
class DigitalOutput {
 public:
  virtual ~DigitalOutput() = default;
  virtual Status write(bool active) = 0;
};

// An edge of the drop sensor's line, stamped when it happened (monotonic_ns
// time base), not when it was read.
struct Edge {
  int64_t at_ns = 0;
};

// One digital input (the drop sensor's beam). Logical levels: polarity
// (active-low wiring) is already applied. Called from TimedMotor's thread only.
class DigitalInput {
 public:
  virtual ~DigitalInput() = default;
  // True while the beam is interrupted.
  virtual Result<bool> read() = 0;
  // Waits at most `timeout_ns` (0: does not wait) for the next edge; nullopt
  // when none came. Edges queue while nobody waits (the kernel's event FIFO),
  // so one that happened earlier is returned at once with its own time.
  virtual Result<std::optional<Edge>> wait_edge(int64_t timeout_ns) = 0;
};

// What a rotation did, as the controller saw it. Times are monotonic_ns.
struct Rotation {
  int slot = 0;
  int64_t on_ns = 0;               // motor line set active (its write returned)
  int64_t off_ns = 0;              // motor line set inactive (0: never)
  std::optional<int64_t> drop_ns;  // first edge in [on, off + window], or level at the end
  bool blocked_at_start = false;   // the beam was already interrupted: only edges count
  std::string error;               // a line error ("" when none)
};

// Drives one slot's motor line active for `run_ms`, then watches the drop
// sensor `window_ms` more before reporting kDone; a drop is an edge stamped
// in [on, off + window], or (for a line without edges) the beam interrupted at
// the end when it was clear at the start. It cannot sense a stall: kJammed
// only when a line write fails (the motor state is then unknown); the core's
// motor timeout covers stalls.
//
// Implements SlotMotor and DropSensor for one core thread (start, poll, arm,
// dropped are not to be called concurrently); the timing thread is internal.
// Non-copyable. Lines are not owned and must outlive it.
class TimedMotor final : public SlotMotor, public DropSensor {
 public:
  TimedMotor(Logger& log, std::map<int, DigitalOutput*> lines, DigitalInput& sensor, int64_t run_ms,
             int64_t window_ms);
  // Switches a running motor off and joins the thread.
  ~TimedMotor() override;
  TimedMotor(const TimedMotor&) = delete;
  TimedMotor& operator=(const TimedMotor&) = delete;

  // Returns once the line is active (or the attempt failed). Errors:
  // "unknown_slot", "motor_busy", "gpio_error".
  Status start(int slot) override;
  MotorState poll() override;
  // The controller clears its latch itself at start(); nothing to do.
  void arm() override {}
  // Whether the last finished rotation saw its item fall.
  bool dropped() override;

  // The last rotation (finished or not), for logs and tests.
  Rotation last_rotation();

 private:
  void run();
  void rotate(int slot);
  // Waits for edges until `deadline_ns` (or a stop), latching a drop; a
  // failing sensor is noted in r.error and the time kept by sleeping.
  void watch_until(int64_t deadline_ns, Rotation& r);
  void report(const Rotation& r);

  Logger& log_;
  std::map<int, DigitalOutput*> lines_;
  DigitalInput& sensor_;
  const int64_t run_ns_;
  const int64_t window_ns_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<int> request_;     // slot to rotate, taken by the thread
  std::optional<Status> started_;  // the thread's answer to a start
  MotorState state_ = MotorState::kIdle;
  Rotation rotation_;
  bool stop_ = false;
  bool reported_ = true;  // rotation_ logged on the core thread
  std::thread thread_;    // last: starts after the members it uses
};

}  // namespace vend::fw
