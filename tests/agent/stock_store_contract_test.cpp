// The StockStore contract, run against both implementations (the Redis one
// on a real redis-server started by the test), then Redis-only failure cases:
// NOSCRIPT recovery, a stopped server, a silent server, bad URLs.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <stdexcept>
#include <thread>

#include "test_support.hpp"
#include "vend/agent/embedded_stock_store.hpp"
#include "vend/agent/redis_stock_store.hpp"

using vend::agent::EmbeddedStockStore;
using vend::agent::RedisOptions;
using vend::agent::RedisStockStore;
using vend::agent::ReserveResult;
using vend::agent::StockStore;
using namespace std::chrono_literals;

namespace {

RedisOptions options_for(const std::string& url) {
  auto options = RedisOptions::parse_url(url);
  REQUIRE(options.ok());
  return *options;
}

struct EmbeddedFixture {
  static constexpr int kHotUnits = 200'000;  // enough for the threads to really overlap
  EmbeddedStockStore store;
  StockStore& get() { return store; }
};

struct RedisFixture {
  static constexpr int kHotUnits = 1000;
  vend::test::RedisServer server;
  vend::SystemClock clock;
  vend::NullLogger log;
  RedisStockStore store{options_for(server.url()), clock, log};
  StockStore& get() { return store; }
};

ReserveResult reserve(StockStore& s, std::string_view key, int64_t n) {
  auto r = s.reserve(key, n);
  REQUIRE_MESSAGE(r.ok(), r.error().to_string());
  return *r;
}

std::optional<int64_t> value_of(StockStore& s, const std::string& key) {
  auto r = s.mget({key});
  REQUIRE_MESSAGE(r.ok(), r.error().to_string());
  return r->at(0);
}

// Runs redis-cli against a test server; returns its exit status.
int redis_cli(int port, std::vector<std::string> args) {
  std::vector<std::string> argv = {vend::test::require_program("redis-cli", "redis-tools"), "-h",
                                   "127.0.0.1", "-p", std::to_string(port)};
  argv.insert(argv.end(), args.begin(), args.end());
  vend::test::Child child(argv, "/dev/null");
  return child.wait(10s);
}

}  // namespace

TEST_CASE("stock_key is inv:{device}:{slot}") {
  CHECK(vend::agent::stock_key("vm-0042", 3) == "inv:vm-0042:3");
  CHECK(std::string(vend::agent::to_string(ReserveResult::kInsufficient)) == "insufficient");
}

TEST_CASE_TEMPLATE("reserve answers ok, insufficient and missing", F, EmbeddedFixture,
                   RedisFixture) {
  F f;
  StockStore& s = f.get();
  const std::string key = vend::agent::stock_key("vm-1", 1);
  CHECK(reserve(s, key, 1) == ReserveResult::kMissing);
  CHECK_FALSE(value_of(s, key).has_value());  // a miss does not create the key
  REQUIRE(s.load(key, 2).ok());
  CHECK(reserve(s, key, 1) == ReserveResult::kOk);
  CHECK(reserve(s, key, 1) == ReserveResult::kOk);
  CHECK(reserve(s, key, 1) == ReserveResult::kInsufficient);
  CHECK(value_of(s, key) == 0);
}

TEST_CASE_TEMPLATE("reserve of n > 1 takes all n or nothing", F, EmbeddedFixture, RedisFixture) {
  F f;
  StockStore& s = f.get();
  REQUIRE(s.load("inv:vm-1:2", 5).ok());
  CHECK(reserve(s, "inv:vm-1:2", 3) == ReserveResult::kOk);
  CHECK(reserve(s, "inv:vm-1:2", 3) == ReserveResult::kInsufficient);
  CHECK(value_of(s, "inv:vm-1:2") == 2);
  CHECK(reserve(s, "inv:vm-1:2", 2) == ReserveResult::kOk);
  CHECK(value_of(s, "inv:vm-1:2") == 0);
}

TEST_CASE_TEMPLATE("release adds, and sets a missing key to n", F, EmbeddedFixture, RedisFixture) {
  F f;
  StockStore& s = f.get();
  REQUIRE(s.release("inv:vm-1:3", 2).ok());  // missing: SET, as a warm-up would
  CHECK(value_of(s, "inv:vm-1:3") == 2);
  REQUIRE(s.release("inv:vm-1:3", 3).ok());
  CHECK(value_of(s, "inv:vm-1:3") == 5);
  CHECK(reserve(s, "inv:vm-1:3", 5) == ReserveResult::kOk);
  REQUIRE(s.release("inv:vm-1:3", 1).ok());  // existing at 0: INCRBY
  CHECK(value_of(s, "inv:vm-1:3") == 1);
}

TEST_CASE_TEMPLATE("load overwrites; mget answers in key order", F, EmbeddedFixture, RedisFixture) {
  F f;
  StockStore& s = f.get();
  REQUIRE(s.load("inv:a:1", 7).ok());
  REQUIRE(s.load("inv:b:1", 0).ok());
  REQUIRE(s.load("inv:a:1", 4).ok());
  auto values = s.mget({"inv:b:1", "inv:none:1", "inv:a:1", "inv:b:1"});
  REQUIRE(values.ok());
  CHECK(*values == std::vector<std::optional<int64_t>>{0, std::nullopt, 4, 0});
  auto none = s.mget({});
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE_TEMPLATE("remove and flush_all delete counters", F, EmbeddedFixture, RedisFixture) {
  F f;
  StockStore& s = f.get();
  for (int slot = 0; slot < 50; ++slot) REQUIRE(s.load(vend::agent::stock_key("d", slot), 3).ok());
  REQUIRE(s.remove("inv:d:7").ok());
  REQUIRE(s.remove("inv:d:7").ok());  // missing is fine
  CHECK(reserve(s, "inv:d:7", 1) == ReserveResult::kMissing);
  CHECK(reserve(s, "inv:d:8", 1) == ReserveResult::kOk);
  REQUIRE(s.flush_all().ok());
  for (int slot = 0; slot < 50; ++slot) {
    CHECK_FALSE(value_of(s, vend::agent::stock_key("d", slot)).has_value());
  }
  CHECK(s.ping().ok());
}

TEST_CASE_TEMPLATE("bad amounts are invalid_argument and change nothing", F, EmbeddedFixture,
                   RedisFixture) {
  F f;
  StockStore& s = f.get();
  REQUIRE(s.load("inv:x:1", 3).ok());
  for (int64_t n : {0, -1}) {
    auto r = s.reserve("inv:x:1", n);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "invalid_argument");
    auto rel = s.release("inv:x:1", n);
    REQUIRE_FALSE(rel.ok());
    CHECK(rel.error().code == "invalid_argument");
  }
  auto load = s.load("inv:x:1", -5);
  REQUIRE_FALSE(load.ok());
  CHECK(load.error().code == "invalid_argument");
  auto many = s.reserve_many({{"inv:x:1", 1}, {"inv:x:1", 0}});
  REQUIRE_FALSE(many.ok());
  CHECK(many.error().code == "invalid_argument");
  CHECK(value_of(s, "inv:x:1") == 3);
}

TEST_CASE_TEMPLATE("reserve_many reserves each item in order", F, EmbeddedFixture, RedisFixture) {
  F f;
  StockStore& s = f.get();
  REQUIRE(s.load("inv:m:1", 1000).ok());
  REQUIRE(s.load("inv:m:2", 1).ok());
  // 1200 items cross reserve_many's pipeline chunks (512).
  std::vector<StockStore::ReserveItem> items(1200, {"inv:m:1", 1});
  items.emplace_back("inv:m:2", 2);
  items.emplace_back("inv:m:2", 1);
  items.emplace_back("inv:m:3", 1);
  auto results = s.reserve_many(items);
  REQUIRE_MESSAGE(results.ok(), results.error().to_string());
  REQUIRE(results->size() == items.size());
  for (int i = 0; i < 1200; ++i) {
    CHECK((*results)[i] == (i < 1000 ? ReserveResult::kOk : ReserveResult::kInsufficient));
  }
  CHECK((*results)[1200] == ReserveResult::kInsufficient);
  CHECK((*results)[1201] == ReserveResult::kOk);
  CHECK((*results)[1202] == ReserveResult::kMissing);
  CHECK(value_of(s, "inv:m:1") == 0);
  auto empty = s.reserve_many({});
  REQUIRE(empty.ok());
  CHECK(empty->empty());
}

TEST_CASE_TEMPLATE("concurrent reserves on one key never oversell", F, EmbeddedFixture,
                   RedisFixture) {
  F f;
  StockStore& s = f.get();
  constexpr int kUnits = F::kHotUnits;
  constexpr int kThreads = 4;
  REQUIRE(s.load("inv:hot:1", kUnits).ok());
  std::atomic<int> ok{0};
  std::atomic<int> errors{0};
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (;;) {
        auto r = s.reserve("inv:hot:1", 1);
        if (!r.ok()) {
          errors.fetch_add(1);
          return;
        }
        if (*r != ReserveResult::kOk) return;
        ok.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(errors.load() == 0);
  CHECK(ok.load() == kUnits);
  CHECK(value_of(s, "inv:hot:1") == 0);
}

// --- Redis only --------------------------------------------------------------

TEST_CASE("redis: reserve, release and reserve_many survive SCRIPT FLUSH (NOSCRIPT)") {
  vend::test::RedisServer server;
  vend::SystemClock clock;
  vend::NullLogger log;
  RedisOptions options = options_for(server.url());
  options.pool_size = 1;  // one connection: its cached SHAs are surely stale after the flush
  RedisStockStore store(options, clock, log);
  REQUIRE(store.load("inv:n:1", 10).ok());
  CHECK(reserve(store, "inv:n:1", 1) == ReserveResult::kOk);

  REQUIRE(redis_cli(server.port(), {"SCRIPT", "FLUSH"}) == 0);
  CHECK(reserve(store, "inv:n:1", 1) == ReserveResult::kOk);
  REQUIRE(redis_cli(server.port(), {"SCRIPT", "FLUSH"}) == 0);
  CHECK(store.release("inv:n:1", 5).ok());
  REQUIRE(redis_cli(server.port(), {"SCRIPT", "FLUSH"}) == 0);
  auto many = store.reserve_many({{"inv:n:1", 2}, {"inv:n:1", 100}});
  REQUIRE_MESSAGE(many.ok(), many.error().to_string());
  CHECK(*many == std::vector<ReserveResult>{ReserveResult::kOk, ReserveResult::kInsufficient});
  CHECK(value_of(store, "inv:n:1") == 11);
}

TEST_CASE("redis: a key holding a non-integer is a store_error; the connection stays usable") {
  RedisFixture f;
  REQUIRE(redis_cli(f.server.port(), {"SET", "inv:bad:1", "lots"}) == 0);
  auto r = f.store.reserve("inv:bad:1", 1);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "store_error");
  auto m = f.store.mget({"inv:bad:1"});
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().code == "store_error");
  CHECK(m.error().message.find("inv:bad:1") != std::string::npos);
  CHECK(f.store.ping().ok());
}

TEST_CASE("redis: stopped server -> store_unavailable fast, backoff, recovery after restart") {
  vend::test::RedisServer server;
  vend::ManualClock clock;
  vend::MemoryLogger log;
  RedisOptions options = options_for(server.url());
  options.reconnect_backoff_min = 100ms;
  RedisStockStore store(options, clock, log);
  for (int slot = 0; slot < 8; ++slot) {  // open every pooled connection
    REQUIRE(store.load(vend::agent::stock_key("r", slot), 5).ok());
  }

  server.stop();
  auto started = std::chrono::steady_clock::now();
  auto down = store.reserve("inv:r:1", 1);
  CHECK(std::chrono::steady_clock::now() - started < 1s);
  REQUIRE_FALSE(down.ok());
  CHECK(down.error().code == "store_unavailable");
  CHECK(down.error().message.find(options.address()) != std::string::npos);
  CHECK(log.contains("connection lost", vend::LogLevel::kWarn));

  server.start();
  for (int i = 0; i < 8; ++i) {  // within the backoff: fail fast, no reconnect
    auto fast = store.reserve("inv:r:1", 1);
    REQUIRE_FALSE(fast.ok());
    CHECK(fast.error().code == "store_unavailable");
    CHECK(fast.error().message.find("backoff") != std::string::npos);
  }

  clock.advance(100);
  CHECK(reserve(store, "inv:r:1", 1) == ReserveResult::kMissing);  // data died with the server
  CHECK(log.contains("restored", vend::LogLevel::kInfo));
  for (int i = 0; i < 8; ++i) {  // every pooled connection works again
    CHECK(reserve(store, "inv:r:1", 1) == ReserveResult::kMissing);
  }
  REQUIRE(store.load("inv:r:1", 1).ok());
  CHECK(reserve(store, "inv:r:1", 1) == ReserveResult::kOk);
}

TEST_CASE("redis: refused connection is store_unavailable naming host:port") {
  vend::ManualClock clock;
  vend::NullLogger log;
  RedisOptions options;
  options.port = vend::test::free_port();  // nothing listens there
  RedisStockStore store(options, clock, log);
  auto started = std::chrono::steady_clock::now();
  auto r = store.reserve("inv:x:1", 1);
  CHECK(std::chrono::steady_clock::now() - started < 1s);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "store_unavailable");
  CHECK(r.error().message.find("127.0.0.1:" + std::to_string(options.port)) != std::string::npos);
  CHECK(store.ping().error().code == "store_unavailable");
}

TEST_CASE("redis: a server that never answers times out within command_timeout") {
  // A listening socket that is never accept()ed: the kernel completes the
  // TCP handshake, then nothing ever answers.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(fd, 16) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);

  vend::ManualClock clock;
  vend::NullLogger log;
  RedisOptions options;
  options.port = ntohs(addr.sin_port);
  options.command_timeout = 200ms;
  RedisStockStore store(options, clock, log);
  auto started = std::chrono::steady_clock::now();
  auto r = store.reserve("inv:x:1", 1);
  auto elapsed = std::chrono::steady_clock::now() - started;
  close(fd);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "store_unavailable");
  CHECK(r.error().message.find("timed out") != std::string::npos);
  CHECK(elapsed >= 150ms);
  CHECK(elapsed < 1s);
}

TEST_CASE("redis: parse_url") {
  auto ok = RedisOptions::parse_url("redis://10.0.0.5:6380");
  REQUIRE(ok.ok());
  CHECK(ok->host == "10.0.0.5");
  CHECK(ok->port == 6380);
  CHECK(ok->address() == "10.0.0.5:6380");
  auto defaults = RedisOptions::parse_url("redis://cache.local/");
  REQUIRE(defaults.ok());
  CHECK(defaults->host == "cache.local");
  CHECK(defaults->port == 6379);
  auto v6 = RedisOptions::parse_url("redis://[::1]:7000");
  REQUIRE(v6.ok());
  CHECK(v6->host == "::1");
  CHECK(v6->address() == "[::1]:7000");

  struct Bad {
    const char* url;
    const char* says;
  };
  for (Bad bad : {Bad{"http://h:1", "scheme"}, Bad{"redis://", "missing host"},
                  Bad{"redis://h:", "host[:port]"}, Bad{"redis://h:abc", "port 'abc'"},
                  Bad{"redis://h:70000", "1..65535"}, Bad{"redis://h:0", "1..65535"},
                  Bad{"redis://u:pw@h:1", "credentials"}, Bad{"redis://h:1/2", "database"},
                  Bad{"redis://::1:6379", "IPv6"}, Bad{"redis://[::1", "host[:port]"}}) {
    CAPTURE(bad.url);
    auto r = RedisOptions::parse_url(bad.url);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "bad_url");
    CHECK(r.error().message.find(bad.says) != std::string::npos);
    CHECK(r.error().message.find(bad.url) != std::string::npos);
  }
}
