// What a gateway's answer to a refund means (payments/refund_answers.hpp),
// and a Retry-After holding the next attempt back (Payments::attempted).
#include "payments/refund_answers.hpp"

#include <doctest/doctest.h>

#include <future>
#include <string>

#include "payments/payments.hpp"

using vend::agent::kMaxRetryAfterMs;
using vend::agent::refund_answer_of;
using vend::agent::refund_no_answer;
using vend::agent::RefundOutcome;
using vend::agent::retry_after_ms_of;

namespace {

// Sun, 06 Nov 1994 08:49:37 GMT
constexpr int64_t kNov1994Ms = 784'111'777'000;

}  // namespace

TEST_CASE("2xx is delivered; no answer, 408, 409, 425, 429 and 5xx are retried") {
  for (int s : {200, 201, 202, 204}) {
    auto a = refund_answer_of(s, "{}", "", 0);
    CHECK(a.outcome == RefundOutcome::kDelivered);
    CHECK(a.detail.empty());
  }
  for (int s : {408, 409, 425, 429, 500, 502, 503, 504, 599}) {
    CAPTURE(s);
    CHECK(refund_answer_of(s, "", "", 0).outcome == RefundOutcome::kRetry);
  }
  auto none = refund_no_answer("Connection");
  CHECK(none.outcome == RefundOutcome::kRetry);
  CHECK(none.detail == "no answer: Connection");
  CHECK(refund_answer_of(409, R"({"error":"idempotency key in use"})", "", 0).detail ==
        R"(HTTP 409 (conflict: idempotency key in use): {"error":"idempotency key in use"})");
}

TEST_CASE("any other status is refused for good, its status and the gateway's words kept") {
  for (int s : {100, 301, 304, 400, 401, 402, 403, 404, 405, 410, 413, 422, 451}) {
    CAPTURE(s);
    auto a = refund_answer_of(s, "", "", 0);
    CHECK(a.outcome == RefundOutcome::kRejected);
    CHECK(a.detail.find("HTTP " + std::to_string(s)) == 0);
  }
  CHECK(refund_answer_of(401, "", "", 0).detail ==
        "HTTP 401 (unauthorized: check the gateway secret)");
  auto long_body = refund_answer_of(422, std::string(500, 'x'), "", 0);
  CHECK(long_body.detail == "HTTP 422 (unprocessable): " + std::string(120, 'x'));
}

TEST_CASE("Retry-After: delta seconds or an HTTP date, bounded; nonsense is ignored") {
  CHECK(retry_after_ms_of("", 0) == 0);
  CHECK(retry_after_ms_of("3", 0) == 3000);
  CHECK(retry_after_ms_of(" 120 ", 0) == 120'000);
  CHECK(retry_after_ms_of("0", 0) == 0);
  CHECK(retry_after_ms_of("-5", 0) == 0);
  CHECK(retry_after_ms_of("99999999999", 0) == kMaxRetryAfterMs);
  CHECK(retry_after_ms_of("3 s", 0) == 0);
  CHECK(retry_after_ms_of("soon", 0) == 0);
  CHECK(retry_after_ms_of("Sun, 06 Nov 1994 08:49:37 GMT", kNov1994Ms - 7000) == 7000);
  CHECK(retry_after_ms_of("Sun, 06 Nov 1994 08:49:37 GMT", kNov1994Ms + 1000) == 0);  // past
  CHECK(retry_after_ms_of("Sun, 06 Nov 1994 08:49:37 GMT", 0) == kMaxRetryAfterMs);
  CHECK(retry_after_ms_of("Sun, 06 Nov 1994 08:49:37 GMT junk", 0) == 0);
  auto a = refund_answer_of(429, "", "3", 0);
  CHECK(a.outcome == RefundOutcome::kRetry);
  CHECK(a.retry_after_ms == 3000);
  CHECK(refund_answer_of(400, "", "3", 0).retry_after_ms == 0);  // refused: no retry at all
}

TEST_CASE("a Retry-After longer than the backoff holds the next attempt back") {
  vend::agent::Payments p(vend::agent::RefundRetryPolicy{1'000, 8'000, 5});
  vend::SeededRandom random(3);
  p.stage_refund(vend::agent::new_refund("pay-1", "ord-1", 150, "late_payment", 0));
  std::promise<vend::Status> committed;
  committed.set_value(vend::Status{});
  p.committed(committed.get_future().share());
  REQUIRE(p.take_due(10, 0).size() == 1);
  auto a = p.attempted("pay-1", RefundOutcome::kRetry, "HTTP 429", 0, random, 60'000);
  CHECK(a.retry_at_ms == 60'000);
  CHECK(p.take_due(10, 59'999).empty());
  REQUIRE(p.take_due(10, 60'000).size() == 1);
  // One shorter than the backoff changes nothing.
  auto b = p.attempted("pay-1", RefundOutcome::kRetry, "HTTP 429", 60'000, random, 10);
  CHECK(b.retry_at_ms - 60'000 >= 2'000);
}
