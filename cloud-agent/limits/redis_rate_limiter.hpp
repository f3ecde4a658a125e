// RedisRateLimiter: the RateLimiter in Redis, shared by every agent that
// points at the same server (several agents behind one load balancer see
// one bucket per machine and per client). docs/design-decisions.md says why
// it fails open.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "limits/rate_limiter.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"
#include "vend/log_limiter.hpp"
#include "vend/result.hpp"

namespace vend::agent {

struct RedisLimiterOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  // Every call is bounded by connect_timeout (only when it has to connect)
  // plus command_timeout; past that the request is allowed (fail open).
  std::chrono::milliseconds connect_timeout{100};
  std::chrono::milliseconds command_timeout{50};
  // After a failure no connection is attempted for reconnect_backoff_min,
  // doubling per failed attempt up to reconnect_backoff_max: a dead Redis
  // costs one bounded wait per period, every other call fails open at once.
  std::chrono::milliseconds reconnect_backoff_min{100};
  std::chrono::milliseconds reconnect_backoff_max{5000};
  int pool_size = 4;  // connections, each used by one call at a time
  // Prepended to every bucket key (a shared Redis may hold other data).
  std::string key_prefix = "vend:rate:";
  // A failure is logged once per reason per interval (with the count of
  // the suppressed ones); every failure is counted.
  int64_t log_interval_ms = 60'000;

  // Parses "redis://host[:port][/]" (IPv6 as "[::1]"; port defaults to
  // 6379) into host and port; other fields keep their defaults. Errors have
  // code "bad_url" and say what is wrong; credentials and database numbers
  // are rejected (not supported).
  static Result<RedisLimiterOptions> parse_url(std::string_view url);
  // "host:port" (IPv6 in brackets), for messages.
  std::string address() const;
};

// take_all() is one EVALSHA of one Lua script (loaded with SCRIPT LOAD on
// each new connection, loaded again once on NOSCRIPT) that reads, refills,
// checks and takes every bucket of the call atomically, on Redis's own
// clock (TIME), so agents whose clocks disagree share one time line. A
// bucket is a hash {t: tokens, ts: µs of its last take} that expires
// (PEXPIRE) once it would be full again. A Redis Cluster is not supported
// (the keys of one call may live on different nodes).
//
// Fails open: when Redis is down, slow (command_timeout), loading, or
// answers something unexpected, the call is allowed with failed_open set,
// counted in errors_total(), and logged at a bounded rate; a broken
// connection is dropped and reopened after the backoff. SIGPIPE is blocked
// in the calling thread around each call.
//
// Thread-safe. `clock` (backoff and log intervals, not buckets) and `log`
// must outlive the limiter. Non-copyable.
class RedisRateLimiter final : public RateLimiter {
 public:
  RedisRateLimiter(RedisLimiterOptions options, const Clock& clock, Logger& log);
  ~RedisRateLimiter() override;
  RedisRateLimiter(const RedisRateLimiter&) = delete;
  RedisRateLimiter& operator=(const RedisRateLimiter&) = delete;

  RateDecision take_all(const std::vector<BucketRequest>& buckets) override;
  bool may_block() const override { return true; }
  uint64_t errors_total() const override { return errors_.load(std::memory_order_relaxed); }

  // Connects (if needed) and PINGs once: for a start-up check that says
  // which address does not answer. The limiter works (failing open) either way.
  Status ping();

  const RedisLimiterOptions& options() const { return options_; }

 private:
  class Link;  // the connection pool (redis_link.cpp)

  RateDecision failed_open(const Error& error);
  void log_restored();

  RedisLimiterOptions options_;
  const Clock& clock_;
  Logger& log_;
  std::unique_ptr<Link> link_;
  std::atomic<uint64_t> errors_{0};
  std::atomic<bool> failing_{false};
  std::mutex log_mu_;  // guards failure_log_ (RateLimitedLog is not thread-safe)
  RateLimitedLog failure_log_;
};

}  // namespace vend::agent
