// PahoTransport against a real mosquitto started on a free loopback port. A
// missing mosquitto makes MosquittoServer throw: the test fails, never skips.
#include "vend/paho_transport.hpp"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace vend {
namespace {

using namespace std::chrono_literals;
using test::MosquittoServer;

// Collects what one transport reports; handlers run on transport threads.
class Inbox {
 public:
  void attach(Transport& transport) {
    transport.on_message([this](const Message& m) {
      std::lock_guard<std::mutex> lock(mu_);
      messages_.push_back(m);
      cv_.notify_all();
    });
    transport.on_connection([this](bool up) {
      std::lock_guard<std::mutex> lock(mu_);
      (up ? ups_ : downs_)++;
      cv_.notify_all();
    });
  }
  bool wait_ups(int n, std::chrono::milliseconds timeout) {
    return wait(timeout, [&] { return ups_ >= n; });
  }
  bool wait_downs(int n, std::chrono::milliseconds timeout) {
    return wait(timeout, [&] { return downs_ >= n; });
  }
  bool wait_count(size_t n, std::chrono::milliseconds timeout) {
    return wait(timeout, [&] { return messages_.size() >= n; });
  }
  // The first message on `topic`, if one arrives in time.
  std::optional<Message> wait_topic(const std::string& topic, std::chrono::milliseconds timeout) {
    std::optional<Message> found;
    wait(timeout, [&] {
      for (const Message& m : messages_) {
        if (m.topic == topic) found = m;
      }
      return found.has_value();
    });
    return found;
  }
  std::vector<std::string> payloads(const std::string& topic) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const Message& m : messages_) {
      if (m.topic == topic) out.push_back(m.payload);
    }
    return out;
  }
  int ups() {
    std::lock_guard<std::mutex> lock(mu_);
    return ups_;
  }

 private:
  template <typename Pred>
  bool wait(std::chrono::milliseconds timeout, Pred pred) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, pred);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Message> messages_;
  int ups_ = 0;
  int downs_ = 0;
};

// For values without a notification (inflight()): polls until true or timeout.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// A scripted MQTT 3.1.1 peer on loopback: answers CONNECT with CONNACK
// (session_present as set) and PINGREQ with PINGRESP, acknowledges nothing
// else, so every QoS 1 publish stays in flight. One connection at a time;
// drop_connection() closes it as a network failure would.
class SilentBroker {
 public:
  SilentBroker() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        listen(listen_fd_, 4) != 0 || pipe(wake_) != 0) {
      throw std::runtime_error("SilentBroker: cannot listen");
    }
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~SilentBroker() {
    command('x');
    thread_.join();
    close_client();
    close(listen_fd_);
    close(wake_[0]);
    close(wake_[1]);
  }
  SilentBroker(const SilentBroker&) = delete;
  SilentBroker& operator=(const SilentBroker&) = delete;

  std::string url() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
  void set_session_present(bool present) { session_present_ = present; }
  void drop_connection() { command('d'); }
  int publishes() const { return publishes_; }

 private:
  void command(char c) { REQUIRE(write(wake_[1], &c, 1) == 1); }
  void run() {
    for (;;) {
      pollfd fds[3] = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}, {client_fd_, POLLIN, 0}};
      if (poll(fds, client_fd_ >= 0 ? 3 : 2, -1) < 0) continue;
      if (fds[0].revents != 0) {
        char c = 0;
        if (read(wake_[0], &c, 1) == 1 && c == 'x') return;
        close_client();
        continue;
      }
      if (fds[1].revents != 0) {
        close_client();
        client_fd_ = accept(listen_fd_, nullptr, nullptr);
        continue;
      }
      if (client_fd_ >= 0 && fds[2].revents != 0 && !read_packets()) close_client();
    }
  }
  bool read_packets() {
    char chunk[4096];
    ssize_t n = read(client_fd_, chunk, sizeof chunk);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    for (;;) {
      size_t length = 0;
      size_t pos = 1;
      for (int shift = 0; pos < buffer_.size() && pos < 5; shift += 7) {
        uint8_t byte = static_cast<uint8_t>(buffer_[pos++]);
        length |= static_cast<size_t>(byte & 0x7f) << shift;
        if ((byte & 0x80) == 0) break;
      }
      if (buffer_.size() < 2 || buffer_.size() < pos + length) return true;  // incomplete
      int type = static_cast<uint8_t>(buffer_[0]) >> 4;
      buffer_.erase(0, pos + length);
      if (type == 1) send({0x20, 0x02, static_cast<char>(session_present_ ? 1 : 0), 0x00});
      if (type == 3) ++publishes_;
      if (type == 12) send({static_cast<char>(0xd0), 0x00});
      if (type == 14) return false;  // DISCONNECT
    }
  }
  void send(std::string bytes) {
    if (write(client_fd_, bytes.data(), bytes.size()) < 0) close_client();
  }
  void close_client() {
    if (client_fd_ >= 0) close(client_fd_);
    client_fd_ = -1;
    buffer_.clear();
  }

  int listen_fd_ = -1;
  int client_fd_ = -1;  // broker thread only (and the destructor after join)
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::string buffer_;
  std::atomic<bool> session_present_{false};
  std::atomic<int> publishes_{0};
  std::thread thread_;
};

PahoOptions options_for(const MosquittoServer& server, const std::string& client_id) {
  PahoOptions options;
  options.server_uri = server.url();
  options.client_id = client_id;
  // Not tight: under qemu-user on a loaded 2-core box a connect to a broker
  // just started took over 2 s (the ARM suites run there in CI).
  options.connect_timeout = 5s;
  options.reconnect_min = 50ms;
  options.reconnect_max = 400ms;
  return options;
}

Message msg(std::string topic, std::string payload) {
  return Message{std::move(topic), std::move(payload), 1, false};
}

// VEND_TEST_LOG=debug shows the adapter's whole story.
StderrLogger& test_logger() {
  const char* level = std::getenv("VEND_TEST_LOG");
  static StderrLogger logger(level != nullptr && std::string(level) == "debug" ? LogLevel::kDebug
                                                                               : LogLevel::kWarn);
  return logger;
}

TEST_CASE("reconnect_delay: exponential, capped, jittered within [b/2, b]") {
  CHECK(reconnect_delay(0, 100ms, 10s, 0.0) == 50ms);
  CHECK(reconnect_delay(0, 100ms, 10s, 0.999) == 100ms);
  CHECK(reconnect_delay(3, 100ms, 10s, 0.0) == 400ms);
  CHECK(reconnect_delay(3, 100ms, 10s, 1.0) == 800ms);
  CHECK(reconnect_delay(50, 100ms, 10s, 1.0) == 10s);
  CHECK(reconnect_delay(1'000'000, 100ms, 10s, 0.0) == 5s);
  CHECK(reconnect_delay(0, 0ms, 0ms, 0.5) >= 0ms);
}

TEST_CASE("enable_tcp_nodelay_to_peer sets TCP_NODELAY on the socket to that peer only") {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(listener, 1) == 0);
  socklen_t len = sizeof addr;
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  int client = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  int accepted = accept(listener, nullptr, nullptr);
  REQUIRE(accepted >= 0);

  auto nodelay = [](int fd) {
    int value = 0;
    socklen_t size = sizeof value;
    getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &value, &size);
    return value != 0;
  };
  REQUIRE_FALSE(nodelay(client));
  Result<int> count = enable_tcp_nodelay_to_peer("127.0.0.1", ntohs(addr.sin_port));
  REQUIRE(count);
  CHECK(*count == 1);
  CHECK(nodelay(client));
  CHECK_FALSE(nodelay(accepted));  // its peer is the client's ephemeral port
  CHECK_FALSE(enable_tcp_nodelay_to_peer("no-such-host.invalid", 1));
  close(accepted);
  close(client);
  close(listener);
}

TEST_CASE("errors are values: not connected, unreachable broker, bad input") {
  PahoOptions options;
  options.server_uri = "tcp://127.0.0.1:" + std::to_string(test::free_port());
  options.client_id = "nobody";
  options.connect_timeout = 2s;
  PahoTransport transport(options, test_logger());
  CHECK(transport.publish(msg("a", "x")).error().code == "not_connected");
  Status status = transport.connect();
  REQUIRE_FALSE(status);
  CHECK(status.error().code == "mqtt_error");
  CHECK_FALSE(transport.connected());
  CHECK(transport.subscribe("a/#/b").error().code == "bad_topic_filter");

  PahoOptions bad = options;
  bad.server_uri = "nonsense://";
  PahoTransport broken(bad, test_logger());
  CHECK_FALSE(broken.connect());
}

TEST_CASE("QoS 1 publish and subscribe, subscribing from the connection handler") {
  MosquittoServer server;
  Inbox inbox;
  PahoTransport sub(options_for(server, "q-sub"), test_logger());
  PahoTransport pub(options_for(server, "q-pub"), test_logger());
  inbox.attach(sub);
  sub.on_connection([&](bool up) {
    if (up) CHECK(sub.subscribe("q/+/x"));  // does not wait for the SUBACK here
  });
  REQUIRE(sub.connect());
  REQUIRE(pub.connect());
  REQUIRE(sub.subscribe("q/sync"));  // waits: the filter above is in place too
  CHECK(pub.publish(msg("q/a/x", "hello")));
  CHECK(pub.publish(msg("q/a/y", "not matched")));
  CHECK(pub.publish(msg("q/#", "wildcard topic")).error().code == "bad_topic");
  std::optional<Message> got = inbox.wait_topic("q/a/x", 5s);
  REQUIRE(got);
  CHECK(got->payload == "hello");
  CHECK(got->qos == 1);
  CHECK(eventually([&] { return pub.inflight() == 0; }, 5s));
  CHECK(inbox.payloads("q/a/y").empty());
}

TEST_CASE("subscribe_many sends every filter at once, waits once, and each one delivers") {
  MosquittoServer server;
  Inbox inbox;
  PahoTransport sub(options_for(server, "m-sub"), test_logger());
  PahoTransport pub(options_for(server, "m-pub"), test_logger());
  inbox.attach(sub);
  REQUIRE(sub.connect());
  REQUIRE(pub.connect());
  std::vector<std::string> filters;
  for (int i = 0; i < 300; ++i) filters.push_back("m/" + std::to_string(i) + "/x");
  CHECK(sub.subscribe_many({"m/ok", "m/#/bad"}).error().code == "bad_topic_filter");
  REQUIRE(sub.subscribe_many(filters));  // three packets, then their three SUBACKs
  for (const char* topic : {"m/0/x", "m/127/x", "m/128/x", "m/299/x", "m/ok"}) {
    REQUIRE(pub.publish(msg(topic, topic)));
  }
  CHECK(inbox.wait_topic("m/0/x", 5s));
  CHECK(inbox.wait_topic("m/127/x", 5s));
  CHECK(inbox.wait_topic("m/128/x", 5s));
  CHECK(inbox.wait_topic("m/299/x", 5s));
  CHECK(eventually([&] { return pub.inflight() == 0; }, 5s));
  CHECK(inbox.payloads("m/ok").empty());  // refused with its bad neighbour: none sent
}

// Paho C notices a new socket only when its receive thread's 1 s poll()
// returns, so a client connecting while another one in this process is
// connected waits ~1-2 s: tests keep clients sequential where they can.
TEST_CASE("a persistent session receives what was published while it was away") {
  MosquittoServer server;
  {
    PahoTransport sub(options_for(server, "p-sub"), test_logger());
    REQUIRE(sub.connect());
    REQUIRE(sub.subscribe("p/t"));
    sub.disconnect();
  }
  {
    PahoTransport pub(options_for(server, "p-pub"), test_logger());
    REQUIRE(pub.connect());
    for (int i = 0; i < 3; ++i) REQUIRE(pub.publish(msg("p/t", std::to_string(i))));
    REQUIRE(eventually([&] { return pub.inflight() == 0; }, 5s));  // the broker has them
  }
  Inbox inbox;
  PahoTransport again(options_for(server, "p-sub"), test_logger());
  inbox.attach(again);
  REQUIRE(again.connect());  // no subscribe(): the session has it
  REQUIRE(inbox.wait_count(3, 5s));
  CHECK(inbox.payloads("p/t") == std::vector<std::string>{"0", "1", "2"});
}

// mqtt_will_child's argv, behind the cross-build emulator if there is one
// (VEND_MQTT_WILL_CHILD_EMULATOR: "qemu-aarch64|-L|/usr/aarch64-linux-gnu").
std::vector<std::string> will_child_argv(const std::vector<std::string>& args) {
  std::vector<std::string> argv;
  std::string emulator = VEND_MQTT_WILL_CHILD_EMULATOR;
  for (size_t start = 0; start < emulator.size();) {
    size_t end = std::min(emulator.find('|', start), emulator.size());
    if (end > start) argv.push_back(emulator.substr(start, end - start));
    start = end + 1;
  }
  if (!argv.empty()) argv[0] = test::require_program(argv[0], "qemu-user");
  argv.push_back(VEND_MQTT_WILL_CHILD);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

TEST_CASE("the last will is published when the client process is SIGKILLed") {
  MosquittoServer server;
  test::TempDir dir;
  Inbox inbox;
  PahoTransport watcher(options_for(server, "w-watcher"), test_logger());
  inbox.attach(watcher);
  REQUIRE(watcher.connect());
  REQUIRE(watcher.subscribe("w/#"));
  test::Child child(will_child_argv({server.url(), "w-child", "w/status", "offline", "w/ready"}),
                    dir.file("child.log"));
  REQUIRE_MESSAGE(inbox.wait_topic("w/ready", 10s), test::read_file(dir.file("child.log")));
  CHECK_FALSE(inbox.wait_topic("w/status", 0ms));
  child.kill_now();
  std::optional<Message> will = inbox.wait_topic("w/status", 5s);
  REQUIRE(will);
  CHECK(will->payload == "offline");
}

TEST_CASE("a clean disconnect does not publish the will") {
  MosquittoServer server;
  PahoOptions options = options_for(server, "c-dev");
  options.will = Will{"c/status", "offline", 1, /*retained=*/true};
  {
    PahoTransport dev(options, test_logger());
    REQUIRE(dev.connect());
    dev.disconnect();
  }
  // A published will would be retained: a later subscriber would get it
  // before its own marker message.
  Inbox inbox;
  PahoTransport watcher(options_for(server, "c-watcher"), test_logger());
  inbox.attach(watcher);
  REQUIRE(watcher.connect());
  REQUIRE(watcher.subscribe("c/#"));
  REQUIRE(watcher.publish(msg("c/marker", "after")));
  REQUIRE(inbox.wait_topic("c/marker", 5s));
  CHECK(inbox.payloads("c/status").empty());
}

TEST_CASE("after a broker restart the transport reconnects and restores subscriptions") {
  MosquittoServer server;  // no broker persistence: the restart loses the session
  Inbox inbox;
  PahoTransport client(options_for(server, "r-client"), test_logger());
  inbox.attach(client);
  REQUIRE(client.connect());
  REQUIRE(client.subscribe("r/t"));

  server.stop();
  REQUIRE(inbox.wait_downs(1, 5s));
  CHECK_FALSE(client.connected());
  Status status = client.publish(msg("r/t", "while down"));
  REQUIRE_FALSE(status);
  CHECK(status.error().code == "not_connected");

  server.start();
  REQUIRE(inbox.wait_ups(2, 10s));
  CHECK(client.connected());
  // Its own message comes back only if the subscription was sent again.
  REQUIRE(client.publish(msg("r/t", "after restart")));
  std::optional<Message> got = inbox.wait_topic("r/t", 5s);
  REQUIRE(got);
  CHECK(got->payload == "after restart");
}

TEST_CASE("in-flight window: full fails fast, kept with the session, emptied without it") {
  SilentBroker broker;
  PahoOptions options;
  options.server_uri = broker.url();
  options.client_id = "window";
  options.max_inflight = 5;
  options.connect_timeout = 2s;
  options.reconnect_min = 50ms;
  options.reconnect_max = 400ms;
  Inbox inbox;
  PahoTransport client(options, test_logger());
  inbox.attach(client);
  REQUIRE(client.connect());
  for (int i = 0; i < 5; ++i) REQUIRE(client.publish(msg("w/t", std::to_string(i))));
  Status full = client.publish(msg("w/t", "one too many"));
  REQUIRE_FALSE(full);
  CHECK(full.error().code == "queue_full");
  CHECK(client.inflight() == 5);
  REQUIRE(eventually([&] { return broker.publishes() == 5; }, 5s));

  broker.set_session_present(true);
  broker.drop_connection();
  REQUIRE(inbox.wait_ups(2, 10s));
  CHECK(eventually([&] { return broker.publishes() == 10; }, 5s));  // Paho resent all 5
  CHECK(client.inflight() == 5);

  broker.set_session_present(false);
  broker.drop_connection();
  REQUIRE(inbox.wait_ups(3, 10s));
  CHECK(client.inflight() == 0);  // Paho dropped them without completing their tokens
  CHECK(client.publish(msg("w/t", "room again")));
}

// QoS 1 ping-pong between two transports through the broker; median in ms.
double median_round_trip_ms(const MosquittoServer& server, bool tcp_nodelay, int rounds) {
  std::mutex mu;
  std::condition_variable cv;
  std::string last_pong;
  PahoOptions ping_options = options_for(server, "rt-ping");
  PahoOptions pong_options = options_for(server, "rt-pong");
  ping_options.tcp_nodelay = tcp_nodelay;
  pong_options.tcp_nodelay = tcp_nodelay;
  PahoTransport ping(ping_options, test_logger());
  PahoTransport pong(pong_options, test_logger());
  pong.on_message([&pong](const Message& m) { (void)pong.publish(msg("rt/pong", m.payload)); });
  ping.on_message([&](const Message& m) {
    std::lock_guard<std::mutex> lock(mu);
    last_pong = m.payload;
    cv.notify_all();
  });
  REQUIRE(ping.connect());
  REQUIRE(pong.connect());
  REQUIRE(ping.subscribe("rt/pong"));
  REQUIRE(pong.subscribe("rt/ping"));
  std::vector<double> samples;
  const int warmup = 5;
  for (int i = 0; i < rounds + warmup; ++i) {
    std::string id = std::to_string(i);
    auto start = std::chrono::steady_clock::now();
    REQUIRE(ping.publish(msg("rt/ping", id)));
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, 2s, [&] { return last_pong == id; }));
    std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    if (i >= warmup) samples.push_back(took.count());
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// Pins down the Nagle + delayed-ACK stall (~80-90 ms per QoS 1 round trip on
// loopback without TCP_NODELAY).
TEST_CASE("TCP_NODELAY: median QoS 1 round trip stays far below the Nagle stall") {
  MosquittoServer server;
  double median_ms = median_round_trip_ms(server, /*tcp_nodelay=*/true, 50);
  MESSAGE("median QoS 1 round trip with TCP_NODELAY: " << median_ms << " ms");
  CHECK(median_ms < 20.0);
}

// Measurement only (run with --no-skip): what the stall costs without NODELAY.
TEST_CASE("measure: median QoS 1 round trip without TCP_NODELAY" * doctest::skip()) {
  MosquittoServer server;
  double median_ms = median_round_trip_ms(server, /*tcp_nodelay=*/false, 20);
  MESSAGE("median QoS 1 round trip without TCP_NODELAY: " << median_ms << " ms");
}

}  // namespace
}  // namespace vend
