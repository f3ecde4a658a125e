// The vend-agent shell's pieces that need no network: option and secret
// parsing, the MQTT inbound pump, the HTTP worker pool, the metrics
// histogram. Built into the http_api_test executable.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "http/http_server.hpp"
#include "http/metrics.hpp"
#include "http/worker_pool.hpp"
#include "shell/core_thread.hpp"
#include "shell/shell_options.hpp"
#include "test_support.hpp"
#include "vend/log.hpp"

namespace vend::agent {
namespace {

using namespace std::chrono_literals;

TEST_CASE("histogram buckets are cumulative") {
  Histogram h;
  h.observe(0.004);
  h.observe(0.3);
  h.observe(100);
  PrometheusText text;
  text.family("x", MetricType::kHistogram, "X.");
  h.render(text);
  std::string out = text.take();
  CHECK(out.find("x_bucket{le=\"0.005\"} 1\n") != std::string::npos);
  CHECK(out.find("x_bucket{le=\"0.5\"} 2\n") != std::string::npos);
  CHECK(out.find("x_bucket{le=\"60\"} 2\n") != std::string::npos);
  CHECK(out.find("x_bucket{le=\"+Inf\"} 3\n") != std::string::npos);
  CHECK(out.find("x_count 3\n") != std::string::npos);
}

TEST_CASE("WorkerPool: bounded queue refuses when full, every queued job runs") {
  std::atomic<int> ran{0};
  std::atomic<bool> release{false};
  std::atomic<bool> running{false};
  {
    WorkerPool pool(1, 2);
    REQUIRE(pool.try_post([&] {
      running = true;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ++ran;
    }));
    while (!running) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(pool.try_post([&] { ++ran; }));
    CHECK(pool.try_post([&] { ++ran; }));  // 1 running, 2 waiting: full
    CHECK_FALSE(pool.try_post([&] { ++ran; }));
    CHECK(pool.queued() == 2);
    release = true;
  }  // the destructor runs the queued jobs, then joins
  CHECK(ran == 3);
}

TEST_CASE("CoreThread: one thread, in order, bounded; connections never dropped") {
  MemoryLogger log;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> seen;
  std::atomic<bool> busy{false};
  std::atomic<bool> release{false};
  std::thread::id core_id;
  auto record = [&](std::string what) {
    std::lock_guard lock(mu);
    seen.push_back(std::move(what));
    cv.notify_all();
  };
  CoreThread core(CoreThread::Limits{2, 1024, 1}, std::chrono::milliseconds(0), log);
  // Before start(): a step runs on the caller's thread.
  CHECK(core.run([&] { core_id = std::this_thread::get_id(); }));
  CHECK(core_id == std::this_thread::get_id());
  core.start(CoreThread::Handlers{[&](const Message& m) {
                                    busy = true;
                                    while (!release) std::this_thread::sleep_for(1ms);
                                    record(m.payload);
                                  },
                                  [&](bool up) { record(up ? "up" : "down"); }, nullptr});
  core.push_connection(true);
  core.push_message(Message{"t", "a"});
  while (!busy) std::this_thread::sleep_for(1ms);  // "a" is running on the core thread
  core.push_message(Message{"t", "b"});
  core.push_message(Message{"t", "c"});
  core.push_message(Message{"t", "d"});                     // over 2 messages: dropped
  core.push_message(Message{"t", std::string(2000, 'x')});  // over 1024 bytes: dropped
  core.push_connection(false);                              // never dropped
  CHECK(core.dropped() == 2);
  // A step from another thread waits in the inbox (one fits, the next is
  // refused) and runs on the core thread, after what came before it.
  std::thread caller([&] {
    CHECK(core.run([&] {
      record("step");
      core_id = std::this_thread::get_id();
    }));
  });
  while (core.fill().calls == 0) std::this_thread::sleep_for(1ms);
  CHECK_FALSE(core.run([&] { record("refused"); }));
  release = true;
  caller.join();
  std::unique_lock lock(mu);
  REQUIRE(cv.wait_for(lock, 5s, [&] { return seen.size() == 6; }));
  // A batch delivers its connection change first; messages and the step
  // keep their order; the refused step never ran.
  CHECK(seen == std::vector<std::string>{"up", "a", "down", "b", "c", "step"});
  CHECK(core_id != std::this_thread::get_id());
  lock.unlock();
  core.stop();
  CHECK_FALSE(core.run([] {}));             // refused after stop
  core.push_message(Message{"t", "late"});  // ignored after stop
  CHECK(log.contains("dropped 2 MQTT message(s)", LogLevel::kWarn));
}

TEST_CASE("options and secrets of vend-agent") {
  auto o = parse_options({"--http", "0.0.0.0:9090", "--redis=redis://10.0.0.1:6380", "--sync",
                          "normal", "--reservation-ttl-s", "60"});
  REQUIRE(o.ok());
  CHECK(o->http_host == "0.0.0.0");
  CHECK(o->http_port == 9090);
  REQUIRE(o->shared_redis.has_value());
  CHECK(o->shared_redis->port == 6380);
  CHECK_FALSE(o->sync_full);
  CHECK(o->reservation_ttl_s == 60);
  CHECK(parse_options({"--http", "nohost"}).error().message.find("--http") == 0);
  CHECK(parse_options({"--bogus"}).error().code == "bad_usage");
  CHECK(parse_options({"--dispatch-ttl-s", "1"}).error().message.find("5..3600") !=
        std::string::npos);
  CHECK(parse_options({"--db"}).error().message == "--db: missing value");

  test::TempDir dir;
  ShellOptions so;
  auto none = [](const char*) { return std::optional<std::string>(); };
  std::ostringstream out;
  CHECK(load_secrets(so, none, out).error().code == "no_secret");
  so.insecure_no_auth = true;
  CHECK(load_secrets(so, none, out).error().message.find("gateway") != std::string::npos);
  so.gateway_secret_file = dir.file("gateway.secret");
  auto s = load_secrets(so, none, out);  // creates the missing file
  REQUIRE(s.ok());
  CHECK(s->operator_token.empty());
  CHECK(test::read_file(dir.file("gateway.secret")) == s->gateway_secret + "\n");
  CHECK(out.str().find(dir.file("gateway.secret")) != std::string::npos);
  auto env = [](const char* n) {
    return std::string(n) == "VEND_OPERATOR_TOKEN" ? std::optional<std::string>("short")
                                                   : std::nullopt;
  };
  CHECK(load_secrets(so, env, out).error().code == "bad_secret");
}

}  // namespace
}  // namespace vend::agent
