#include "vend/clock.hpp"

#include <cassert>
#include <chrono>

namespace vend {

int64_t SystemClock::monotonic_ms() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
}

int64_t SystemClock::wall_ms() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

void ManualClock::advance(int64_t delta_ms) {
  assert(delta_ms >= 0);
  wall_ms_ += delta_ms;
  monotonic_ms_ += delta_ms;
}

}  // namespace vend
