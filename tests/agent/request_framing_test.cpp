// check_request_head() and check_head_layout() alone: each rule of
// request_framing.hpp, its status, problem and message, and the heads they
// must keep accepting. The layouts come from raw bytes through a model of
// libmicrohttpd's in-place parse (tests/support/mhd_head_model.hpp).
#include "http/request_framing.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "mhd_head_model.hpp"

namespace vend::agent {
namespace {

RequestHead head(std::string_view target, std::vector<HeaderField> fields = {},
                 std::string_view version = "HTTP/1.1") {
  RequestHead h;
  h.version = version;
  h.target = target;
  h.fields = std::move(fields);
  return h;
}

// The refusal of `h`; fails the test when it is accepted.
FramingError refusal(const RequestHead& h) {
  auto e = check_request_head(h, 4096);
  REQUIRE_MESSAGE(e.has_value(), "accepted: " << h.target);
  return *e;
}

void expect(const RequestHead& h, int status, FramingProblem problem) {
  FramingError e = refusal(h);
  INFO(e.message);
  CHECK(e.status == status);
  CHECK(std::string(framing_problem_name(e.problem)) == framing_problem_name(problem));
  CHECK_FALSE(e.message.empty());
}

TEST_CASE("framing: well-formed heads pass") {
  CHECK_FALSE(check_request_head(head("/v1/orders/ord-1?wait_ms=100&x=a%20b"), 4096));
  CHECK_FALSE(check_request_head(head("/v1/orders", {{"Content-Length", "26"}}), 4096));
  CHECK_FALSE(check_request_head(head("/v1/orders", {{"transfer-encoding", "Chunked"}}), 4096));
  CHECK_FALSE(
      check_request_head(head("/x?note=line%0Abreak"), 4096));  // control escapes in a query
  CHECK_FALSE(check_request_head(head("/x", {{"User-Agent", "a\tb \xc3\xa9"}}), 4096));
  CHECK_FALSE(check_request_head(head(std::string(4096, 'a')), 4096));
}

TEST_CASE("framing: Content-Length") {
  expect(head("/", {{"Content-Length", "26"}, {"Content-Length", "5"}}), 400,
         FramingProblem::kDuplicateContentLength);
  expect(head("/", {{"Content-Length", "5"}, {"content-length", "5"}}), 400,
         FramingProblem::kDuplicateContentLength);
  expect(head("/", {{"Content-Length", "5, 5"}}), 400, FramingProblem::kBadContentLength);
  expect(head("/", {{"Content-Length", "-1"}}), 400, FramingProblem::kBadContentLength);
  expect(head("/", {{"Content-Length", std::string(20, '9')}}), 400,
         FramingProblem::kBadContentLength);
  CHECK(refusal(head("/", {{"Content-Length", "26"}, {"Content-Length", "5"}})).message ==
        "Content-Length is given 2 times (26, 5)");
}

TEST_CASE("framing: Transfer-Encoding") {
  auto te = [](std::string_view v) { return head("/", {{"Transfer-Encoding", v}}); };
  expect(head("/", {{"Content-Length", "4"}, {"Transfer-Encoding", "chunked"}}), 400,
         FramingProblem::kContentLengthWithTransferEncoding);
  expect(te("xchunked"), 400, FramingProblem::kBadTransferEncoding);
  expect(te("chunked, identity"), 400, FramingProblem::kBadTransferEncoding);
  expect(te("chunked, chunked"), 400, FramingProblem::kBadTransferEncoding);
  expect(te("chunked,"), 400, FramingProblem::kBadTransferEncoding);
  expect(te(""), 400, FramingProblem::kBadTransferEncoding);
  expect(te("gzip, chunked"), 501, FramingProblem::kUnsupportedTransferCoding);
  expect(head("/", {{"Transfer-Encoding", "chunked"}, {"Transfer-Encoding", "chunked"}}), 400,
         FramingProblem::kBadTransferEncoding);
  expect(head("/", {{"Transfer-Encoding", "chunked"}}, "HTTP/1.0"), 400,
         FramingProblem::kBadTransferEncoding);
}

TEST_CASE("framing: the request target") {
  expect(head("/console/index.html%00.js"), 400, FramingProblem::kBadTarget);
  expect(head("/v1/orders/ord-1%00junk"), 400, FramingProblem::kBadTarget);
  expect(head("/x?y=%00"), 400, FramingProblem::kBadTarget);
  expect(head("/a%0Ab"), 400, FramingProblem::kBadTarget);
  expect(head("/a%7fb"), 400, FramingProblem::kBadTarget);
  expect(head("/a\x01"), 400, FramingProblem::kBadTarget);
  expect(head("/a b"), 400, FramingProblem::kBadTarget);
  expect(head("/50%-off"), 400, FramingProblem::kBadTarget);
  expect(head("/a%4"), 400, FramingProblem::kBadTarget);
  expect(head(std::string(4097, 'a')), 414, FramingProblem::kTargetTooLong);
  CHECK(refusal(head("/console/index.html%00.js")).message ==
        "the request target encodes the control byte 0x00 at 19");
}

TEST_CASE("framing: header fields") {
  expect(head("/", {{"X-Probe ", "1"}}), 400, FramingProblem::kBadHeader);
  expect(head("/", {{"X-Probe", "a\rb"}}), 400, FramingProblem::kBadHeader);
  expect(head("/", {{"", "a"}}), 400, FramingProblem::kBadHeader);
  expect(head("/", {{"X(", "a"}}), 400, FramingProblem::kBadHeader);
}

TEST_CASE("framing: the version") {
  CHECK_FALSE(check_request_head(head("/", {}, "HTTP/1.0"), 4096));
  expect(head("/", {}, ""), 400, FramingProblem::kBadRequestLine);
  expect(head("/", {}, "HTTP/2.0"), 400, FramingProblem::kBadRequestLine);
  expect(head("/", {}, "http/1.1"), 400, FramingProblem::kBadRequestLine);
  CHECK(refusal(head("/", {}, "HTTP/1.1x")).message ==
        "the request line's version is 'HTTP/1.1x', not HTTP/1.x");
}

// check_head_layout() of `raw` as libmicrohttpd parses it; fails the test when
// MHD would refuse it itself.
std::optional<FramingError> layout_check(std::string_view raw) {
  std::optional<test::MhdHeadModel> m = test::MhdHeadModel::parse(raw);
  REQUIRE_MESSAGE(m.has_value(), "libmicrohttpd refuses it itself");
  return check_head_layout(m->layout());
}

void expect_layout(std::string_view raw, FramingProblem problem, const std::string& message) {
  std::optional<FramingError> e = layout_check(raw);
  REQUIRE_MESSAGE(e.has_value(), "accepted");
  CHECK(e->status == 400);
  CHECK(std::string(framing_problem_name(e->problem)) == framing_problem_name(problem));
  CHECK(e->message == message);
}

using namespace std::string_view_literals;

TEST_CASE("framing: heads with CRLF line ends and no NUL pass the layout check") {
  CHECK_FALSE(layout_check("GET /healthz HTTP/1.1\r\n\r\n"));
  CHECK_FALSE(layout_check("GET /healthz?a=b HTTP/1.0\r\nHost: x\r\n\r\n"));
  CHECK_FALSE(
      layout_check("POST /v1/orders HTTP/1.1\r\nHost: x\r\nX-Empty:\r\n"
                   "X-Spaces:  a b \t\r\nContent-Length: 2\r\n\r\n{}"));
  // The head ends at the empty line: what follows is the body's.
  CHECK_FALSE(layout_check("POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\n\n\0\0\n"sv));
  // A NUL right before a line's LF stands where its CR would: nothing hidden.
  CHECK_FALSE(layout_check("GET / HTTP/1.1\r\nX-A: a\0\n\r\n"sv));
}

TEST_CASE("framing: a raw NUL byte in the request line") {
  expect_layout("GET /healthz\0junk HTTP/1.1\r\nHost: x\r\n\r\n"sv, FramingProblem::kNulByte,
                "a NUL byte in the request target at 8");
  expect_layout("GET /healthz\0 HTTP/1.1\r\n\r\n"sv, FramingProblem::kNulByte,
                "a NUL byte in the request target at 8");
  expect_layout("GE\0T /healthz HTTP/1.1\r\n\r\n"sv, FramingProblem::kNulByte,
                "a NUL byte in the request line's method");
  expect_layout("GET  /healthz HTTP/1.1\r\n\r\n", FramingProblem::kBadRequestLine,
                "more than one space between the method and the target");
}

TEST_CASE("framing: a raw NUL byte in a header line") {
  expect_layout("GET / HTTP/1.1\r\nX-A: a\0b\r\nHost: x\r\n\r\n"sv, FramingProblem::kNulByte,
                "a NUL byte in the header line of X-A");
  expect_layout("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n"sv, FramingProblem::kNulByte,
                "a NUL byte in or after the header line of X-A");
  expect_layout("GET / HTTP/1.1\r\nX-A:\0 a\r\nHost: x\r\n\r\n"sv, FramingProblem::kNulByte,
                "a NUL byte in the header line of X-A");
  // A line starting with NUL ends the head for MHD: the field after it is hidden.
  expect_layout("GET / HTTP/1.1\r\nHost: x\r\n\0Transfer-Encoding: chunked\r\n\r\n"sv,
                FramingProblem::kNulByte, "a NUL byte in or after the header line of Host");
  expect_layout("GET / HTTP/1.1\r\n\0Host: x\r\n\r\n"sv, FramingProblem::kNulByte,
                "a NUL byte in or after the request line");
  // Hidden behind a NUL with bare LFs, the same length as CRLF CRLF.
  expect_layout("GET / HTTP/1.1\r\nX-A: a\0b\n\n"sv, FramingProblem::kNulByte,
                "a NUL byte in or after the header line of X-A");
}

TEST_CASE("framing: bare LF line ends") {
  expect_layout("GET /healthz HTTP/1.1\nHost: x\n\n", FramingProblem::kBareLf,
                "the request line ends with a bare LF, not CRLF");
  expect_layout("GET /healthz HTTP/1.1\r\nHost: x\nX-A: b\r\n\r\n", FramingProblem::kBareLf,
                "the header line of Host ends with a bare LF, not CRLF");
  expect_layout("GET /healthz HTTP/1.1\r\nHost: x\r\n\n", FramingProblem::kBareLf,
                "the header line of Host or the empty line after it ends with a bare LF, not CRLF");
  expect_layout("GET /healthz HTTP/1.1\n\r\n", FramingProblem::kBareLf,
                "the request line or the empty line after it ends with a bare LF, not CRLF");
}

TEST_CASE("framing: a folded field (obs-fold)") {
  expect_layout("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n  b\r\nX-B: c\r\n\r\n",
                FramingProblem::kBadHeader,
                "a header line continues the one before it (obs-fold, RFC 9112 5.2)");
}

TEST_CASE("framing: a layout out of order is refused without reading past the head") {
  HeadLayout l;
  l.buffer = "GET";
  l.method_end = 3;
  l.target_at = 4;
  l.target_end = 6;
  l.version_at = 7;
  l.version_end = 15;  // past the buffer
  std::optional<FramingError> e = check_head_layout(l);
  REQUIRE(e.has_value());
  CHECK(e->problem == FramingProblem::kBadRequestLine);
}

TEST_CASE("framing: every problem has a distinct name") {
  std::vector<std::string> names;
  for (FramingProblem p : all_framing_problems()) {
    std::string n = framing_problem_name(p);
    for (const std::string& seen : names) CHECK(seen != n);
    names.push_back(n);
  }
  CHECK(names.size() == kFramingProblemCount);
}

}  // namespace
}  // namespace vend::agent
