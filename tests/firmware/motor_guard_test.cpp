// MotorGuard: the motor lines belong to a process of their own, so a motor
// stops when the daemon dies, however it dies. Real processes, real time,
// fake lines in shared memory (shared_lines.hpp).
#include "motor_guard/motor_guard.hpp"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "gpio/guarded_output.hpp"
#include "gpio/timed_motor.hpp"
#include "gpio_fakes.hpp"
#include "shared_lines.hpp"
#include "test_support.hpp"
#include "vend/log.hpp"

namespace vend::fw {
namespace {

using namespace std::chrono_literals;
using test::SharedLines;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kLongMs = 60'000;  // a deadline no test waits for
// How late a line may go off: the guard must be scheduled (the machine running
// the tests is shared and busy; ARM test binaries run under qemu-user).
#if defined(__arm__) || defined(__aarch64__)
constexpr int64_t kLateNs = 300 * kMs;
#else
constexpr int64_t kLateNs = 50 * kMs;
#endif

bool exited(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

TEST_CASE("a line goes on and off when told, through the guard; the guard exits with its owner") {
  MemoryLogger log;
  SharedLines lines(2);
  pid_t pid = 0;
  {
    auto guard = MotorGuard::spawn(lines.guard_lines(), kLongMs, kMotorRealtimePriority, log);
    REQUIRE(guard.ok());
    pid = (*guard)->pid();
    // Started and serving when spawn() returns; its scheduling is logged
    // either way (SCHED_FIFO is refused without privileges).
    CHECK(log.contains("guard at "));
    CHECK(log.contains("holds 2 motor lines, each on for at most 60000 ms"));
    REQUIRE((*guard)->set(1, true).ok());
    CHECK(lines.level(1));  // written before set() returned
    CHECK_FALSE(lines.level(0));
    REQUIRE((*guard)->set(1, false).ok());
    CHECK_FALSE(lines.level(1));
    REQUIRE((*guard)->set(0, true).ok());
    CHECK((*guard)->check().ok());
    auto bad = (*guard)->set(2, true);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == "motor_guard");
    CHECK(bad.error().message.find("no motor line 2") != std::string::npos);
  }
  // The destructor closed the socket: every line off, the guard reaped.
  CHECK_FALSE(lines.level(0));
  CHECK(exited(pid));
}

TEST_CASE("a guard without a deadline is refused") {
  MemoryLogger log;
  SharedLines lines(1);
  auto guard = MotorGuard::spawn(lines.guard_lines(), 0, 0, log);
  REQUIRE_FALSE(guard.ok());
  CHECK(guard.error().code == "motor_guard");
  CHECK(guard.error().message.find("not 0 ms") != std::string::npos);
}

TEST_CASE("the guard's deadline stops a rotation it is never told to stop") {
  MemoryLogger log;
  SharedLines lines(1);
  auto guard = MotorGuard::spawn(lines.guard_lines(), /*max_on_ms=*/150, 0, log);
  REQUIRE(guard.ok());
  REQUIRE((*guard)->set(0, true).ok());
  REQUIRE(lines.wait_level(0, false, 2s));
  int64_t on_ns = lines.at(0).off_ns.load() - lines.at(0).on_ns.load();
  MESSAGE("line on for " << on_ns / 1000 << " us (deadline 150000 us)");
  CHECK(on_ns >= 150 * kMs);
  CHECK(on_ns <= 150 * kMs + kLateNs);
  REQUIRE((*guard)->set(0, false).ok());  // the daemon's own stop, late: harmless
}

TEST_CASE("told on again, an active line keeps its deadline: a rotation is never extended") {
  MemoryLogger log;
  SharedLines lines(1);
  auto guard = MotorGuard::spawn(lines.guard_lines(), /*max_on_ms=*/300, 0, log);
  REQUIRE(guard.ok());
  REQUIRE((*guard)->set(0, true).ok());
  int64_t first_on = lines.at(0).on_ns.load();
  std::this_thread::sleep_for(150ms);
  REQUIRE((*guard)->set(0, true).ok());
  REQUIRE(lines.wait_level(0, false, 2s));
  CHECK(lines.at(0).on_ns.load() == first_on);  // not written again
  CHECK(lines.at(0).off_ns.load() - first_on <= 300 * kMs + kLateNs);
}

TEST_CASE("a stop signal to the guard does not cut the rotation: only its owner stops it") {
  MemoryLogger log;
  SharedLines lines(1);
  auto guard = MotorGuard::spawn(lines.guard_lines(), kLongMs, 0, log);
  REQUIRE(guard.ok());
  REQUIRE((*guard)->set(0, true).ok());
  for (int sig : {SIGTERM, SIGINT, SIGHUP})
    kill((*guard)->pid(), sig);  // systemctl stop: the whole group
  std::this_thread::sleep_for(100ms);
  CHECK(lines.level(0));
  CHECK((*guard)->check().ok());
  REQUIRE((*guard)->set(0, false).ok());
  CHECK_FALSE(lines.level(0));
}

TEST_CASE("a failed write is reported with the line's name; the guard keeps serving") {
  MemoryLogger log;
  SharedLines lines(1);
  auto guard = MotorGuard::spawn(lines.guard_lines(), kLongMs, 0, log);
  REQUIRE(guard.ok());
  GuardedOutput out(**guard, 0, "slot 4 motor (line 7 of 'fake')");
  lines.at(0).fail.store(1);
  Status s = out.write(true);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "gpio_error");
  CHECK(s.error().message == "cannot set slot 4 motor (line 7 of 'fake') on: motor guard: " +
                                 std::string(std::strerror(EIO)));
  lines.at(0).fail.store(0);
  // The half-set line is switched off by the guard on its own (retried every 1 ms).
  auto until = std::chrono::steady_clock::now() + 1s;
  while (lines.at(0).off_ns.load() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  CHECK(lines.at(0).off_ns.load() != 0);
  REQUIRE(out.write(true).ok());
  CHECK(lines.level(0));
}

TEST_CASE("a killed guard: writes fail naming it, check() says how it ended") {
  MemoryLogger log;
  SharedLines lines(1);
  auto guard = MotorGuard::spawn(lines.guard_lines(), kLongMs, 0, log);
  REQUIRE(guard.ok());
  REQUIRE(kill((*guard)->pid(), SIGKILL) == 0);
  std::this_thread::sleep_for(50ms);
  Status s = (*guard)->set(0, true);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "motor_guard");
  CHECK(s.error().message.find("is gone") != std::string::npos);
  Status c = (*guard)->check();
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message.find("killed by signal 9") != std::string::npos);
  CHECK_FALSE((*guard)->set(0, false).ok());  // and it stays failed
  CHECK(log.contains("motor guard (pid"));
}

// What the daemon does with hal "gpio", in a process of its own: a TimedMotor
// whose line is written through the guard, one rotation of 60 s under way.
// Returns the rotating process; *guard_pid is the guard's pid.
pid_t start_rotating_daemon(SharedLines& lines, pid_t* guard_pid) {
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  pid_t daemon = fork();
  REQUIRE(daemon >= 0);
  if (daemon == 0) {
    close(ready[0]);
    MemoryLogger log;
    auto guard = MotorGuard::spawn(lines.guard_lines(), kLongMs, 0, log);
    if (!guard.ok()) _exit(3);
    GuardedOutput out(**guard, 0, "slot 1 motor");
    test::FakeInput sensor;
    TimedMotor motor(log, {{1, &out}}, sensor, /*run_ms=*/kLongMs, /*window_ms=*/0);
    if (!motor.start(1).ok()) _exit(4);
    pid_t g = (*guard)->pid();
    if (write(ready[1], &g, sizeof g) != sizeof g) _exit(5);
    while (true) pause();  // mid-rotation until killed
  }
  close(ready[1]);
  REQUIRE(read(ready[0], guard_pid, sizeof *guard_pid) == sizeof *guard_pid);
  close(ready[0]);
  return daemon;
}

// Fails on the code before the guard: TimedMotor's process held the line, and
// a SIGKILL released it as it was (high), the motor left turning.
TEST_CASE("kill -9 of the daemon mid-rotation: the motor line is off within milliseconds") {
  SharedLines lines(1);
  pid_t guard_pid = 0;
  pid_t daemon = start_rotating_daemon(lines, &guard_pid);
  REQUIRE(lines.level(0));  // the rotation is under way
  std::this_thread::sleep_for(100ms);
  int64_t killed_ns = monotonic_ns();
  REQUIRE(kill(daemon, SIGKILL) == 0);
  REQUIRE(waitpid(daemon, nullptr, 0) == daemon);
  REQUIRE(lines.wait_level(0, false, 5s));
  int64_t late_ns = lines.at(0).off_ns.load() - killed_ns;
  MESSAGE("motor line off " << late_ns / 1000 << " us after the SIGKILL");
  CHECK(late_ns <= kLateNs);
  // The guard ends once the line is off, by itself.
  auto until = std::chrono::steady_clock::now() + 5s;
  while (!::vend::test::process_ended(guard_pid) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  CHECK(::vend::test::process_ended(guard_pid));
}

TEST_CASE("a rotation through the guard: on for run_ms, off by TimedMotor's own timer") {
  MemoryLogger log;
  SharedLines lines(1);
  auto guard = MotorGuard::spawn(lines.guard_lines(), /*max_on_ms=*/200, 0, log);
  REQUIRE(guard.ok());
  GuardedOutput out(**guard, 0, "slot 1 motor");
  test::FakeInput sensor;
  TimedMotor motor(log, {{1, &out}}, sensor, /*run_ms=*/200, /*window_ms=*/100);
  REQUIRE(motor.start(1).ok());
  CHECK(lines.level(0));
  std::this_thread::sleep_for(50ms);
  sensor.pulse();
  auto until = std::chrono::steady_clock::now() + 3s;
  while (motor.poll() == MotorState::kRunning && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(2ms);
  }
  CHECK(motor.poll() == MotorState::kDone);
  CHECK(motor.dropped());
  int64_t on_ns = lines.at(0).off_ns.load() - lines.at(0).on_ns.load();
  MESSAGE("line on for " << on_ns / 1000 << " us (run 200000 us)");
  CHECK(on_ns >= 200 * kMs);  // the guard's deadline or TimedMotor's timer, whichever first
  CHECK(on_ns <= 200 * kMs + kLateNs);
  CHECK(lines.at(0).writes.load() >= 2);
}

}  // namespace
}  // namespace vend::fw
