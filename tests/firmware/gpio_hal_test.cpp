// GPIO HAL: the errors of a chip that is not there (no GPIO hardware is
// needed). The motor controller's timing is in timed_motor_test.cpp.
#include "gpio/gpio_hal.hpp"

#include <doctest/doctest.h>

#include "vend/log.hpp"

namespace vend::fw {
namespace {

TEST_CASE("a chip that does not exist is an error naming it") {
  MemoryLogger log;
  GpioConfig gpio;
  gpio.chip = "vend-test-no-such-chip";
  gpio.drop_sensor_line = 3;
  auto m = GpioMachine::open(gpio, {{1, 10, "cola", 4}}, log);
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().code == "gpio_error");
  CHECK(m.error().message.find("cannot open GPIO chip 'vend-test-no-such-chip'") == 0);
}

}  // namespace
}  // namespace vend::fw
