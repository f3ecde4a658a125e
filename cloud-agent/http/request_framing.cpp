// The checks of request_framing.hpp. Each rule is one small function over
// the head; check_request_head() runs them in the header's order.
#include "http/request_framing.hpp"

#include <cstdint>
#include <cstdio>
#include <utility>

namespace vend::agent {

namespace {

using Check = std::optional<FramingError>;

FramingError error(int status, FramingProblem problem, std::string message) {
  return FramingError{status, problem, std::move(message)};
}

bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  return (c | 0x20) - 'a' + 10;
}

// tchar of RFC 9110 5.6.2.
bool is_tchar(unsigned char c) {
  if ((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) return true;
  for (char t : std::string_view("!#$%&'*+-.^_`|~")) {
    if (c == static_cast<unsigned char>(t)) return true;
  }
  return false;
}

bool equals_caseless(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if ((a[i] | 0x20) != (b[i] | 0x20)) return false;
  }
  return true;
}

// How a byte is named in a message: printable as itself, else as 0xNN.
std::string byte_name(unsigned char c) {
  if (c > 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
  char text[8];
  std::snprintf(text, sizeof text, "0x%02X", c);
  return text;
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A percent escape at `at` (s[at] == '%'): its byte, or -1 when malformed.
int escaped_byte(std::string_view s, size_t at) {
  if (at + 2 >= s.size()) return -1;
  if (!is_hex(s[at + 1]) || !is_hex(s[at + 2])) return -1;
  return hex_value(s[at + 1]) * 16 + hex_value(s[at + 2]);
}

Check check_target(std::string_view target, size_t max_target_bytes) {
  if (target.size() > max_target_bytes) {
    return error(414, FramingProblem::kTargetTooLong,
                 "the request target is over " + std::to_string(max_target_bytes) + " bytes");
  }
  size_t query = target.find('?');
  for (size_t i = 0; i < target.size(); ++i) {
    auto c = static_cast<unsigned char>(target[i]);
    if (is_control(c) || c == ' ') {
      return error(400, FramingProblem::kBadTarget,
                   "the request target has the byte " + byte_name(c) + " at " + std::to_string(i));
    }
    if (c != '%') continue;
    int b = escaped_byte(target, i);
    if (b < 0) {
      return error(
          400, FramingProblem::kBadTarget,
          "the request target has a '%' not followed by two hex digits at " + std::to_string(i));
    }
    bool in_path = query == std::string_view::npos || i < query;
    if (b == 0 || (in_path && is_control(static_cast<unsigned char>(b)))) {
      return error(400, FramingProblem::kBadTarget,
                   "the request target encodes the control byte " +
                       byte_name(static_cast<unsigned char>(b)) + " at " + std::to_string(i));
    }
  }
  return std::nullopt;
}

Check check_field(const HeaderField& field) {
  if (field.name.empty()) return error(400, FramingProblem::kBadHeader, "a header has no name");
  for (char ch : field.name) {
    auto c = static_cast<unsigned char>(ch);
    if (!is_tchar(c)) {
      return error(400, FramingProblem::kBadHeader,
                   "the header name '" + std::string(trim_ows(field.name)) + "' has the byte " +
                       byte_name(c) + " (no whitespace before the colon)");
    }
  }
  for (char ch : field.value) {
    auto c = static_cast<unsigned char>(ch);
    if (is_control(c) && c != '\t') {
      return error(400, FramingProblem::kBadHeader,
                   "the header " + std::string(field.name) + " has the control byte " +
                       byte_name(c) + " in its value");
    }
  }
  return std::nullopt;
}

// The fields named `name` (case-insensitive).
std::vector<std::string_view> values_of(const RequestHead& head, std::string_view name) {
  std::vector<std::string_view> out;
  for (const HeaderField& f : head.fields) {
    if (equals_caseless(f.name, name)) out.push_back(f.value);
  }
  return out;
}

std::string joined(const std::vector<std::string_view>& values) {
  std::string out;
  for (std::string_view v : values) out += (out.empty() ? "" : ", ") + std::string(v);
  return out;
}

Check check_content_length(const std::vector<std::string_view>& values) {
  if (values.size() > 1) {
    return error(400, FramingProblem::kDuplicateContentLength,
                 "Content-Length is given " + std::to_string(values.size()) + " times (" +
                     joined(values) + ")");
  }
  if (values.empty()) return std::nullopt;
  std::string_view v = values.front();
  bool digits = !v.empty() && v.size() <= 19;
  for (char c : v) digits = digits && c >= '0' && c <= '9';
  if (!digits) {
    return error(400, FramingProblem::kBadContentLength,
                 "Content-Length '" + std::string(v) + "' is not a number of at most 19 digits");
  }
  return std::nullopt;
}

// The comma-separated codings of one field, empty elements skipped.
std::vector<std::string_view> codings_of(std::string_view value) {
  std::vector<std::string_view> out;
  while (true) {
    size_t comma = value.find(',');
    std::string_view item = trim_ows(value.substr(0, comma));
    if (!item.empty()) out.push_back(item);
    if (comma == std::string_view::npos) return out;
    value.remove_prefix(comma + 1);
  }
}

Check check_codings(const std::vector<std::string_view>& codings, std::string_view field) {
  auto bad = [&](const std::string& why) {
    return error(400, FramingProblem::kBadTransferEncoding,
                 "Transfer-Encoding '" + std::string(field) + "': " + why);
  };
  if (codings.empty()) return bad("no coding");
  if (!equals_caseless(codings.back(), "chunked")) {
    return bad("the final coding must be chunked (RFC 9112 6.3)");
  }
  for (size_t i = 0; i + 1 < codings.size(); ++i) {
    if (equals_caseless(codings[i], "chunked")) return bad("chunked is applied more than once");
  }
  if (codings.size() > 1) {
    return error(501, FramingProblem::kUnsupportedTransferCoding,
                 "Transfer-Encoding '" + std::string(field) +
                     "': the agent decodes no coding but "
                     "chunked ('" +
                     std::string(codings.front()) + "')");
  }
  // Empty list elements are valid (RFC 9110 5.6.1) but libmicrohttpd frames
  // a body as chunked only when the value is exactly "chunked": refused,
  // rather than read to the close.
  if (!equals_caseless(field, "chunked")) return bad("empty list elements around chunked");
  return std::nullopt;
}

// RFC 9112 2.3: HTTP-version = "HTTP/" DIGIT "." DIGIT; the agent speaks 1.x.
Check check_version(std::string_view version) {
  bool ok = version.size() == 8 && version.substr(0, 7) == "HTTP/1." && version[7] >= '0' &&
            version[7] <= '9';
  if (ok) return std::nullopt;
  return error(400, FramingProblem::kBadRequestLine,
               "the request line's version is '" + std::string(version) + "', not HTTP/1.x");
}

Check check_transfer_encoding(const RequestHead& head, const std::vector<std::string_view>& te,
                              bool has_content_length) {
  if (te.empty()) return std::nullopt;
  if (has_content_length) {
    return error(400, FramingProblem::kContentLengthWithTransferEncoding,
                 "Content-Length and Transfer-Encoding are both given (RFC 9112 6.1)");
  }
  if (te.size() > 1) {
    return error(
        400, FramingProblem::kBadTransferEncoding,
        "Transfer-Encoding is given " + std::to_string(te.size()) + " times (" + joined(te) + ")");
  }
  if (head.version != "HTTP/1.1") {
    return error(400, FramingProblem::kBadTransferEncoding,
                 "Transfer-Encoding in an " + std::string(head.version) + " request");
  }
  return check_codings(codings_of(te.front()), te.front());
}

// The bytes of [from, to) of a head that are not NUL: what a NUL hid.
bool hides_bytes(std::string_view buffer, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    if (buffer[i] != '\0') return true;
  }
  return false;
}

// A line end: [end, next) must be exactly the two NULs of a CRLF.
Check check_line_end(std::string_view buffer, size_t end, size_t next, const std::string& line) {
  size_t gap = next - end;
  if (gap == 1) {
    return error(400, FramingProblem::kBareLf, "the " + line + " ends with a bare LF, not CRLF");
  }
  if (gap > 2 || hides_bytes(buffer, end, next)) {
    return error(400, FramingProblem::kNulByte, "a NUL byte in the " + line);
  }
  return std::nullopt;
}

Check check_request_line_layout(const HeadLayout& l) {
  size_t size = l.buffer.size();
  bool in_order = l.method_end < l.target_at && l.target_at <= l.target_end &&
                  l.target_end < l.version_at && l.version_at <= l.version_end &&
                  l.version_end <= size;
  if (!in_order) {
    return error(400, FramingProblem::kBadRequestLine,
                 "the request line is not method, target, version");
  }
  if (l.target_at - l.method_end > 1 || hides_bytes(l.buffer, l.method_end, l.target_at)) {
    bool spaces = l.buffer.substr(l.method_end, l.target_at - l.method_end).find(' ') !=
                  std::string_view::npos;
    if (spaces) {
      return error(400, FramingProblem::kBadRequestLine,
                   "more than one space between the method and the target");
    }
    return error(400, FramingProblem::kNulByte, "a NUL byte in the request line's method");
  }
  if (l.version_at - l.target_end > 1 || hides_bytes(l.buffer, l.target_end, l.version_at)) {
    return error(
        400, FramingProblem::kNulByte,
        "a NUL byte in the request target at " + std::to_string(l.target_end - l.target_at));
  }
  return std::nullopt;
}

}  // namespace

const char* framing_problem_name(FramingProblem problem) {
  switch (problem) {
    case FramingProblem::kBadTarget: return "bad_target";
    case FramingProblem::kTargetTooLong: return "target_too_long";
    case FramingProblem::kBadHeader: return "bad_header";
    case FramingProblem::kBadContentLength: return "bad_content_length";
    case FramingProblem::kDuplicateContentLength: return "duplicate_content_length";
    case FramingProblem::kContentLengthWithTransferEncoding:
      return "content_length_with_transfer_encoding";
    case FramingProblem::kBadTransferEncoding: return "bad_transfer_encoding";
    case FramingProblem::kUnsupportedTransferCoding: return "unsupported_transfer_coding";
    case FramingProblem::kBadRequestLine: return "bad_request_line";
    case FramingProblem::kNulByte: return "nul_byte";
    case FramingProblem::kBareLf: return "bare_lf";
    case FramingProblem::kIncompleteRequest: return "incomplete_request";
    case FramingProblem::kRefusedByParser: return "refused_by_parser";
  }
  return "unknown";
}

const std::array<FramingProblem, kFramingProblemCount>& all_framing_problems() {
  static const std::array<FramingProblem, kFramingProblemCount> kAll = {
      FramingProblem::kBadTarget,
      FramingProblem::kTargetTooLong,
      FramingProblem::kBadHeader,
      FramingProblem::kBadContentLength,
      FramingProblem::kDuplicateContentLength,
      FramingProblem::kContentLengthWithTransferEncoding,
      FramingProblem::kBadTransferEncoding,
      FramingProblem::kUnsupportedTransferCoding,
      FramingProblem::kBadRequestLine,
      FramingProblem::kNulByte,
      FramingProblem::kBareLf,
      FramingProblem::kIncompleteRequest,
      FramingProblem::kRefusedByParser};
  return kAll;
}

std::optional<FramingError> check_request_head(const RequestHead& head, size_t max_target_bytes) {
  if (Check c = check_version(head.version)) return c;
  if (Check c = check_target(head.target, max_target_bytes)) return c;
  for (const HeaderField& f : head.fields) {
    if (Check c = check_field(f)) return c;
  }
  std::vector<std::string_view> lengths = values_of(head, "Content-Length");
  if (Check c = check_content_length(lengths)) return c;
  return check_transfer_encoding(head, values_of(head, "Transfer-Encoding"), !lengths.empty());
}

std::optional<FramingError> check_head_layout(const HeadLayout& l) {
  if (Check c = check_request_line_layout(l)) return c;
  size_t size = l.buffer.size();
  // A folded field (obs-fold) is copied elsewhere by libmicrohttpd, out of
  // the head's order: its gaps say nothing, so this comes first.
  size_t line_start = l.version_end;
  for (const HeadLayout::Field& f : l.fields) {
    bool in_order = f.name_at > line_start && f.name_at < f.value_at && f.value_at <= f.value_end &&
                    f.value_end <= size;
    if (!in_order) {
      return error(400, FramingProblem::kBadHeader,
                   "a header line continues the one before it (obs-fold, RFC 9112 5.2)");
    }
    line_start = f.value_end;
  }
  size_t end = l.version_end;
  std::string line = "request line";
  for (const HeadLayout::Field& f : l.fields) {
    if (Check c = check_line_end(l.buffer, end, f.name_at, line)) return c;
    end = f.value_end;
    line = "header line of " + std::string(f.name);
  }
  // The last line's end and the empty line's: CRLF CRLF.
  size_t gap = size - end;
  if (gap > 4 || hides_bytes(l.buffer, end, size)) {
    return error(400, FramingProblem::kNulByte, "a NUL byte in or after the " + line);
  }
  if (gap < 4) {
    return error(400, FramingProblem::kBareLf,
                 "the " + line + " or the empty line after it ends with a bare LF, not CRLF");
  }
  return std::nullopt;
}

}  // namespace vend::agent
