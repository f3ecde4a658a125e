// The guard process's loop (motor_guard.hpp): what runs in the forked child.
// Internal to MotorGuard; its requests and replies are fixed-size records on
// a SOCK_SEQPACKET socket: one reply when the guard starts, then one per
// request.
#pragma once

#include <cstddef>
#include <cstdint>

#include "motor_guard/motor_guard.hpp"

namespace vend::fw::guard {

struct Request {
  uint32_t line;    // index into the guard's lines
  uint32_t active;  // 1: on, 0: off
};

struct Reply {
  int32_t error;  // 0, or the errno of the failed write (EINVAL: no such line)
};

// What the guard knows of one line.
struct LineState {
  bool on = false;        // told on, written, not yet stopped
  int64_t off_at_ns = 0;  // CLOCK_MONOTONIC time of the next off-write; 0: none due
};

struct Setup {
  int channel;  // the guard's end of the socket
  GuardLine* const* lines;
  LineState* states;  // one per line, default-constructed
  size_t count;
  int64_t max_on_ns;
  int rt_priority;  // SCHED_FIFO priority, 0: leave the policy as it is
};

// Sends one Reply first (the errno of its SCHED_FIFO request, 0: none or
// granted), then serves requests until the socket reaches end-of-file (or
// fails), drives every line inactive and exits the process.
// Async-signal-safe throughout: it runs in a child forked from a process
// that may have other threads.
[[noreturn]] void run(const Setup& setup) noexcept;

}  // namespace vend::fw::guard
