// The RateLimiter contract, run against both implementations (the Redis one
// on a real redis-server started by the test; its time is Redis's, so its
// fixture sleeps where the embedded one moves a ManualClock), then each
// implementation's own cases: the embedded memory bound; Redis key expiry,
// sharing between agents, NOSCRIPT, and failing open when Redis is down,
// silent (blackholed) or holds a wrong-typed key.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "test_support.hpp"
#include "limits/embedded_rate_limiter.hpp"
#include "limits/redis_rate_limiter.hpp"

using vend::agent::BucketRequest;
using vend::agent::EmbeddedRateLimiter;
using vend::agent::RateDecision;
using vend::agent::RateLimit;
using vend::agent::RateLimiter;
using vend::agent::RedisLimiterOptions;
using vend::agent::RedisRateLimiter;
using namespace std::chrono_literals;

namespace {

RedisLimiterOptions options_for(const std::string& url) {
  auto options = RedisLimiterOptions::parse_url(url);
  REQUIRE(options.ok());
  return *options;
}

struct EmbeddedFixture {
  vend::ManualClock clock;
  EmbeddedRateLimiter limiter{clock};
  RateLimiter& get() { return limiter; }
  void advance(int64_t ms) { clock.advance(ms); }
};

struct RedisFixture {
  vend::test::RedisServer server;
  vend::SystemClock clock;
  vend::MemoryLogger log;
  RedisRateLimiter limiter{options_for(server.url()), clock, log};
  RateLimiter& get() { return limiter; }
  void advance(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
};

// A decision that must be a real one (not failed open).
RateDecision take(RateLimiter& l, const std::string& key, double rate, int64_t burst) {
  RateDecision d = l.take(key, rate, burst);
  REQUIRE_FALSE(d.failed_open);
  return d;
}

RateDecision take_all(RateLimiter& l, const std::vector<BucketRequest>& buckets) {
  RateDecision d = l.take_all(buckets);
  REQUIRE_FALSE(d.failed_open);
  return d;
}

int allowed_of(RateLimiter& l, const std::string& key, double rate, int64_t burst, int tries) {
  int allowed = 0;
  for (int i = 0; i < tries; ++i) allowed += take(l, key, rate, burst).allowed ? 1 : 0;
  return allowed;
}

// Runs redis-cli against a test server; returns its output.
std::string redis_cli(int port, std::vector<std::string> args) {
  vend::test::TempDir dir;
  std::vector<std::string> argv = {vend::test::require_program("redis-cli", "redis-tools"), "-h",
                                   "127.0.0.1", "-p", std::to_string(port)};
  argv.insert(argv.end(), args.begin(), args.end());
  vend::test::Child child(argv, dir.file("out"));
  REQUIRE(child.wait(10s) == 0);
  std::string out = vend::test::read_file(dir.file("out"));
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("a new bucket allows its burst, then denies with the wait", F, EmbeddedFixture,
                   RedisFixture) {
  F f;
  for (int i = 0; i < 3; ++i) CHECK(take(f.get(), "machine:vm-1", 1, 3).allowed);
  RateDecision d = take(f.get(), "machine:vm-1", 1, 3);
  CHECK_FALSE(d.allowed);
  CHECK(d.limited == 0);
  CHECK(d.retry_after_ms > 900);  // ~1 s for one token at 1/s
  CHECK(d.retry_after_ms <= 1000);
  CHECK(f.get().errors_total() == 0);
}

TEST_CASE_TEMPLATE("tokens refill at rate_per_s up to the burst", F, EmbeddedFixture,
                   RedisFixture) {
  F f;
  CHECK(allowed_of(f.get(), "client:a", 10, 2, 3) == 2);
  f.advance(350);  // 3.5 tokens' worth, capped at 2
  CHECK(allowed_of(f.get(), "client:a", 10, 2, 3) == 2);
  RateDecision d = take(f.get(), "client:a", 10, 2);
  CHECK_FALSE(d.allowed);
  CHECK(d.retry_after_ms > 50);  // ~100 ms minus the test's own run time
  CHECK(d.retry_after_ms <= 100);
  f.advance(d.retry_after_ms + 5);
  CHECK(take(f.get(), "client:a", 10, 2).allowed);
}

TEST_CASE_TEMPLATE("take_all is all or nothing and names the longest wait", F, EmbeddedFixture,
                   RedisFixture) {
  F f;
  RateLimit slow{1, 1};
  RateLimit fast{10, 5};
  REQUIRE(take(f.get(), "client:c", slow.rate_per_s, slow.burst).allowed);  // drained
  RateDecision d = take_all(f.get(), {{"machine:m", fast}, {"client:c", slow}});
  CHECK_FALSE(d.allowed);
  CHECK(d.limited == 1);
  CHECK(d.retry_after_ms > 900);
  // The machine bucket lost nothing to the refused call.
  CHECK(allowed_of(f.get(), "machine:m", fast.rate_per_s, fast.burst, 5) == 5);
  // Both refusing: the slow one's wait wins.
  d = take_all(f.get(), {{"machine:m", fast}, {"client:c", slow}});
  CHECK_FALSE(d.allowed);
  CHECK(d.limited == 1);
  CHECK(d.retry_after_ms > 900);
  // Both holding tokens: one taken from each.
  CHECK(take_all(f.get(), {{"machine:n", fast}, {"client:d", slow}}).allowed);
  CHECK_FALSE(take(f.get(), "client:d", slow.rate_per_s, slow.burst).allowed);
  CHECK(allowed_of(f.get(), "machine:n", fast.rate_per_s, fast.burst, 5) == 4);
  CHECK(take_all(f.get(), {}).allowed);
}

TEST_CASE_TEMPLATE("keys are independent; the same key twice takes two tokens", F, EmbeddedFixture,
                   RedisFixture) {
  F f;
  REQUIRE(allowed_of(f.get(), "machine:a", 1, 2, 2) == 2);
  CHECK(take(f.get(), "machine:b", 1, 2).allowed);
  RateLimit three{1, 3};
  CHECK(take_all(f.get(), {{"k", three}, {"k", three}}).allowed);
  RateDecision d = take_all(f.get(), {{"k", three}, {"k", three}});
  CHECK_FALSE(d.allowed);
  CHECK(d.limited == 1);
  CHECK(take(f.get(), "k", 1, 3).allowed);  // the refused pair took nothing
}

TEST_CASE_TEMPLATE("a changed limit applies from now on", F, EmbeddedFixture, RedisFixture) {
  F f;
  REQUIRE(take(f.get(), "m", 1, 5).allowed);      // 4 left of 5
  CHECK(allowed_of(f.get(), "m", 1, 2, 3) == 2);  // capped at the new burst of 2
  f.advance(5);
  CHECK(allowed_of(f.get(), "m", 1000, 5, 1) == 1);  // a faster rate refills at once
}

TEST_CASE_TEMPLATE("concurrent takes never allow more than the bucket holds", F, EmbeddedFixture,
                   RedisFixture) {
  F f;  // the clock is not moved while the threads run
  constexpr int kThreads = 8;
  constexpr int kTakes = 100;
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  auto started = std::chrono::steady_clock::now();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kTakes; ++i) {
        RateDecision d =
            f.get().take_all({{"machine:hot", {0.001, 300}}, {"client:x", {0.001, 1000}}});
        if (d.allowed && !d.failed_open) allowed.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  auto elapsed = std::chrono::steady_clock::now() - started;
  MESSAGE(
      (kThreads * kTakes) << " two-bucket takes from " << kThreads << " threads in "
                          << std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count()
                          << " us");
  CHECK(allowed.load() == 300);
  CHECK(f.get().errors_total() == 0);
}

// ---- EmbeddedRateLimiter ---------------------------------------------------

TEST_CASE("embedded: the wait is exact on the injected clock") {
  vend::ManualClock clock;
  EmbeddedRateLimiter l(clock);
  REQUIRE(l.take("k", 4, 1).allowed);
  CHECK(l.take("k", 4, 1).retry_after_ms == 250);
  clock.advance(249);
  CHECK(l.take("k", 4, 1).retry_after_ms == 1);
  clock.advance(1);
  CHECK(l.take("k", 4, 1).allowed);
}

TEST_CASE("embedded: buckets that are full again are forgotten") {
  vend::ManualClock clock;
  EmbeddedRateLimiter l(clock);
  for (int i = 0; i < 100; ++i) REQUIRE(l.take("client:" + std::to_string(i), 10, 2).allowed);
  CHECK(l.bucket_count() == 100);
  clock.advance(99);  // one token short of full for 1 ms more
  REQUIRE(l.take("client:new", 10, 2).allowed);
  CHECK(l.bucket_count() == 101);
  clock.advance(1);
  REQUIRE(l.take("client:newer", 10, 2).allowed);
  CHECK(l.bucket_count() == 2);  // client:new and client:newer, both still short
  CHECK(l.evicted_total() == 0);
}

TEST_CASE("embedded: at most max_buckets are kept, least recently used dropped first") {
  vend::ManualClock clock;
  EmbeddedRateLimiter l(clock, EmbeddedRateLimiter::Options{10});
  for (int i = 0; i < 100; ++i) REQUIRE(l.take("client:" + std::to_string(i), 0.001, 1).allowed);
  CHECK(l.bucket_count() == 10);
  CHECK(l.evicted_total() == 90);
  CHECK_FALSE(l.take("client:99", 0.001, 1).allowed);  // recent: kept
  CHECK(l.take("client:0", 0.001, 1).allowed);         // dropped: starts full again
}

TEST_CASE("embedded: a refused request leaves no bucket behind") {
  vend::ManualClock clock;
  EmbeddedRateLimiter l(clock, EmbeddedRateLimiter::Options{10});
  RateLimit machine{0.001, 1}, client{0.001, 1};
  REQUIRE(l.take_all({{"machine:vm-1", machine}, {"client:keep", client}}).allowed);
  // A flood under ever new client ids, all refused by the machine's bucket.
  for (int i = 0; i < 1000; ++i) {
    RateDecision d =
        l.take_all({{"machine:vm-1", machine}, {"client:" + std::to_string(i), client}});
    REQUIRE_FALSE(d.allowed);
    CHECK(d.limited == 0);
  }
  CHECK(l.bucket_count() == 2);
  CHECK(l.evicted_total() == 0);
  CHECK_FALSE(l.take("client:keep", 0.001, 1).allowed);  // still empty: not pushed out
}

// ---- RedisRateLimiter ------------------------------------------------------

TEST_CASE("redis: a bucket is a hash that expires once it would be full") {
  RedisFixture f;
  REQUIRE(take(f.get(), "client:e", 2, 2).allowed);  // 1 of 2 left: full in 500 ms
  CHECK(redis_cli(f.server.port(), {"HEXISTS", "vend:rate:client:e", "ts"}) == "1");
  int64_t pttl = std::stoll(redis_cli(f.server.port(), {"PTTL", "vend:rate:client:e"}));
  CHECK(pttl > 0);  // a redis-cli run may take a while on a loaded machine
  CHECK(pttl <= 500);
  f.advance(600);
  CHECK(redis_cli(f.server.port(), {"EXISTS", "vend:rate:client:e"}) == "0");
  CHECK(take(f.get(), "client:e", 2, 2).allowed);
}

TEST_CASE("redis: agents with skewed clocks share one bucket on Redis's time") {
  vend::test::RedisServer server;
  vend::NullLogger log;
  vend::ManualClock behind(1'000'000, 0);
  vend::ManualClock ahead(2'000'000'000'000, 86'400'000);
  RedisRateLimiter a(options_for(server.url()), behind, log);
  RedisRateLimiter b(options_for(server.url()), ahead, log);
  CHECK(take(a, "machine:vm-1", 1, 2).allowed);
  CHECK(take(b, "machine:vm-1", 1, 2).allowed);
  CHECK_FALSE(take(a, "machine:vm-1", 1, 2).allowed);
  CHECK_FALSE(take(b, "machine:vm-1", 1, 2).allowed);
}

TEST_CASE("redis: SCRIPT FLUSH is recovered without failing open") {
  RedisFixture f;
  REQUIRE(take(f.get(), "k", 1, 3).allowed);
  REQUIRE(redis_cli(f.server.port(), {"SCRIPT", "FLUSH"}) == "OK");
  CHECK(take(f.get(), "k", 1, 3).allowed);
  CHECK(take(f.get(), "k", 1, 3).allowed);
  CHECK_FALSE(take(f.get(), "k", 1, 3).allowed);
  CHECK(f.get().errors_total() == 0);
}

TEST_CASE("redis: a key of another type fails open as redis_error, counted") {
  RedisFixture f;
  REQUIRE(redis_cli(f.server.port(), {"SET", "vend:rate:machine:x", "junk"}) == "OK");
  RateDecision d = f.get().take("machine:x", 1, 1);
  CHECK(d.allowed);
  CHECK(d.failed_open);
  CHECK(f.get().errors_total() == 1);
  CHECK(f.log.contains("redis_error", vend::LogLevel::kWarn));
  CHECK(take(f.get(), "machine:y", 1, 1).allowed);  // the connection still works
}

TEST_CASE("redis: down, every call fails open at once, counted, logged at a bounded rate") {
  vend::SystemClock clock;
  vend::MemoryLogger log;
  RedisLimiterOptions options;
  options.port = vend::test::free_port();  // nothing listens there
  RedisRateLimiter l(options, clock, log);
  auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) {
    RateDecision d = l.take("machine:vm-1", 1, 1);
    REQUIRE(d.allowed);
    REQUIRE(d.failed_open);
  }
  CHECK(std::chrono::steady_clock::now() - started < 1s);
  CHECK(l.errors_total() == 1000);
  CHECK(log.records().size() <= 2);  // one line per reason (refused, backoff)
  CHECK(log.contains("127.0.0.1:" + std::to_string(options.port), vend::LogLevel::kWarn));
  CHECK_FALSE(l.ping().ok());
}

TEST_CASE("redis: blackholed, each call is bounded by the timeouts and fails open") {
  // A listening socket that is never accept()ed: the kernel completes the
  // TCP handshake, then nothing ever answers.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(fd, 64) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);

  vend::SystemClock clock;
  vend::MemoryLogger log;
  RedisLimiterOptions options;
  options.port = ntohs(addr.sin_port);
  options.command_timeout = 50ms;
  options.reconnect_backoff_min = 100ms;
  options.reconnect_backoff_max = 200ms;
  RedisRateLimiter l(options, clock, log);
  auto worst = std::chrono::steady_clock::duration::zero();
  int calls = 0;
  auto started = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - started < 1s) {
    auto t0 = std::chrono::steady_clock::now();
    RateDecision d = l.take("machine:vm-1", 1, 1);
    worst = std::max(worst, std::chrono::steady_clock::now() - t0);
    REQUIRE(d.allowed);
    REQUIRE(d.failed_open);
    ++calls;
    std::this_thread::sleep_for(1ms);
  }
  close(fd);
  MESSAGE("blackholed: " << calls << " calls in 1 s, slowest "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(worst).count()
                         << " ms");
  CHECK(worst >= 40ms);  // it did wait for the timeout at least once
  CHECK(worst < 250ms);  // never more than connect + one command timeout, plus slack
  CHECK(calls > 200);    // between probes, calls fail open without waiting
  CHECK(l.errors_total() == static_cast<uint64_t>(calls));
  CHECK(log.contains("timed out", vend::LogLevel::kWarn));
}

TEST_CASE("redis: restarted, limits are enforced again after the backoff") {
  RedisFixture f;
  REQUIRE(take(f.get(), "k", 0.001, 1).allowed);
  f.server.stop();
  CHECK(f.get().take("k", 0.001, 1).failed_open);
  f.server.start();  // empty: the bucket starts full again
  RateDecision d;
  auto started = std::chrono::steady_clock::now();
  do {
    std::this_thread::sleep_for(20ms);
    d = f.get().take("k", 0.001, 1);
  } while (d.failed_open && std::chrono::steady_clock::now() - started < 5s);
  CHECK_FALSE(d.failed_open);
  CHECK(d.allowed);
  CHECK_FALSE(take(f.get(), "k", 0.001, 1).allowed);
  CHECK(f.log.contains("answers again", vend::LogLevel::kInfo));
}

TEST_CASE("redis: parse_url") {
  auto ok = RedisLimiterOptions::parse_url("redis://10.0.0.5:6380");
  REQUIRE(ok.ok());
  CHECK(ok->address() == "10.0.0.5:6380");
  auto v6 = RedisLimiterOptions::parse_url("redis://[::1]:7000/");
  REQUIRE(v6.ok());
  CHECK(v6->address() == "[::1]:7000");
  CHECK(RedisLimiterOptions::parse_url("redis://cache.local")->port == 6379);
  for (const char* bad : {"http://h:1", "redis://", "redis://h:0", "redis://u:pw@h:1"}) {
    CAPTURE(bad);
    auto r = RedisLimiterOptions::parse_url(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "bad_url");
    CHECK(r.error().message.find(bad) != std::string::npos);
  }
}
