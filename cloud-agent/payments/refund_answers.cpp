// What a gateway's answer to a refund request means (refund_answers.hpp).
#include "payments/refund_answers.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>

namespace vend::agent {

namespace {

constexpr size_t kMaxBody = 120;  // of the gateway's words, kept with the status

std::string_view status_name(int status) {
  switch (status) {
    case 400: return "bad request";
    case 401: return "unauthorized: check the gateway secret";
    case 403: return "forbidden";
    case 404: return "not found: the gateway knows no such payment";
    case 408: return "request timeout";
    case 409: return "conflict: idempotency key in use";
    case 410: return "gone";
    case 422: return "unprocessable";
    case 425: return "too early";
    case 429: return "too many requests";
    case 503: return "unavailable";
    default: return "";
  }
}

std::string describe(int status, std::string_view body) {
  std::string out = "HTTP " + std::to_string(status);
  if (std::string_view name = status_name(status); !name.empty()) {
    out += " (";
    out += name;
    out += ")";
  }
  if (!body.empty()) {
    out += ": ";
    out += body.substr(0, kMaxBody);
  }
  return out;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

bool refund_status_retryable(int status) {
  return status >= 500 || status == 408 || status == 409 || status == 425 || status == 429;
}

int64_t retry_after_ms_of(std::string_view value, int64_t now_wall_ms) {
  value = trimmed(value);
  if (value.empty()) return 0;
  int64_t delay_ms = 0;
  int64_t seconds = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec == std::errc() && end == value.data() + value.size()) {
    delay_ms = seconds > kMaxRetryAfterMs / 1000 ? kMaxRetryAfterMs : seconds * 1000;
  } else {
    // An HTTP date (IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT").
    std::string text(value);
    std::tm tm{};
    const char* parsed = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (parsed == nullptr || *parsed != '\0') return 0;
    delay_ms = static_cast<int64_t>(timegm(&tm)) * 1000 - now_wall_ms;
  }
  return std::clamp<int64_t>(delay_ms, 0, kMaxRetryAfterMs);
}

RefundAnswer refund_answer_of(int status, std::string_view body, std::string_view retry_after,
                              int64_t now_wall_ms) {
  if (status >= 200 && status < 300) return RefundAnswer{RefundOutcome::kDelivered, "", 0};
  if (refund_status_retryable(status)) {
    return RefundAnswer{RefundOutcome::kRetry, describe(status, body),
                        retry_after_ms_of(retry_after, now_wall_ms)};
  }
  return RefundAnswer{RefundOutcome::kRejected, describe(status, body), 0};
}

RefundAnswer refund_no_answer(std::string_view error) {
  return RefundAnswer{RefundOutcome::kRetry, "no answer: " + std::string(error), 0};
}

}  // namespace vend::agent
