// MotorGuard: the motor lines are owned by a small process of their own, so
// a motor stops whatever happens to the daemon (kill -9, OOM kill, a crash, a
// hang). Linux leaves a GPIO output line "uncontrolled" when the last file
// descriptor of its request is closed: most drivers keep driving the last
// value, so a daemon killed mid-rotation would leave the motor turning
// (docs/design-decisions.md, "The motor lines belong to a guard process").
//
// The guard is forked with the lines already requested, and from then on is
// the only process that holds them. It sets a line only when told, over a
// socket, and drives it inactive
//   - when told (the normal stop),
//   - at the rotation's deadline (max_on_ms after it went active), even if
//     never told to stop: a hung daemon cannot extend a rotation,
//   - the moment its socket reaches end-of-file, which the kernel causes
//     when the daemon dies, however it dies; it then exits.
// It ignores SIGINT, SIGTERM and SIGHUP (a stop signal to the service's
// whole control group must not cut a rotation the daemon is finishing);
// only a SIGKILL (or a crash of the guard itself) ends it without writing,
// which is what the board's pull-down on the motor driver's enable is for
// (docs/boards.md).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vend/log.hpp"
#include "vend/result.hpp"

namespace vend::fw {

// One output line as the guard process drives it. set() runs in a child
// forked from a process that may have other threads, so it must be
// async-signal-safe: no allocation, no locks, no exceptions (a libgpiod v1
// gpiod_line_set_value is one ioctl). Returns false when the write failed,
// with errno set.
class GuardLine {
 public:
  virtual ~GuardLine() = default;
  virtual bool set(bool active) noexcept = 0;
};

// The daemon's side of the guard: forks it, forwards line writes to it and
// stops it. Thread-safe (one mutex around each request). Non-copyable.
class MotorGuard {
 public:
  // Forks the guard process for `lines` (indexed as given). REQUIRES: the
  // lines are requested as outputs and inactive, and `lines` outlive this
  // call (the guard works on its copy of them), and the caller forks nothing
  // else without exec while the guard runs (that child would hold the
  // socket open, and the guard would miss the caller's death). After it
  // returns the caller releases its own handles of the lines, so that the
  // guard holds the only ones. max_on_ms > 0: the longest a line stays active. The guard asks for
  // SCHED_FIFO (priority `rt_priority`, 0: none) and an OOM score of -1000;
  // both are best effort and logged. Returns once the guard serves. Errors:
  // "motor_guard" (max_on_ms not positive, no socket, no fork, the guard did
  // not start).
  static Result<std::unique_ptr<MotorGuard>> spawn(const std::vector<GuardLine*>& lines,
                                                   int64_t max_on_ms, int rt_priority, Logger& log);
  // Closes the socket: the guard drives every line inactive and exits; it is
  // reaped here (killed if it has not exited within a second).
  ~MotorGuard();
  MotorGuard(const MotorGuard&) = delete;
  MotorGuard& operator=(const MotorGuard&) = delete;

  // Sets line `index` and returns once the guard has written it. A line
  // already active keeps its deadline (a rotation is never extended).
  // Errors: "gpio_error" (the write failed, with the guard's errno text),
  // "motor_guard" (no such line, the guard is gone or did not answer within
  // a second; then every later call fails too).
  Status set(size_t index, bool active);

  // Whether the guard is still running. Errors: "motor_guard", naming how
  // it ended.
  Status check();

  pid_t pid() const { return pid_; }

 private:
  MotorGuard(pid_t pid, int channel, size_t lines, Logger& log);
  // The guard's next record: its error field. REQUIRES: mu_ held, or no
  // other user yet.
  Result<int32_t> await_reply();
  Error broken(const std::string& why);

  std::mutex mu_;
  const pid_t pid_;
  int channel_;
  const size_t lines_;
  Logger& log_;
  bool reaped_ = false;
  std::string broken_;  // why requests fail ("" while the guard serves)
};

}  // namespace vend::fw
