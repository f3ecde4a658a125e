// SimulatedMachine: rotation timing on the injected clock, drops, empty
// slots and jams decided by the seed.
#include "sim_hal/sim_hal.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "vend/clock.hpp"
#include "vend/random.hpp"

namespace vend::fw {
namespace {

struct Machine {
  explicit Machine(double jam = 0.0, uint64_t seed = 1)
      : random(seed), sim(clock, random, SimulatedMachineOptions{500, jam}) {}
  ManualClock clock;
  SeededRandom random;
  SimulatedMachine sim;
};

TEST_CASE("a rotation runs for motor_run_ms, then drops one item") {
  Machine m;
  m.sim.set_items(1, 3);
  CHECK(m.sim.poll() == MotorState::kIdle);
  m.sim.arm();
  REQUIRE(m.sim.start(1).ok());
  CHECK(m.sim.rotations() == 1);
  m.clock.advance(499);
  CHECK(m.sim.poll() == MotorState::kRunning);
  CHECK_FALSE(m.sim.dropped());
  CHECK(m.sim.items(1) == 3);
  m.clock.advance(1);
  CHECK(m.sim.poll() == MotorState::kDone);
  CHECK(m.sim.dropped());
  CHECK(m.sim.items(1) == 2);
  // kDone stays, and polling again drops nothing more.
  m.clock.advance(1000);
  CHECK(m.sim.poll() == MotorState::kDone);
  CHECK(m.sim.items(1) == 2);
  CHECK(m.sim.count(1) == 2);
}

TEST_CASE("the drop happens at the end of the rotation even if nobody polled the motor") {
  Machine m;
  m.sim.set_items(2, 1);
  m.sim.arm();
  REQUIRE(m.sim.start(2).ok());
  m.clock.advance(600);
  CHECK(m.sim.dropped());
  CHECK(m.sim.items(2) == 0);
  CHECK(m.sim.poll() == MotorState::kDone);
}

TEST_CASE("an empty slot turns the motor but drops nothing") {
  Machine m;
  m.sim.arm();
  REQUIRE(m.sim.start(4).ok());
  m.clock.advance(500);
  CHECK(m.sim.poll() == MotorState::kDone);
  CHECK_FALSE(m.sim.dropped());
  CHECK(m.sim.items(4) == 0);
  CHECK(m.sim.rotations() == 1);
}

TEST_CASE("a jam drops nothing and the item stays") {
  Machine m(/*jam=*/1.0);
  m.sim.set_items(1, 2);
  m.sim.arm();
  REQUIRE(m.sim.start(1).ok());
  m.clock.advance(499);
  CHECK(m.sim.poll() == MotorState::kRunning);
  m.clock.advance(1);
  CHECK(m.sim.poll() == MotorState::kJammed);
  CHECK_FALSE(m.sim.dropped());
  CHECK(m.sim.items(1) == 2);
}

TEST_CASE("arm() clears the drop latch") {
  Machine m;
  m.sim.set_items(1, 2);
  m.sim.arm();
  REQUIRE(m.sim.start(1).ok());
  m.clock.advance(500);
  CHECK(m.sim.dropped());
  m.sim.arm();
  CHECK_FALSE(m.sim.dropped());
}

TEST_CASE("a second start while rotating is refused") {
  Machine m;
  REQUIRE(m.sim.start(1).ok());
  auto again = m.sim.start(2);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == "motor_busy");
  CHECK(m.sim.rotations() == 1);
  m.clock.advance(500);
  CHECK(m.sim.start(2).ok());
}

TEST_CASE("jams are decided by the seed: the same seed replays the same jams") {
  auto jams = [](uint64_t seed) {
    Machine m(/*jam=*/0.3, seed);
    std::vector<bool> out;
    for (int i = 0; i < 64; ++i) {
      m.sim.set_items(1, 1);
      REQUIRE(m.sim.start(1).ok());
      m.clock.advance(500);
      out.push_back(m.sim.poll() == MotorState::kJammed);
    }
    return out;
  };
  auto a = jams(42);
  CHECK(a == jams(42));
  int count = static_cast<int>(std::count(a.begin(), a.end(), true));
  CHECK(count > 5);
  CHECK(count < 40);
}

TEST_CASE("set_jam_probability and load change the physical truth") {
  Machine m;
  m.sim.load(3, 2);
  m.sim.load(3, 1);
  CHECK(m.sim.items(3) == 3);
  m.sim.set_items(3, -5);
  CHECK(m.sim.items(3) == 0);
  m.sim.set_jam_probability(1.0);
  m.sim.set_items(3, 1);
  REQUIRE(m.sim.start(3).ok());
  m.clock.advance(500);
  CHECK(m.sim.poll() == MotorState::kJammed);
}

}  // namespace
}  // namespace vend::fw
