// Signed webhooks between the agent and the payment gateway, in the widely
// used `t=…,v1=…` scheme: the header `Vend-Signature: t=<unix seconds>,
// v1=<hex>` carries HMAC-SHA256 under the shared secret of
//
//     "<t>.<subject>.<body>"
//
// where `subject` binds the message to what it is about (the order id of a
// payment notification, the refund id of a refund request) and `body` is the
// exact bytes sent. A notification captured for one order cannot be replayed
// for another, and one outside the tolerance window is refused. Several v1
// entries may be given (secret rotation); one match suffices.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_set>
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

// ok when `header` parses, one of its v1 is the HMAC of (t, subject, body)
// under `secret` (constant time), and |now_s - t| <= tolerance_s. Errors:
// bad_signature (malformed or no match, checked first: an unauthenticated
// caller learns nothing about the clock), signature_expired (outside the
// window; the message names the window).
Status verify(std::string_view secret, std::string_view header, std::string_view subject,
              std::string_view body, int64_t now_s, int64_t tolerance_s);

// Remembers the signatures accepted within the tolerance window, so that a
// captured request sent again inside it is refused. Memory is bounded by
// `max_entries`: beyond it the oldest entries are forgotten early (the
// payment id's idempotency still makes such a replay harmless). Not
// thread-safe; not copyable state of note (plain value type).
class ReplayWindow {
 public:
  ReplayWindow(int64_t window_s, size_t max_entries) : window_s_(window_s), max_(max_entries) {}
  // True the first time `v1` (signed at t_s) is seen; false for a replay.
  bool first_use(int64_t t_s, const std::string& v1, int64_t now_s);
  size_t size() const { return seen_.size(); }

 private:
  int64_t window_s_;
  size_t max_;
  std::deque<std::pair<int64_t, std::string>> order_;  // (expires at, v1), oldest first
  std::unordered_set<std::string> seen_;
};

}  // namespace vend::webhook
