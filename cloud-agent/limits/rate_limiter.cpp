#include "limits/rate_limiter.hpp"

#include <algorithm>
#include <cmath>

namespace vend::agent {

namespace bucket {

namespace {

// ceil() that ignores floating-point noise: 0.996 tokens at 4/s is 1 ms
// from a token, not 1.0000000000000009 ms.
int64_t ceil_ms(double ms) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(ms - 1e-6)));
}

}  // namespace

double refill(double tokens, double elapsed_ms, const RateLimit& limit) {
  double added = std::max(0.0, elapsed_ms) * limit.rate_per_s / 1000.0;
  return std::min(static_cast<double>(limit.burst), tokens + added);
}

int64_t wait_ms(double tokens, const RateLimit& limit) {
  return ceil_ms((1.0 - tokens) * 1000.0 / limit.rate_per_s);
}

int64_t full_after_ms(double tokens, const RateLimit& limit) {
  return ceil_ms((static_cast<double>(limit.burst) - tokens) * 1000.0 / limit.rate_per_s);
}

}  // namespace bucket

}  // namespace vend::agent
