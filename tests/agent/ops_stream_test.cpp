// The console's event stream: OpsHub behind a real HttpServer on loopback,
// read by a real client. Events arrive in order; a slow subscriber loses
// its oldest events and gets a resync, never blocking the publisher; the
// subscriber cap; heartbeats; many open streams hold no thread; stop()
// ends open streams; the agent's broker connection in the hello and as
// `agent` events.
#include "http/ops_stream.hpp"

#include <dirent.h>
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http/http_server.hpp"
#include "sse_client.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"
#include "vend/topics.hpp"

namespace vend::agent {
namespace {

using std::chrono::milliseconds;
using test_sse::SseClient;

size_t thread_count() {
  size_t n = 0;
  DIR* d = ::opendir("/proc/self/task");
  REQUIRE(d != nullptr);
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

// An HttpServer whose every request is a stream of `hub` (503 beyond its cap).
class StreamServer {
 public:
  explicit StreamServer(OpsHubOptions options, HttpServerLimits limits = {})
      : hub(options, clock_) {
    server_ = std::make_unique<HttpServer>(
        limits,
        [this](HttpRequest&&, HttpResponder responder) {
          auto stream = hub.subscribe();
          if (!stream.ok()) {
            responder.complete(
                HttpReply{503, limit_error_body("unavailable", stream.error().message, "")});
            return;
          }
          HttpReply reply{200, "", "text/event-stream"};
          reply.stream = *stream;
          responder.complete(std::move(reply));
        },
        clock_, log_);
    auto port = server_->bind("127.0.0.1", 0);
    REQUIRE(port.ok());
    port_ = *port;
    REQUIRE(server_->start().ok());
  }
  ~StreamServer() { server_->stop(); }
  int port() const { return port_; }
  HttpServer& server() { return *server_; }
  // Waits until `n` streams are subscribed (the handler ran).
  void wait_subscribers(size_t n) {
    for (int i = 0; i < 500 && hub.stats().subscribers != n; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    REQUIRE(hub.stats().subscribers == n);
  }

 private:
  SystemClock clock_;
  MemoryLogger log_;

 public:
  OpsHub hub;

 private:
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

Message device_status(const std::string& device, int n) {
  return Message{topics::ops_device(device),
                 "{\"device\":\"" + device + "\",\"n\":" + std::to_string(n) + "}", 1, true};
}

TEST_CASE("a real client reads the hello and the ops events in order, as SSE frames") {
  StreamServer s(OpsHubOptions{});
  SseClient c(s.port(), "/v1/ops/stream", "");
  REQUIRE(c.wait_for("event: hello"));
  CHECK(c.status() == 200);
  CHECK(c.text().find("Content-Type: text/event-stream") != std::string::npos);
  CHECK(c.text().find("Cache-Control: no-cache") != std::string::npos);
  s.wait_subscribers(1);
  s.hub.publish(device_status("vm-1", 1));
  s.hub.publish(Message{topics::ops_orders(), R"({"events":[1]})", 0, false});
  s.hub.publish(Message{topics::ops_alerts(), R"({"code":"x"})", 1, false});
  s.hub.publish(Message{"vend/v1/devices/vm-1/cmd", "not an ops topic", 1, false});
  s.hub.publish(Message{topics::ops_fleet(), R"({"devices":1})", 1, true});
  REQUIRE(c.wait_for("event: fleet"));
  const std::string& t = c.text();
  size_t device = t.find("event: device\ndata: {\"device\":\"vm-1\",\"n\":1}\n\n");
  size_t orders = t.find("event: orders\ndata: {\"events\":[1]}\n\n");
  size_t alert = t.find("event: alert\ndata: {\"code\":\"x\"}\n\n");
  size_t fleet = t.find("event: fleet\ndata: {\"devices\":1}\n\n");
  REQUIRE(device != std::string::npos);
  CHECK(device < orders);
  CHECK(orders < alert);
  CHECK(alert < fleet);
  CHECK(t.find("not an ops topic") == std::string::npos);
  CHECK(t.find("id: 1\n") != std::string::npos);
  CHECK(s.hub.stats().events_total == 4);
}

TEST_CASE("the broker connection: in the hello, and an agent event on each change, in order") {
  StreamServer s(OpsHubOptions{});
  SseClient before(s.port(), "/v1/ops/stream", "");
  REQUIRE(before.wait_for("event: hello"));
  // Down until the shell says otherwise (the agent starts disconnected).
  REQUIRE(before.wait_for("\"broker_connected\":false}\n\n"));
  s.wait_subscribers(1);
  s.hub.set_broker_connected(true);
  REQUIRE(before.wait_for("event: agent\ndata: {\"v\":1,\"broker_connected\":true}\n\n"));
  s.hub.set_broker_connected(true);  // no change: no event
  s.hub.publish(device_status("vm-1", 1));
  s.hub.set_broker_connected(false);
  REQUIRE(before.wait_for("event: agent\ndata: {\"v\":1,\"broker_connected\":false}\n\n"));
  const std::string& t = before.text();
  size_t up = t.find("\"broker_connected\":true}");
  size_t device = t.find("event: device");
  size_t down = t.find("event: agent\ndata: {\"v\":1,\"broker_connected\":false}");
  CHECK(up < device);
  CHECK(device < down);
  CHECK(t.find("broker_connected\":true", up + 20) == std::string::npos);  // said once
  CHECK(s.hub.stats().events_total == 1);  // agent events are not ops events

  s.hub.set_broker_connected(true);
  SseClient after(s.port(), "/v1/ops/stream", "");
  REQUIRE(after.wait_for("event: hello"));
  REQUIRE(after.wait_for("\"broker_connected\":true}\n\n"));
  CHECK(after.text().find("event: agent") == std::string::npos);
}

TEST_CASE(
    "a slow subscriber loses its oldest events and gets a resync; the publisher never waits") {
  OpsHubOptions o;
  o.queue_events = 8;
  StreamServer s(o);
  SseClient slow(s.port(), "/v1/ops/stream", "", 4096);  // reads nothing for a while
  SseClient fast(s.port(), "/v1/ops/stream", "");
  s.wait_subscribers(2);
  std::string big(32 * 1024, 'x');
  auto start = std::chrono::steady_clock::now();
  constexpr int kEvents = 400;  // ~13 MB: far more than the socket buffers hold
  for (int i = 0; i < kEvents; ++i) {
    s.hub.publish(Message{topics::ops_orders(),
                          "{\"i\":" + std::to_string(i) + ",\"pad\":\"" + big + "\"}", 0, false});
    if (i % 20 == 0) fast.drain(milliseconds(1));
  }
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(took < std::chrono::seconds(2));  // 400 publishes, none blocked on the slow reader
  std::string last = "{\"i\":" + std::to_string(kEvents - 1) + ",";
  REQUIRE(slow.wait_for(last, milliseconds(10000)));  // now it reads: the newest is there
  REQUIRE(fast.wait_for(last, milliseconds(10000)));
  CHECK(slow.text().find("event: resync\ndata: {\"v\":1,\"dropped\":") != std::string::npos);
  OpsHubStats st = s.hub.stats();
  CHECK(st.resyncs_total >= 1);
  CHECK(st.dropped_total > 0);
  std::string metrics = s.hub.render_metrics();
  CHECK(metrics.find("vend_ops_stream_resyncs_total " + std::to_string(st.resyncs_total)) !=
        std::string::npos);
}

TEST_CASE(
    "max_subscribers: the stream beyond it is refused, counted; a closed one frees its place") {
  OpsHubOptions o;
  o.max_subscribers = 2;
  StreamServer s(o);
  {
    SseClient a(s.port(), "/v1/ops/stream", "");
    SseClient b(s.port(), "/v1/ops/stream", "");
    s.wait_subscribers(2);
    SseClient c(s.port(), "/v1/ops/stream", "");
    REQUIRE(c.wait_for("\r\n\r\n"));
    CHECK(c.status() == 503);
    CHECK(c.text().find("too many event streams open (at most 2)") != std::string::npos);
    CHECK(s.hub.stats().refused_total == 1);
    CHECK(s.hub.render_metrics().find("vend_ops_stream_refused_total 1") != std::string::npos);
  }
  // The clients left; MHD notices at the next write (a heartbeat or event).
  for (int i = 0; i < 300 && s.hub.stats().subscribers != 0; ++i) {
    s.hub.publish(device_status("vm-1", i));
    std::this_thread::sleep_for(milliseconds(10));
  }
  CHECK(s.hub.stats().subscribers == 0);
  SseClient d(s.port(), "/v1/ops/stream", "");
  REQUIRE(d.wait_for("event: hello"));
}

TEST_CASE("heartbeat comment lines while no event comes") {
  OpsHubOptions o;
  o.heartbeat_ms = 100;
  StreamServer s(o);
  SseClient c(s.port(), "/v1/ops/stream", "");
  REQUIRE(c.wait_for("event: hello"));
  REQUIRE(c.wait_for(": keep-alive\n\n", milliseconds(3000)));
}

TEST_CASE("300 open streams hold no thread: the thread count stays fixed, all get the event") {
  OpsHubOptions o;
  o.max_subscribers = 400;
  StreamServer s(o);
  SseClient first(s.port(), "/v1/ops/stream", "");
  s.wait_subscribers(1);
  size_t before = thread_count();
  std::vector<std::unique_ptr<SseClient>> clients;
  for (int i = 0; i < 300; ++i) {
    clients.push_back(std::make_unique<SseClient>(s.port(), "/v1/ops/stream", ""));
  }
  s.wait_subscribers(301);
  CHECK(thread_count() == before);
  CHECK(s.server().stats().open_streams == 301);
  s.hub.publish(device_status("vm-7", 7));
  for (auto& c : clients) REQUIRE(c->wait_for("\"vm-7\""));
  CHECK(thread_count() == before);
  // What the core thread pays per event with 301 subscribers.
  constexpr int kEvents = 1000;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kEvents; ++i) s.hub.publish(device_status("vm-8", i));
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                  start)
                .count();
  MESSAGE("publish to 301 subscribers: " << us / kEvents << " us per event");
  CHECK(us / kEvents < 5'000);
  for (auto& c : clients) REQUIRE(c->wait_for("\"n\":" + std::to_string(kEvents - 1) + "}"));
  CHECK(thread_count() == before);
}

TEST_CASE("stop() ends open streams at once") {
  auto s = std::make_unique<StreamServer>(OpsHubOptions{});
  SseClient a(s->port(), "/v1/ops/stream", "");
  SseClient b(s->port(), "/v1/ops/stream", "");
  s->wait_subscribers(2);
  REQUIRE(a.wait_for("event: hello"));
  auto start = std::chrono::steady_clock::now();
  s->server().stop();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
  a.drain(milliseconds(500));
  CHECK(a.closed());
  CHECK(s->hub.stats().subscribers == 0);
}

}  // namespace
}  // namespace vend::agent
