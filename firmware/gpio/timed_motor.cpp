#include "gpio/timed_motor.hpp"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "vend/thread_name.hpp"

namespace vend::fw {

namespace {

constexpr const char* kLog = "motor";
// Waits are cut into slices this long so a stop request (the destructor) is
// seen promptly; the off deadline itself is met to the wait's precision.
constexpr int64_t kSliceNs = 20'000'000;
constexpr int64_t kNsPerMs = 1'000'000;

}  // namespace

int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

TimedMotor::TimedMotor(Logger& log, std::map<int, DigitalOutput*> lines, DigitalInput& sensor,
                       int64_t run_ms, int64_t window_ms)
    : log_(log),
      lines_(std::move(lines)),
      sensor_(sensor),
      run_ns_(run_ms * kNsPerMs),
      window_ns_(window_ms * kNsPerMs),
      thread_([this] { run(); }) {
  // Real-time priority where allowed (the daemon runs as root on a board):
  // the stop then waits for no ordinary process. Elsewhere the deadline
  // waits still hold, to the scheduler's latency.
  sched_param param{};
  param.sched_priority = kMotorRealtimePriority;
  int rc = pthread_setschedparam(thread_.native_handle(), SCHED_FIFO, &param);
  log_.info(kLog, rc == 0 ? "motor controller thread at SCHED_FIFO priority " +
                                std::to_string(kMotorRealtimePriority)
                          : "motor controller thread at normal priority (no SCHED_FIFO: " +
                                std::string(std::strerror(rc)) + ")");
}

TimedMotor::~TimedMotor() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Status TimedMotor::start(int slot) {
  std::unique_lock lock(mu_);
  if (state_ == MotorState::kRunning) {
    return make_error("motor_busy",
                      "slot " + std::to_string(rotation_.slot) + " is still rotating");
  }
  if (lines_.count(slot) == 0) {
    return make_error("unknown_slot", "no motor line for slot " + std::to_string(slot));
  }
  request_ = slot;
  started_.reset();
  state_ = MotorState::kRunning;
  cv_.notify_all();
  cv_.wait(lock, [&] { return started_.has_value(); });
  Status s = *started_;
  if (!s.ok()) state_ = MotorState::kIdle;
  return s;
}

MotorState TimedMotor::poll() {
  std::optional<Rotation> finished;
  MotorState state;
  {
    std::lock_guard lock(mu_);
    state = state_;
    if (state != MotorState::kRunning && !reported_) {
      reported_ = true;
      finished = rotation_;
    }
  }
  if (finished) report(*finished);  // logged on the caller's (core) thread
  return state;
}

bool TimedMotor::dropped() {
  std::lock_guard lock(mu_);
  return state_ == MotorState::kDone && rotation_.drop_ns.has_value();
}

Rotation TimedMotor::last_rotation() {
  std::lock_guard lock(mu_);
  return rotation_;
}

void TimedMotor::report(const Rotation& r) {
  std::string slot = "slot " + std::to_string(r.slot);
  if (r.blocked_at_start) log_.warn(kLog, slot + ": drop sensor beam already interrupted at start");
  if (!r.error.empty()) log_.error(kLog, slot + ": " + r.error);
  if (r.off_ns != 0) {
    log_.debug(
        kLog,
        slot + ": motor on for " + std::to_string((r.off_ns - r.on_ns) / 1000) + " us" +
            (r.drop_ns ? ", drop after " + std::to_string((*r.drop_ns - r.on_ns) / kNsPerMs) + " ms"
                       : ", no drop"));
  }
}

void TimedMotor::run() {
  name_this_thread("vend-motor");
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || request_.has_value(); });
    if (stop_) return;
    int slot = *request_;
    request_.reset();
    lock.unlock();
    rotate(slot);
    lock.lock();
  }
}

void TimedMotor::watch_until(int64_t deadline_ns, Rotation& r) {
  bool sensor_ok = true;
  while (true) {
    int64_t now = monotonic_ns();
    if (now >= deadline_ns) return;
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
    }
    int64_t wait = std::min(deadline_ns - now, kSliceNs);
    if (sensor_ok) {
      auto edge = sensor_.wait_edge(wait);
      if (edge.ok()) {
        if (*edge && (*edge)->at_ns >= r.on_ns && !r.drop_ns) r.drop_ns = (*edge)->at_ns;
        continue;
      }
      // A failing sensor must not cut the rotation short: keep the time by
      // sleeping instead, and report the error with the outcome.
      if (r.error.empty()) r.error = "drop sensor: " + edge.error().to_string();
      sensor_ok = false;
    }
    int64_t until = now + wait;
    timespec ts{static_cast<time_t>(until / 1'000'000'000),
                static_cast<long>(until % 1'000'000'000)};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
  }
}

void TimedMotor::rotate(int slot) {
  DigitalOutput* line = lines_.at(slot);
  Rotation r;
  r.slot = slot;
  // Edges from before this rotation are not its drop.
  for (int i = 0; i < 1024; ++i) {
    auto stale = sensor_.wait_edge(0);
    if (!stale.ok() || !*stale) break;
  }
  auto level = sensor_.read();
  r.blocked_at_start = level.ok() && *level;
  Status on = line->write(true);
  // Once the line is on: a write through the motor guard is a round trip,
  // and the rotation's time counts from the line, not from the request.
  r.on_ns = monotonic_ns();
  {
    std::lock_guard lock(mu_);
    rotation_ = r;
    if (!on.ok()) {
      (void)line->write(false);  // the line may be half-set; make sure it is off
      started_ = on;
      state_ = MotorState::kIdle;
      cv_.notify_all();
      return;
    }
    started_ = Status{};
    cv_.notify_all();
  }
  watch_until(r.on_ns + run_ns_, r);
  Status off = line->write(false);
  r.off_ns = monotonic_ns();
  if (off.ok()) watch_until(r.off_ns + window_ns_, r);
  if (!r.drop_ns && !r.blocked_at_start) {
    // A line without edge events: the level at the end still tells.
    auto end = sensor_.read();
    if (end.ok() && *end) r.drop_ns = monotonic_ns();
  }
  if (!off.ok()) r.error = "motor may still be on: " + off.error().to_string();
  std::lock_guard lock(mu_);
  rotation_ = r;
  // A failed off-write leaves the motor state unknown: never a clean stop.
  state_ = off.ok() ? MotorState::kDone : MotorState::kJammed;
  reported_ = false;
}

}  // namespace vend::fw
