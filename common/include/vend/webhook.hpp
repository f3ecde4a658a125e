// Signed webhooks between the agent and the payment gateway, in the widely
// used `t=…,v1=…` scheme: the header `Vend-Signature: t=<unix seconds>,
// v1=<hex>` carries HMAC-SHA256 under the shared secret of
//
//     "<t>.<subject>.<body>"
//
// where `subject` binds the message to what it is about (the order id of a
// payment notification, the refund id of a refund request) and `body` is the
// exact bytes sent. A notification captured for one order cannot be replayed
// for another. Several v1 entries may be given (secret rotation); one match
// suffices. The time is authenticated, not judged here: what the receiver
// makes of it (the agent: a clock-skew warning, never a refusal) and of a
// notification sent twice (the agent: its payment id's recorded answer) is
// its own policy.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vend/result.hpp"

namespace vend::webhook {

inline constexpr const char* kHeader = "Vend-Signature";

// The header value for `body` about `subject`, signed at `t_s`.
std::string sign(std::string_view secret, int64_t t_s, std::string_view subject,
                 std::string_view body);

struct Signature {
  int64_t t_s = 0;
  std::vector<std::string> v1;  // lowercase hex, 64 characters each
};

// Strict parse of a header value: "t=<digits>" and at least one
// "v1=<64 hex>", comma-separated, nothing else. Error code bad_signature.
Result<Signature> parse(std::string_view header);

// The signed time t (unix seconds) when `header` parses and one of its v1
// is the HMAC of (t, subject, body) under `secret` (every entry compared in
// constant time). Error bad_signature (malformed, or no entry matches),
// with a message naming the problem.
Result<int64_t> authenticate(std::string_view secret, std::string_view header,
                             std::string_view subject, std::string_view body);

}  // namespace vend::webhook
