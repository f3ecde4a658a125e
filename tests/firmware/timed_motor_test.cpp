// TimedMotor: the motor stops on its own timer and the drop is seen with its
// kernel time, whatever the core's thread is doing. Real time, fake lines.
#include "gpio/timed_motor.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "core_rig.hpp"
#include "gpio_fakes.hpp"

namespace vend::fw {
namespace {

using namespace std::chrono_literals;
using test::FakeInput;
using test::FakeOutput;

constexpr int64_t kMs = 1'000'000;
// How late the line may go low: the controller's thread must be scheduled
// (the machine running the tests is shared and busy). ARM test binaries run
// under qemu-user in CI, where every wake-up is emulated code.
#if defined(__arm__) || defined(__aarch64__)
constexpr int64_t kLateNs = 60 * kMs;
#else
constexpr int64_t kLateNs = 15 * kMs;
#endif

int64_t on_time_ns(const FakeOutput& line) {
  auto w = line.writes();
  REQUIRE(w.size() == 2);
  CHECK(w[0].active);
  CHECK_FALSE(w[1].active);
  return w[1].at_ns - w[0].at_ns;
}

MotorState wait_finished(TimedMotor& motor, std::chrono::milliseconds limit = 3s) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (motor.poll() == MotorState::kRunning && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(2ms);
  }
  return motor.poll();
}

// The core thread stalls for 2 s mid-rotation (an fsync'd write on a slow SD
// card, `vend-firmware restock` holding the write lock, a command backlog).
// Fails on the code before TimedMotor: GpioMotor switched the line off only in
// poll(), i.e. on the core's next tick, so the line stayed high for >= 2 s.
TEST_CASE("a core blocked for seconds mid-rotation: the motor stops on time, the drop is seen") {
  vend::test::TempDir dir;
  SystemClock clock;
  SeededRandom random{3};
  MemoryLogger log;
  crypto::Key key = crypto::Key::generate();
  auto ledger = Ledger::open(dir.file("ledger.db"), Identity{test::kDevice, key, "boot-1"});
  REQUIRE(ledger.ok());
  REQUIRE(ledger->sync_slots({{1, 10, "cola", 5}}).ok());
  auto minted = ledger->confirm_restock("r1", 1, 1, clock.wall_ms(), random);
  REQUIRE(minted.ok());

  FakeOutput line;
  FakeInput sensor;
  TimedMotor motor(log, {{1, &line}}, sensor, /*run_ms=*/300, /*window_ms=*/200);
  test::FakeTransport transport;
  CoreOptions options;
  options.snapshot_interval_ms = 0;
  DeviceCore core(*ledger, Hal{&motor, &motor, nullptr, nullptr}, transport, clock, random, log,
                  options);
  REQUIRE(core.boot().ok());

  proto::DispenseCommand c{test::kDevice, "o-1", 1, minted->tokens[0], clock.wall_ms() + 60000};
  std::string payload = proto::encode(c, crypto::sign(key, proto::encode_canonical(c)));
  int64_t accepted_ns = monotonic_ns();
  REQUIRE(core.on_command(payload).result == "accepted");  // the motor starts here
  int64_t fell_ns = 0;
  std::thread item([&] {
    std::this_thread::sleep_for(120ms);
    fell_ns = sensor.pulse();  // the item falls while the core is stuck
  });
  std::this_thread::sleep_for(2s);  // the core thread is blocked: no tick, no poll
  item.join();
  core.tick();

  int64_t on_ns = on_time_ns(line);
  MESSAGE("motor line high for " << on_ns / 1000 << " us (limit 300000 us)");
  CHECK(on_ns >= 300 * kMs);
  CHECK(on_ns <= 300 * kMs + kLateNs);
  Rotation r = motor.last_rotation();
  REQUIRE(r.drop_ns.has_value());
  CHECK(*r.drop_ns == fell_ns);  // the edge's own time, not when it was read
  CHECK(*r.drop_ns - r.on_ns >= 110 * kMs);
  CHECK(r.on_ns - accepted_ns < 500 * kMs);  // at the accept (two fsyncs), not at a tick
  auto d = ledger->find_dispense("o-1").value();
  REQUIRE(d.has_value());
  CHECK(d->state == DispenseState::kDispensed);
}

struct Rig {
  Rig(int64_t run_ms = 100, int64_t window_ms = 50)
      : motor(log, {{1, &slot1}, {2, &slot2}}, sensor, run_ms, window_ms) {}
  MemoryLogger log;
  FakeOutput slot1, slot2;
  FakeInput sensor;
  TimedMotor motor;
};

TEST_CASE("a rotation drives its line for run_ms, then watches the drop window") {
  Rig r(/*run_ms=*/200, /*window_ms=*/500);
  CHECK(r.motor.poll() == MotorState::kIdle);
  REQUIRE(r.motor.start(2).ok());
  CHECK(r.slot2.level());
  CHECK(r.slot1.writes().empty());
  CHECK(r.motor.poll() == MotorState::kRunning);
  std::this_thread::sleep_for(250ms);
  CHECK_FALSE(r.slot2.level());                   // off after 200 ms
  CHECK(r.motor.poll() == MotorState::kRunning);  // the window is still open
  r.sensor.pulse();                               // within the window: counts
  CHECK(wait_finished(r.motor) == MotorState::kDone);
  CHECK(r.motor.dropped());
  int64_t on = on_time_ns(r.slot2);
  CHECK(on >= 200 * kMs);
  CHECK(on <= 200 * kMs + kLateNs);

  // No edge: no drop.
  REQUIRE(r.motor.start(1).ok());
  CHECK(wait_finished(r.motor) == MotorState::kDone);
  CHECK_FALSE(r.motor.dropped());
}

TEST_CASE("edges from before the rotation are not its drop; a blocked beam counts only edges") {
  Rig r;
  r.sensor.pulse();  // dirt, an earlier item: queued before start
  REQUIRE(r.motor.start(1).ok());
  CHECK(wait_finished(r.motor) == MotorState::kDone);
  CHECK_FALSE(r.motor.dropped());

  r.sensor.level = true;  // beam interrupted when the rotation starts
  REQUIRE(r.motor.start(1).ok());
  CHECK(wait_finished(r.motor) == MotorState::kDone);
  CHECK_FALSE(r.motor.dropped());
  CHECK(r.log.contains("already interrupted", LogLevel::kWarn));
  REQUIRE(r.motor.start(1).ok());
  r.sensor.pulse();
  CHECK(wait_finished(r.motor) == MotorState::kDone);
  CHECK(r.motor.dropped());
}

TEST_CASE("a line without edges: the beam interrupted at the end is a drop") {
  Rig r;
  REQUIRE(r.motor.start(1).ok());
  r.sensor.level = true;  // the item rests in the beam; no edge was reported
  CHECK(wait_finished(r.motor) == MotorState::kDone);
  CHECK(r.motor.dropped());
}

TEST_CASE("unknown slot, busy motor and failing lines are errors, never a silent run") {
  Rig r;
  auto unknown = r.motor.start(9);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().code == "unknown_slot");

  REQUIRE(r.motor.start(1).ok());
  auto busy = r.motor.start(2);
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.error().code == "motor_busy");

  // The off-write fails: the motor may still turn, so it is not kDone.
  r.slot1.fail = true;
  CHECK(wait_finished(r.motor) == MotorState::kJammed);
  CHECK(r.log.contains("fake write failure", LogLevel::kError));

  r.slot2.fail = true;
  auto s = r.motor.start(2);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "gpio_error");
  CHECK(r.motor.poll() == MotorState::kIdle);
}

TEST_CASE("a failing drop sensor does not cut the rotation short") {
  Rig r;
  r.sensor.fail = true;
  REQUIRE(r.motor.start(1).ok());
  CHECK(wait_finished(r.motor) == MotorState::kDone);
  CHECK_FALSE(r.motor.dropped());
  int64_t on = on_time_ns(r.slot1);
  CHECK(on >= 100 * kMs);
  CHECK(on <= 100 * kMs + kLateNs);
  CHECK(r.log.contains("drop sensor", LogLevel::kError));
}

TEST_CASE("destroying a running controller switches the motor off at once") {
  FakeOutput line;
  FakeInput sensor;
  MemoryLogger log;
  int64_t started = 0;
  {
    TimedMotor motor(log, {{1, &line}}, sensor, 10000, 0);
    REQUIRE(motor.start(1).ok());
    started = monotonic_ns();
    CHECK(line.level());
  }
  CHECK_FALSE(line.level());
  CHECK(monotonic_ns() - started < 500 * kMs);
}

}  // namespace
}  // namespace vend::fw
