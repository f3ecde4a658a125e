// GPIO HAL: motor timing and drop latch on fake lines, and the errors of a
// chip that is not there (no GPIO hardware is needed).
#include "vend/fw/gpio_hal.hpp"

#include <doctest/doctest.h>

#include <map>
#include <vector>

#include "vend/clock.hpp"
#include "vend/log.hpp"

namespace vend::fw {
namespace {

class FakeOutput final : public DigitalOutput {
 public:
  Status write(bool active) override {
    if (fail) return make_error("gpio_error", "fake write failure");
    writes.push_back(active);
    level = active;
    return {};
  }
  std::vector<bool> writes;
  bool level = false;
  bool fail = false;
};

class FakeInput final : public DigitalInput {
 public:
  Result<bool> read() override {
    if (fail) return make_error("gpio_error", "fake read failure");
    return level;
  }
  Result<int> take_edges() override {
    int n = edges;
    edges = 0;
    return n;
  }
  bool level = false;
  int edges = 0;
  bool fail = false;
};

struct Rig {
  Rig() : motor(clock, log, {{1, &slot1}, {2, &slot2}}, /*run_ms=*/1000, /*settle_ms=*/300) {}
  ManualClock clock;
  MemoryLogger log;
  FakeOutput slot1, slot2;
  GpioMotor motor;
};

TEST_CASE("the motor line is high for run_ms; kDone after the drop window") {
  Rig r;
  CHECK(r.motor.poll() == MotorState::kIdle);
  REQUIRE(r.motor.start(2).ok());
  CHECK(r.slot2.level);
  CHECK(r.slot1.writes.empty());
  r.clock.advance(999);
  CHECK(r.motor.poll() == MotorState::kRunning);
  CHECK(r.slot2.level);
  r.clock.advance(1);
  CHECK(r.motor.poll() == MotorState::kRunning);  // off, waiting for the item to fall
  CHECK_FALSE(r.slot2.level);
  r.clock.advance(299);
  CHECK(r.motor.poll() == MotorState::kRunning);
  r.clock.advance(1);
  CHECK(r.motor.poll() == MotorState::kDone);
  CHECK(r.slot2.writes == std::vector<bool>{true, false});
}

TEST_CASE("a late poll still switches the motor off exactly once") {
  Rig r;
  REQUIRE(r.motor.start(1).ok());
  r.clock.advance(5000);
  CHECK(r.motor.poll() == MotorState::kDone);
  CHECK(r.slot1.writes == std::vector<bool>{true, false});
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
  r.clock.advance(1000);
  CHECK(r.motor.poll() == MotorState::kJammed);
  CHECK(r.log.contains("fake write failure", LogLevel::kError));

  r.slot2.fail = true;
  auto s = r.motor.start(2);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "gpio_error");
  CHECK(r.motor.poll() == MotorState::kIdle);
}

TEST_CASE("destroying a running motor switches it off") {
  ManualClock clock;
  MemoryLogger log;
  FakeOutput line;
  {
    GpioMotor motor(clock, log, {{1, &line}}, 1000, 0);
    REQUIRE(motor.start(1).ok());
    CHECK(line.level);
  }
  CHECK_FALSE(line.level);
}

TEST_CASE("the drop sensor latches an edge or an active level after arm()") {
  MemoryLogger log;
  FakeInput input;
  GpioDropSensor sensor(input, log);

  input.edges = 3;  // before arm(): forgotten
  sensor.arm();
  CHECK_FALSE(sensor.dropped());

  input.edges = 2;  // a short pulse seen only as edges
  sensor.sample();
  CHECK(sensor.dropped());
  CHECK(sensor.dropped());  // latched

  sensor.arm();
  CHECK_FALSE(sensor.dropped());
  input.level = true;  // a line without edge events: the level is enough
  CHECK(sensor.dropped());
}

TEST_CASE("a beam already interrupted at arm() counts only new edges") {
  MemoryLogger log;
  FakeInput input;
  GpioDropSensor sensor(input, log);
  input.level = true;
  sensor.arm();
  CHECK(log.contains("already interrupted", LogLevel::kWarn));
  CHECK_FALSE(sensor.dropped());
  input.edges = 1;
  CHECK(sensor.dropped());
}

TEST_CASE("a failing sensor reports no drop and logs once") {
  MemoryLogger log;
  FakeInput input;
  GpioDropSensor sensor(input, log);
  sensor.arm();
  input.fail = true;
  CHECK_FALSE(sensor.dropped());
  CHECK_FALSE(sensor.dropped());
  CHECK(log.records().size() == 1);
}

TEST_CASE("a chip that does not exist is an error naming it") {
  ManualClock clock;
  MemoryLogger log;
  GpioConfig gpio;
  gpio.chip = "vend-test-no-such-chip";
  gpio.drop_sensor_line = 3;
  auto m = GpioMachine::open(gpio, {{1, 10, "cola", 4}}, clock, log);
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().code == "gpio_error");
  CHECK(m.error().message.find("cannot open GPIO chip 'vend-test-no-such-chip'") == 0);
}

}  // namespace
}  // namespace vend::fw
