// vend-agent --trusted-proxy with the real binary: behind a trusted reverse
// proxy (the test's own connections, from 127.0.0.1) two customers with
// different X-Forwarded-For addresses are two clients (two rate buckets);
// without the option the same header is ignored and they are one; a
// malformed header from a trusted proxy is 400 naming the problem, counted
// in /metrics and logged once per proxy.
//
// Orders name a machine the agent does not know: the client limit is
// checked first (429), an order it lets through is answered 404. The
// machine limit is off, so only the client bucket decides.
#include <doctest/doctest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "raw_socket.hpp"
#include "test_support.hpp"

namespace vend::agent {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

// vend-agent on a real mosquitto, a client bucket of 2 refilled at 1/s,
// with `extra` options.
class Agent {
 public:
  explicit Agent(const std::vector<std::string>& extra) : port_(test::free_port()) {
    std::vector<std::string> argv = {test::binary_path("cloud-agent/vend-agent"),
                                     "--http",
                                     "127.0.0.1:" + std::to_string(port_),
                                     "--mqtt",
                                     broker_.url(),
                                     "--db",
                                     dir_.file("agent.db"),
                                     "--operator-token-file",
                                     dir_.file("operator.token"),
                                     "--gateway-secret-file",
                                     dir_.file("gateway.secret"),
                                     "--machine-rate-per-s",
                                     "0",
                                     "--client-rate-per-s",
                                     "1",
                                     "--client-burst",
                                     "2"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_.emplace(argv, dir_.file("agent.log"));
    REQUIRE_MESSAGE(test::wait_for_port(port_, 10s), log());
  }
  std::string log() const { return test::read_file(dir_.file("agent.log")); }

  struct Answer {
    int status = 0;
    Json body;
  };
  // POST /v1/orders with `headers` (each "Name: value").
  Answer order(const std::vector<std::string>& headers) {
    std::string body = R"({"device":"vm-nowhere","slot":1})";
    std::string raw =
        "POST /v1/orders HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        "Content-Type: application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n";
    for (const auto& h : headers) raw += h + "\r\n";
    return parse(exchange(raw + "\r\n" + body));
  }
  // One customer's order as the proxy forwards it.
  int order_from(const std::string& address) {
    return order({"X-Forwarded-For: " + address}).status;
  }
  std::string metrics() {
    std::string raw = exchange("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    return raw.substr(raw.find("\r\n\r\n") + 4);
  }

 private:
  std::string exchange(const std::string& raw) {
    test::RawSocket c(port_);
    c.send(raw);
    return c.read_until_close();
  }
  static Answer parse(const std::string& response) {
    REQUIRE_MESSAGE(response.rfind("HTTP/1.1 ", 0) == 0, response);
    Answer a;
    a.status = std::stoi(response.substr(9, 3));
    size_t end = response.find("\r\n\r\n");
    REQUIRE(end != std::string::npos);
    a.body = Json::parse(response.substr(end + 4));
    return a;
  }

  test::TempDir dir_;
  test::MosquittoServer broker_;
  int port_;
  std::optional<test::Child> child_;
};

size_t lines_with(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("behind a trusted proxy, two customers are two clients; a bad header is 400") {
  Agent agent({"--trusted-proxy", "127.0.0.1,::1"});
  CHECK(agent.order_from("198.51.100.1") == 404);
  CHECK(agent.order_from("198.51.100.1") == 404);
  Agent::Answer over = agent.order({"X-Forwarded-For: 198.51.100.1"});
  CHECK(over.status == 429);
  CHECK(over.body["error"]["limit"] == "client");
  // Another customer through the same proxy: a bucket of its own. What a
  // client writes left of its address changes nothing.
  CHECK(agent.order_from("203.0.113.5, 198.51.100.2") == 404);
  CHECK(agent.order_from("198.51.100.2") == 404);
  CHECK(agent.order_from("198.51.100.2") == 429);
  CHECK(agent.order_from("2001:db8::42") == 404);

  // The proxy is misconfigured: refused, named, counted, logged once.
  for (int i = 0; i < 3; ++i) {
    Agent::Answer bad = agent.order({"X-Forwarded-For: 198.51.100.3:5555"});
    CHECK(bad.status == 400);
    CHECK(bad.body["error"]["code"] == "bad_request");
    CHECK(bad.body["error"]["message"] ==
          "header 'X-Forwarded-For' from trusted proxy 127.0.0.1: '198.51.100.3:5555' is not an "
          "IP address");
  }
  CHECK(agent.metrics().find("vend_http_bad_forwarded_for_total 3\n") != std::string::npos);
  CHECK(lines_with(agent.log(), "refused: header 'X-Forwarded-For'") == 1);
}

TEST_CASE("without --trusted-proxy the header is ignored: every customer is the peer") {
  Agent agent({});
  CHECK(agent.order_from("198.51.100.1") == 404);
  CHECK(agent.order_from("198.51.100.2") == 404);
  CHECK(agent.order_from("198.51.100.3") == 429);               // one bucket: addr:127.0.0.1
  CHECK(agent.order({"X-Forwarded-For: junk"}).status == 429);  // ignored, not an error
  CHECK(agent.metrics().find("vend_http_bad_forwarded_for_total 0\n") != std::string::npos);
}

TEST_CASE("a peer outside --trusted-proxy is not trusted either") {
  Agent agent({"--trusted-proxy", "10.0.0.0/8"});
  CHECK(agent.order_from("198.51.100.1") == 404);
  CHECK(agent.order_from("198.51.100.2") == 404);
  CHECK(agent.order_from("198.51.100.3") == 429);
  CHECK(agent.order({"X-Forwarded-For: junk"}).status == 429);
}

}  // namespace vend::agent
