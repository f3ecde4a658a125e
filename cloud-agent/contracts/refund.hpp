// A refund's delivery to the payment gateway, as the core hands it to the
// shell's refund sender and hears back how it went (a data contract of the
// core, the payments component and the shell).
#pragma once

#include <cstdint>
#include <string>

namespace vend::agent {

// One refund for the shell to deliver to the payment gateway.
struct RefundDelivery {
  std::string refund_id;  // the gateway's idempotency key
  std::string payment_id;
  std::string order_id;
  int64_t amount_cents = 0;
  std::string reason;
  int attempt = 1;  // 1 for the first delivery
};

// What the gateway said: confirmed (2xx), try again later (no answer, 5xx,
// 408, 409, 425, 429), or refused for good (any other status: given up,
// alerted). payments/refund_answers.hpp holds the rule.
enum class RefundOutcome { kDelivered, kRetry, kRejected };

}  // namespace vend::agent
