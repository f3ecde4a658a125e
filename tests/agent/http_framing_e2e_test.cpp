// Request framing (RFC 9112) against the real vend-agent with its shipped
// HTTP defaults, over raw sockets, as an attacker would send it: every shape
// of docs/agent.md's "Request framing" list is answered once with its status
// and a JSON error naming the problem, and the connection is closed, so no
// second request hidden in a body is ever answered. The shapes refused
// before (by libmicrohttpd itself) stay refused. Counted in /metrics, logged
// once per source.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "raw_socket.hpp"
#include "test_support.hpp"

namespace vend::agent {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
using Steady = std::chrono::steady_clock;

using RawClient = test::RawSocket;

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The agent with its shipped HTTP limits, on a real mosquitto.
class Agent {
 public:
  Agent()
      : port_(test::free_port()),
        child_({test::binary_path("cloud-agent/vend-agent"), "--http",
                "127.0.0.1:" + std::to_string(port_), "--mqtt", broker_.url(), "--db",
                dir_.file("agent.db"), "--operator-token-file", dir_.file("operator.token"),
                "--gateway-secret-file", dir_.file("gateway.secret")},
               dir_.file("agent.log")) {
    REQUIRE_MESSAGE(test::wait_for_port(port_, 10s), log());
  }
  int port() const { return port_; }
  std::string log() const { return test::read_file(dir_.file("agent.log")); }
  // Sends `raw` on a new connection (ending our side when `end_side`) and
  // returns all the agent answered before it closed.
  std::string exchange(const std::string& raw, bool end_side = false) {
    RawClient c(port_);
    c.send(raw);
    if (end_side) c.end_our_side();
    std::string out = c.read_until_close();
    CHECK_MESSAGE(c.closed(), "the connection stays open after: " << out);
    return out;
  }
  std::string metrics() {
    RawClient c(port_);
    c.send("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    return c.read_until_close();
  }

 private:
  test::TempDir dir_;
  test::MosquittoServer broker_;
  int port_;
  test::Child child_;
};

int status_of(const std::string& response) {
  REQUIRE_MESSAGE(response.rfind("HTTP/1.1 ", 0) == 0, response);
  return std::stoi(response.substr(9, 3));
}

// Asserts exactly one answer: `status` with {"error":{"code":problem}}, then close.
void expect_refused(const std::string& response, int status, const std::string& problem) {
  INFO(response);
  CHECK(count_of(response, "HTTP/1.1 ") == 1);
  CHECK(status_of(response) == status);
  CHECK(response.find("Connection: close") != std::string::npos);
  size_t end = response.find("\r\n\r\n");
  REQUIRE(end != std::string::npos);
  Json j = Json::parse(response.substr(end + 4));
  CHECK(j["error"]["code"] == problem);
  CHECK_FALSE(j["error"]["message"].get<std::string>().empty());
}

std::string post(const std::string& path, const std::string& fields, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         fields + "\r\n" + body;
}

const std::string kOrder = R"({"machine":"vm1","slot":1})";  // 26 bytes: chunk size 1a
const std::string kHidden = "GET /v1/devices HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

TEST_CASE("the issue's shapes: two Content-Lengths, CL with TE, odd codings, %00 in the path") {
  Agent agent;
  SUBCASE("two different Content-Length headers: 400, closed, no route ran") {
    std::string cl = "Content-Length: 26\r\nContent-Length: 5\r\n";
    expect_refused(agent.exchange(post("/v1/orders", cl, kOrder)), 400, "duplicate_content_length");
  }
  SUBCASE("the same Content-Length twice: 400 too") {
    std::string cl = "Content-Length: 26\r\nContent-Length: 26\r\n";
    expect_refused(agent.exchange(post("/v1/orders", cl, kOrder)), 400, "duplicate_content_length");
  }
  SUBCASE("CL.TE with a second request hidden in the body: one answer, then close") {
    std::string chunked = "0\r\n\r\n" + kHidden;
    std::string fields =
        "Content-Length: " + std::to_string(chunked.size()) + "\r\nTransfer-Encoding: chunked\r\n";
    expect_refused(agent.exchange(post("/v1/orders", fields, chunked)), 400,
                   "content_length_with_transfer_encoding");
  }
  SUBCASE("TE.CL the other way round") {
    std::string fields = "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n";
    expect_refused(agent.exchange(post("/v1/orders", fields, "5c\r\n" + kHidden + "\r\n0\r\n\r\n")),
                   400, "content_length_with_transfer_encoding");
  }
  SUBCASE("Transfer-Encoding: xchunked") {
    expect_refused(agent.exchange(post("/v1/orders", "Transfer-Encoding: xchunked\r\n",
                                       "1a\r\n" + kOrder + "\r\n0\r\n\r\n")),
                   400, "bad_transfer_encoding");
  }
  SUBCASE("Transfer-Encoding: chunked, identity") {
    expect_refused(agent.exchange(post("/v1/orders", "Transfer-Encoding: chunked, identity\r\n",
                                       "1a\r\n" + kOrder + "\r\n0\r\n\r\n")),
                   400, "bad_transfer_encoding");
  }
  SUBCASE("Transfer-Encoding: gzip, chunked: 501, the agent decodes no gzip") {
    expect_refused(agent.exchange(post("/v1/orders", "Transfer-Encoding: gzip, chunked\r\n",
                                       "1a\r\n" + kOrder + "\r\n0\r\n\r\n")),
                   501, "unsupported_transfer_coding");
  }
  SUBCASE("a chunk larger than the data, then the client ends its side") {
    expect_refused(
        agent.exchange(post("/v1/orders", "Transfer-Encoding: chunked\r\n", "100\r\nhello"), true),
        400, "incomplete_request");
  }
  SUBCASE("a body shorter than its Content-Length, then the client ends its side") {
    expect_refused(
        agent.exchange(post("/v1/orders", "Content-Length: 26\r\n", kOrder.substr(0, 10)), true),
        400, "incomplete_request");
  }
  SUBCASE("%00 in a console path") {
    expect_refused(agent.exchange("GET /console/index.html%00.js HTTP/1.1\r\nHost: x\r\n\r\n"), 400,
                   "bad_target");
  }
  SUBCASE("%00 after an order id") {
    expect_refused(agent.exchange("GET /v1/orders/ord-1%00junk HTTP/1.1\r\nHost: x\r\n\r\n"), 400,
                   "bad_target");
  }
}

TEST_CASE("the other framing errors: stacked codings, headers, targets") {
  Agent agent;
  const std::string body = "1a\r\n" + kOrder + "\r\n0\r\n\r\n";
  SUBCASE("Transfer-Encoding twice") {
    std::string te = "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n";
    expect_refused(agent.exchange(post("/v1/orders", te, body)), 400, "bad_transfer_encoding");
  }
  SUBCASE("chunked, chunked") {
    expect_refused(
        agent.exchange(post("/v1/orders", "Transfer-Encoding: chunked, chunked\r\n", body)), 400,
        "bad_transfer_encoding");
  }
  SUBCASE("an empty list element beside chunked") {
    expect_refused(agent.exchange(post("/v1/orders", "Transfer-Encoding: chunked,\r\n", body)), 400,
                   "bad_transfer_encoding");
  }
  SUBCASE("Transfer-Encoding in HTTP/1.0") {
    std::string raw =
        "POST /v1/orders HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body;
    expect_refused(agent.exchange(raw), 400, "bad_transfer_encoding");
  }
  SUBCASE("whitespace between a field name and the colon") {
    expect_refused(agent.exchange("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Probe : 1\r\n\r\n"), 400,
                   "bad_header");
  }
  SUBCASE("a bare CR in a field value") {
    expect_refused(agent.exchange("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Probe: a\rb\r\n\r\n"), 400,
                   "bad_header");
  }
  SUBCASE("a raw control byte in the target") {
    expect_refused(agent.exchange("GET /healthz\x01 HTTP/1.1\r\nHost: x\r\n\r\n"), 400,
                   "bad_target");
  }
  SUBCASE("%0A in the path") {
    expect_refused(agent.exchange("GET /v1/orders/a%0Ab HTTP/1.1\r\nHost: x\r\n\r\n"), 400,
                   "bad_target");
  }
  SUBCASE("%00 in the query") {
    expect_refused(agent.exchange("GET /v1/fleet?x=a%00b HTTP/1.1\r\nHost: x\r\n\r\n"), 400,
                   "bad_target");
  }
  SUBCASE("a lone %") {
    expect_refused(agent.exchange("GET /v1/orders/50%-off HTTP/1.1\r\nHost: x\r\n\r\n"), 400,
                   "bad_target");
  }
  SUBCASE("a target over 4096 bytes: 414 naming max_target_bytes") {
    std::string raw = "GET /" + std::string(5000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n";
    std::string out = agent.exchange(raw);
    expect_refused(out, 414, "target_too_long");
    CHECK(out.find("\"limit\":\"max_target_bytes\"") != std::string::npos);
  }
}

// What libmicrohttpd's C strings hide (it cuts a piece at a raw NUL) and the
// line ends it accepts alone (a bare LF), told by where it left each piece of
// the head (check_head_layout()). One agent for all: each answer closes.
TEST_CASE("raw NUL bytes, bare LF line ends, folded and double-spaced lines") {
  using namespace std::string_literals;
  Agent agent;
  struct Shape {
    const char* what;
    std::string raw;
    const char* problem;
  };
  const std::vector<Shape> shapes = {
      {"a raw NUL in the request target", "GET /healthz\0junk HTTP/1.1\r\nHost: x\r\n\r\n"s,
       "nul_byte"},
      {"a raw NUL in the method", "GE\0T /healthz HTTP/1.1\r\nHost: x\r\n\r\n"s, "nul_byte"},
      {"a raw NUL in the last field's value",
       "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n"s, "nul_byte"},
      {"a raw NUL in a field's value", "GET /healthz HTTP/1.1\r\nX-A: a\0b\r\nHost: x\r\n\r\n"s,
       "nul_byte"},
      {"a line starting with NUL, hiding a Transfer-Encoding",
       post("/v1/orders", "Content-Length: 26\r\n\0Transfer-Encoding: chunked\r\n"s, kOrder),
       "nul_byte"},
      {"bare LF line ends", "GET /healthz HTTP/1.1\nHost: x\n\n", "bare_lf"},
      {"one bare LF among CRLFs", "GET /healthz HTTP/1.1\r\nHost: x\nX-A: b\r\n\r\n", "bare_lf"},
      {"a bare LF ending the head", "GET /healthz HTTP/1.1\r\nHost: x\r\n\n", "bare_lf"},
      {"a folded field (obs-fold)", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n",
       "bad_header"},
      {"two spaces after the method", "GET  /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
       "bad_request_line"},
  };
  for (const Shape& shape : shapes) {
    INFO(shape.what);
    expect_refused(agent.exchange(shape.raw), 400, shape.problem);
  }
  // The same requests with CRLF and no NUL are routed.
  std::string ok =
      agent.exchange("GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: ab\r\nConnection: close\r\n\r\n");
  CHECK(status_of(ok) == 200);
  std::string metrics = agent.metrics();
  INFO(metrics);
  CHECK(metrics.find("vend_http_framing_errors_total{problem=\"nul_byte\"} 5\n") !=
        std::string::npos);
  CHECK(metrics.find("vend_http_framing_errors_total{problem=\"bare_lf\"} 3\n") !=
        std::string::npos);
  CHECK(metrics.find("vend_http_framing_errors_total{problem=\"bad_request_line\"} 1\n") !=
        std::string::npos);
  std::string log = agent.log();
  INFO(log);
  CHECK(count_of(log, "request refused (nul_byte)") == 1);
  CHECK(count_of(log, "request refused (bare_lf)") == 1);
}

// Shapes libmicrohttpd refused before this check existed: they stay refused
// (its own answer, not JSON), and are counted as refused_by_parser.
TEST_CASE("shapes refused by libmicrohttpd itself stay refused") {
  Agent agent;
  auto refused = [&](const std::string& raw, int status) {
    std::string out = agent.exchange(raw);
    INFO(out);
    CHECK(status_of(out) == status);
  };
  refused(post("/v1/orders", "Content-Length: 5x\r\n", "hello"), 400);
  refused(post("/v1/orders", "Content-Length: 5, 5\r\n", "hello"), 400);
  refused(post("/v1/orders", "Content-Length: 99999999999999999999999\r\n", "hello"), 413);
  refused(post("/v1/orders", "Transfer-Encoding: chunked\r\n", "fffffffffffffffff1\r\nhello\r\n"),
          413);
  std::string metrics = agent.metrics();
  CHECK_MESSAGE(metrics.find("vend_http_framing_errors_total{problem=\"refused_by_parser\"} 4\n") !=
                    std::string::npos,
                metrics);
  // A request line past libmicrohttpd's buffer: its 414 before any callback
  // of ours (not counted: the agent never sees the request).
  refused("GET /" + std::string(20'000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", 414);
}

TEST_CASE("well-framed requests still pass; refusals counted and logged once per source") {
  Agent agent;
  {
    // A chunked POST and a GET on one keep-alive connection: routed (401/404
    // are the routes' answers, not framing errors), and the connection stays open.
    RawClient c(agent.port());
    c.send(
        post("/v1/orders", "Transfer-Encoding: chunked\r\n", "1a\r\n" + kOrder + "\r\n0\r\n\r\n") +
        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    std::string out = c.read_until_close(1500ms);
    INFO(out);
    CHECK_FALSE(c.closed());
    CHECK(count_of(out, "HTTP/1.1 ") == 2);
    CHECK(out.find("Connection: close") == std::string::npos);
  }
  std::string cl = "Content-Length: 26\r\nContent-Length: 5\r\n";
  for (int i = 0; i < 3; ++i) {
    expect_refused(agent.exchange(post("/v1/orders", cl, kOrder)), 400, "duplicate_content_length");
  }
  expect_refused(agent.exchange("GET /console/index.html%00.js HTTP/1.1\r\nHost: x\r\n\r\n"), 400,
                 "bad_target");
  std::string metrics = agent.metrics();
  INFO(metrics);
  CHECK(metrics.find("vend_http_framing_errors_total{problem=\"duplicate_content_length\"} 3\n") !=
        std::string::npos);
  CHECK(metrics.find("vend_http_framing_errors_total{problem=\"bad_target\"} 1\n") !=
        std::string::npos);
  CHECK(metrics.find("vend_http_framing_errors_total{problem=\"bad_header\"} 0\n") !=
        std::string::npos);
  std::string log = agent.log();
  INFO(log);
  CHECK(count_of(log, "request refused (duplicate_content_length)") == 1);
  CHECK(count_of(log, "request refused (bad_target)") == 1);
}

}  // namespace
}  // namespace vend::agent
