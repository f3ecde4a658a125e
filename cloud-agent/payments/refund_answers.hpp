// What a payment gateway's answer to a refund request means: delivered,
// try again (and not before when), or refused for good. The rule, apart
// from the HTTP client that asks (shell/refund_sender.cpp), so it is tested
// alone and the same everywhere:
//
//   2xx                                   delivered
//   no answer (connect, read, timeout)    try again
//   408, 409, 425, 429, any 5xx           try again; a Retry-After (delta
//                                         seconds or an HTTP date) sets the
//                                         earliest next attempt
//   any other status (400, 401, 403,      refused for good: given up with
//   404, 422, 3xx, 1xx ...)               the status, its name and the body
//
// 409 is retried: gateways answer it while a request with the same
// idempotency key is still being processed ("idempotency key in use"), and
// the key makes a repeat harmless. A refusal meant for good is given up
// after at most --refund-max-attempts anyway. Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "contracts/refund.hpp"

namespace vend::agent {

struct RefundAnswer {
  RefundOutcome outcome = RefundOutcome::kRetry;
  std::string detail;          // stored as the refund's last_error ("" when delivered)
  int64_t retry_after_ms = 0;  // kRetry: not again before this delay (0: the backoff)
};

// Retry-After, at most this far ahead (a gateway's nonsense is bounded).
inline constexpr int64_t kMaxRetryAfterMs = 3'600'000;

// The gateway answered `status` with `body` and the Retry-After header
// `retry_after` ("" when absent); `now_wall_ms` reads an HTTP-date one.
RefundAnswer refund_answer_of(int status, std::string_view body, std::string_view retry_after,
                              int64_t now_wall_ms);
// No answer at all (`error`: the client's words): try again.
RefundAnswer refund_no_answer(std::string_view error);

// True for the statuses that are tried again (see above).
bool refund_status_retryable(int status);
// Retry-After as a delay in ms from now: delta-seconds or an IMF-fixdate;
// 0 when absent, malformed or in the past; at most kMaxRetryAfterMs.
int64_t retry_after_ms_of(std::string_view value, int64_t now_wall_ms);

}  // namespace vend::agent
