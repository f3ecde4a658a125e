// The framing rules of RFC 9112 that a request's head must keep before any
// route sees it: how the body is delimited (Content-Length, Transfer-Encoding)
// and what the request-target and header fields may contain. A pure check
// over the head as received (the raw, not percent-decoded target and every
// header field), so that HttpServer applies it in one place and fuzz_framing
// can run it without a server.
//
// Refused (status, problem):
//   400 bad_request_line        the version is not HTTP/1.x
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
// check_head_layout(), run first, refuses what libmicrohttpd's C strings hide
// and the line ends it accepts (HeadLayout below):
//   400 nul_byte                a NUL byte in the request line or a header line
//   400 bare_lf                 a line ended by LF alone, not CRLF
//   400 bad_request_line        more than one space after the method
//   400 bad_header              a field continued on the next line (obs-fold)
// A head both accept is framed one way only: no Content-Length and no
// Transfer-Encoding (empty body), one Content-Length of digits, or one
// Transfer-Encoding field that is exactly "chunked" (case-insensitive), and
// every line of it ends with CRLF.
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
  kBadRequestLine,
  kNulByte,
  kBareLf,
  kIncompleteRequest,
  kRefusedByParser,
};
inline constexpr size_t kFramingProblemCount = 13;

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

// A head as libmicrohttpd 0.9.75 leaves it in its read buffer. It parses in
// place: it overwrites each line end (CRLF, or a bare LF, which it accepts),
// the spaces around the target and each field's colon with NULs, and hands
// every piece over as a C string, so a NUL byte received inside a piece
// silently ends the piece there. The gaps between the end of one piece and
// the start of the next tell what was received in between: one NUL between
// the request line's parts (a space), two at each line end (CRLF), four
// after the last field (CRLF CRLF); any other byte in a gap was hidden
// behind a NUL. Offsets are from the method's first byte.
struct HeadLayout {
  std::string_view buffer;  // the head, from the method through the empty line
  size_t method_end = 0;    // just past the method's C string
  size_t target_at = 0;     // the raw target's C string
  size_t target_end = 0;
  size_t version_at = 0;  // "HTTP/1.1"
  size_t version_end = 0;
  struct Field {
    std::string_view name;  // for the messages
    size_t name_at = 0;
    size_t value_at = 0;
    size_t value_end = 0;  // just past the value's C string
  };
  std::vector<Field> fields;  // in the order received
};

// The first gap of `layout` that hides a byte (behind a NUL), ends a line
// with a bare LF or stands for a folded field; or nothing. Reads `buffer`
// only between offsets it has checked to lie inside it. A NUL right before a
// line's LF takes the place of its CR, hides nothing, and is not told apart.
std::optional<FramingError> check_head_layout(const HeadLayout& layout);

}  // namespace vend::agent
