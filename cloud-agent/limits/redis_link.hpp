// Internal to vend_agent_limits: the connection pool of RedisRateLimiter
// (hiredis contexts with timeouts, reconnect backoff, one Lua script loaded
// per connection). Not a public header.
#pragma once

#include <hiredis/hiredis.h>
#include <signal.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "limits/redis_rate_limiter.hpp"

namespace vend::agent {

namespace redis_link {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;
struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextDeleter>;

// Blocks SIGPIPE in this thread for its lifetime and swallows one raised
// meanwhile (a write to a reset socket), then restores the thread's mask.
class SigpipeGuard {
 public:
  SigpipeGuard();
  ~SigpipeGuard();
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
};

}  // namespace redis_link

// Thread-safe. Errors have code "redis_unavailable" (connect, I/O, timeout,
// backoff, a busy/loading server) or "redis_error" (an error reply, a reply
// of the wrong shape); messages name the address.
class RedisRateLimiter::Link {
 public:
  // `script` is the Lua text of eval(); `options` and `clock` must outlive it.
  Link(const RedisLimiterOptions& options, const Clock& clock, std::string script);
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // EVALSHA script numkeys keys... args...; on NOSCRIPT loads it again and
  // retries once. An error reply is returned as an error.
  Result<redis_link::Reply> eval(const std::vector<std::string>& keys,
                                 const std::vector<std::string>& args);
  // PING.
  Status ping();

 private:
  struct Connection {
    std::mutex mu;
    redis_link::Context ctx;  // null when not connected
    std::string sha;          // of the script on this connection
    uint64_t epoch = 0;       // epoch_ when connected
  };

  template <typename Fn>
  Result<redis_link::Reply> with_connection(Fn&& fn);
  Connection& acquire(std::unique_lock<std::mutex>& lock);
  // Opens c.ctx and loads the script. REQUIRES: admit_connect() said OK.
  Status connect(Connection& c);
  // OK unless reconnects wait for the backoff; the first caller after a
  // backoff period is the probe and doubles the next one.
  Status admit_connect();
  // A call on a connection of `seen_epoch` failed: every connection opened
  // before is stale (an outage breaks them all), reconnects wait.
  void failed(uint64_t seen_epoch);
  void succeeded();
  Result<redis_link::Reply> command(redisContext* ctx, const std::vector<std::string_view>& argv);
  Error unavailable(std::string_view cause) const;
  Error io_error(const redisContext* ctx) const;

  const RedisLimiterOptions& options_;
  const Clock& clock_;
  std::string script_;
  std::vector<std::unique_ptr<Connection>> pool_;
  std::atomic<unsigned> next_{0};
  std::atomic<uint64_t> epoch_{1};
  std::atomic<bool> broken_{false};
  std::mutex health_mu_;  // guards the two below
  int64_t retry_at_ms_ = 0;
  int64_t backoff_ms_ = 0;
};

}  // namespace vend::agent
