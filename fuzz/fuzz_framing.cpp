// libFuzzer target for the agent's request framing check
// (cloud-agent/http/request_framing.hpp). The input is a request head, one
// line each: "<target> <version>" first (the version defaults to HTTP/1.1),
// then "name: value" fields, split as libmicrohttpd splits them (at the
// first colon, the value's surrounding whitespace dropped). Besides the
// sanitizers' checks it asserts, independently of the checker's own code:
//  - a refusal is 400, 414 or 501 with a message, and a problem the checker
//    can report (never incomplete_request or refused_by_parser);
//  - an accepted head is framed one way only: at most one Content-Length,
//    of digits; not both Content-Length and Transfer-Encoding; at most one
//    Transfer-Encoding field, exactly "chunked";
//  - an accepted target has no control byte, no space, no %00, and fits.
// Then "GET " + the input, as raw bytes, is parsed as libmicrohttpd 0.9.75
// parses a head in place (tests/support/mhd_head_model.hpp) and checked as
// HttpServer checks it (check_head_layout(), then check_request_head()). A
// head both accept hides no byte behind a NUL (every raw NUL is followed by
// NUL, CR or LF), and, when it has no NUL, ends every line with CRLF and
// folds no field (no line after the request line starts with SP or HTAB).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/request_framing.hpp"
#include "mhd_head_model.hpp"

namespace {

using vend::agent::FramingProblem;

constexpr size_t kMaxTarget = 64;

[[noreturn]] void fail(const char* what, std::string_view input) {
  std::fprintf(stderr, "invariant broken: %s\n%.*s\n", what, static_cast<int>(input.size()),
               input.data());
  std::abort();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> lines_of(std::string_view input) {
  std::vector<std::string_view> out;
  while (!input.empty()) {
    size_t nl = input.find('\n');
    out.push_back(input.substr(0, nl));
    if (nl == std::string_view::npos) break;
    input.remove_prefix(nl + 1);
  }
  return out;
}

vend::agent::RequestHead head_of(std::string_view input) {
  vend::agent::RequestHead head;
  head.version = "HTTP/1.1";
  std::vector<std::string_view> lines = lines_of(input);
  if (lines.empty()) return head;
  std::string_view first = lines.front();
  size_t space = first.rfind(' ');
  head.target = first.substr(0, space);
  if (space != std::string_view::npos) head.version = first.substr(space + 1);
  for (size_t i = 1; i < lines.size(); ++i) {
    size_t colon = lines[i].find(':');
    if (colon == std::string_view::npos) continue;
    head.fields.push_back({lines[i].substr(0, colon), trim(lines[i].substr(colon + 1))});
  }
  return head;
}

bool caseless(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if ((a[i] | 0x20) != (b[i] | 0x20)) return false;
  }
  return true;
}

void check_accepted(const vend::agent::RequestHead& head, std::string_view input) {
  std::vector<std::string_view> lengths, codings;
  for (const auto& f : head.fields) {
    if (caseless(f.name, "Content-Length")) lengths.push_back(f.value);
    if (caseless(f.name, "Transfer-Encoding")) codings.push_back(f.value);
  }
  if (lengths.size() > 1) fail("accepted two Content-Lengths", input);
  if (!lengths.empty() && !codings.empty()) fail("accepted Content-Length with TE", input);
  for (std::string_view v : lengths) {
    if (v.empty() || v.find_first_not_of("0123456789") != std::string_view::npos) {
      fail("accepted a Content-Length that is no number", input);
    }
  }
  if (codings.size() > 1) fail("accepted two Transfer-Encoding fields", input);
  if (!codings.empty() && !caseless(codings.front(), "chunked")) {
    fail("accepted a Transfer-Encoding but chunked", input);
  }
  if (head.target.size() > kMaxTarget) fail("accepted a target too long", input);
  for (unsigned char c : head.target) {
    if (c <= 0x20 || c == 0x7f) fail("accepted a control byte in the target", input);
  }
  if (head.target.find("%00") != std::string_view::npos) fail("accepted %00", input);
}

void check_refusal(const vend::agent::FramingError& refused, std::string_view input) {
  if (refused.status != 400 && refused.status != 414 && refused.status != 501) {
    fail("unexpected status", input);
  }
  if (refused.message.empty()) fail("refusal without a message", input);
  if (refused.problem == FramingProblem::kIncompleteRequest ||
      refused.problem == FramingProblem::kRefusedByParser) {
    fail("a problem only the server reports", input);
  }
}

void check_raw_head(std::string_view input) {
  std::string raw = "GET " + std::string(input);
  std::optional<vend::test::MhdHeadModel> model = vend::test::MhdHeadModel::parse(raw);
  if (!model) return;  // libmicrohttpd's own refusal, or no head yet
  auto refused = vend::agent::check_head_layout(model->layout());
  if (!refused) refused = vend::agent::check_request_head(model->head(), kMaxTarget);
  if (refused) {
    check_refusal(*refused, input);
    return;
  }
  std::string_view head = std::string_view(raw).substr(0, model->head_size());
  for (size_t i = 0; i + 1 < head.size(); ++i) {
    char next = head[i + 1];
    if (head[i] == '\0' && next != '\0' && next != '\r' && next != '\n') {
      fail("accepted a NUL hiding a byte", input);
    }
  }
  if (head.find('\0') != std::string_view::npos) return;
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i] != '\n') continue;
    if (i == 0 || head[i - 1] != '\r') fail("accepted a bare LF", input);
    bool folded = i + 1 < head.size() && (head[i + 1] == ' ' || head[i + 1] == '\t');
    if (folded) fail("accepted a line starting with whitespace", input);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  vend::agent::RequestHead head = head_of(input);
  auto refused = vend::agent::check_request_head(head, kMaxTarget);
  if (refused) {
    check_refusal(*refused, input);
  } else {
    check_accepted(head, input);
  }
  check_raw_head(input);
  return 0;
}
