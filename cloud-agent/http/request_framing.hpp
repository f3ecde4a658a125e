// The framing rules of RFC 9112 that a request's head must keep before any
// route sees it: how the body is delimited (Content-Length, Transfer-Encoding)
// and what the request-target and header fields may contain. A pure check
// over the head as received (the raw, not percent-decoded target and every
// header field), so that HttpServer applies it in one place and fuzz_framing
// can run it without a server.
//
// Refused (status, problem):
//   400 bad_target              a control byte or space in the target, a '%'
//                               not followed by two hex digits, %00 anywhere,
//                               %01-%1F or %7F in the path (before '?')
//   414 target_too_long         the target is over max_target_bytes
//   400 bad_header              a field name that is not a token (e.g. space
//                               before the colon), a control byte (but HTAB)
//                               in a field value
//   400 bad_content_length      Content-Length not 1*DIGIT, or past 19 digits
//   400 duplicate_content_length  Content-Length given more than once (equal
//                               or not: RFC 9110 8.6 lets a recipient reject)
//   400 content_length_with_transfer_encoding  both given (RFC 9112 6.1)
//   400 bad_transfer_encoding   chunked not the final coding, chunked twice,
//                               an empty list, Transfer-Encoding given more
//                               than once, or in an HTTP/1.0 request
//   501 unsupported_transfer_coding  a coding before chunked (gzip, chunked):
//                               the agent decodes none
// A head it accepts is framed one way only: no Content-Length and no
// Transfer-Encoding (empty body), one Content-Length of digits, or one
// Transfer-Encoding field that is exactly "chunked" (case-insensitive).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vend::agent {

// Every way a request's framing is refused, as counted in /metrics
// (vend_http_framing_errors_total{problem=...}). The last two are seen by
// HttpServer, not by check_request_head(): kIncompleteRequest, the client
// ended its side mid-request; kRefusedByParser, libmicrohttpd answered the
// request itself (its own 400/413/414/431).
enum class FramingProblem {
  kBadTarget,
  kTargetTooLong,
  kBadHeader,
  kBadContentLength,
  kDuplicateContentLength,
  kContentLengthWithTransferEncoding,
  kBadTransferEncoding,
  kUnsupportedTransferCoding,
  kIncompleteRequest,
  kRefusedByParser,
};
inline constexpr size_t kFramingProblemCount = 10;

// "bad_target", "target_too_long", ...: the JSON error's code and the metric label.
const char* framing_problem_name(FramingProblem problem);
// Every problem, in enum order.
const std::array<FramingProblem, kFramingProblemCount>& all_framing_problems();

// One header field as the server parsed it.
struct HeaderField {
  std::string_view name;
  std::string_view value;  // leading and trailing whitespace already removed
};

// A request's head as received. Views into the caller's storage.
struct RequestHead {
  std::string_view version;  // "HTTP/1.1"
  std::string_view target;   // raw: not percent-decoded, query included
  std::vector<HeaderField> fields;
};

struct FramingError {
  int status = 400;  // 400, 414 or 501
  FramingProblem problem = FramingProblem::kBadTarget;
  std::string message;  // names the field or byte at fault
};

// The first rule of the list above that `head` breaks, or nothing.
std::optional<FramingError> check_request_head(const RequestHead& head, size_t max_target_bytes);

}  // namespace vend::agent
