// check_request_head() alone: each rule of request_framing.hpp, its status,
// problem and message, and the heads it must keep accepting.
#include "http/request_framing.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

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
