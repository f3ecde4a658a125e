#include "limits/redis_link.hpp"

#include <pthread.h>

#include <algorithm>
#include <cerrno>

namespace vend::agent {

using redis_link::Context;
using redis_link::Reply;

namespace redis_link {

SigpipeGuard::SigpipeGuard() {
  sigemptyset(&pipe_);
  sigaddset(&pipe_, SIGPIPE);
  sigset_t pending;
  sigpending(&pending);
  was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
}

SigpipeGuard::~SigpipeGuard() {
  int saved_errno = errno;
  if (!was_pending_) {
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      timespec zero{};
      while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
      }
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  errno = saved_errno;
}

}  // namespace redis_link

namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000),
                 static_cast<suseconds_t>(ms.count() % 1000 * 1000)};
}

bool is_noscript(const redisReply& r) {
  return r.type == REDIS_REPLY_ERROR && std::string_view(r.str, r.len).starts_with("NOSCRIPT");
}

}  // namespace

RedisRateLimiter::Link::Link(const RedisLimiterOptions& options, const Clock& clock,
                             std::string script)
    : options_(options),
      clock_(clock),
      script_(std::move(script)),
      backoff_ms_(options.reconnect_backoff_min.count()) {
  int n = std::max(1, options_.pool_size);
  for (int i = 0; i < n; ++i) pool_.push_back(std::make_unique<Connection>());
}

Error RedisRateLimiter::Link::unavailable(std::string_view cause) const {
  return make_error("redis_unavailable", "redis " + options_.address() + ": " + std::string(cause));
}

// Call right after the failure: reads errno to tell a timeout from others.
Error RedisRateLimiter::Link::io_error(const redisContext* ctx) const {
  int saved_errno = errno;
  std::string cause = ctx->errstr[0] != '\0' ? ctx->errstr : "I/O error";
  if (ctx->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK)) {
    cause = "command timed out after " + std::to_string(options_.command_timeout.count()) + " ms";
  } else if (ctx->err == REDIS_ERR_EOF) {
    cause = "connection closed by server";
  }
  return unavailable(cause);
}

// One command; error replies are errors too ("server busy" kinds count as
// unavailable, the rest as redis_error).
Result<Reply> RedisRateLimiter::Link::command(redisContext* ctx,
                                              const std::vector<std::string_view>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (std::string_view a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  void* raw = redisCommandArgv(ctx, static_cast<int>(argv.size()), ptrs.data(), lens.data());
  if (raw == nullptr) return io_error(ctx);
  Reply reply(static_cast<redisReply*>(raw));
  if (reply->type != REDIS_REPLY_ERROR || is_noscript(*reply)) return reply;
  std::string_view msg(reply->str, reply->len);
  for (std::string_view busy : {"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "READONLY", "OOM"}) {
    if (msg.starts_with(busy)) return unavailable(msg);
  }
  return make_error("redis_error", "redis " + options_.address() + ": " + std::string(msg));
}

Status RedisRateLimiter::Link::admit_connect() {
  if (!broken_.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(health_mu_);
  int64_t now = clock_.monotonic_ms();
  if (now < retry_at_ms_) {
    return unavailable("down, next connection attempt in " + std::to_string(retry_at_ms_ - now) +
                       " ms");
  }
  retry_at_ms_ = now + backoff_ms_;
  backoff_ms_ = std::min(backoff_ms_ * 2, int64_t{options_.reconnect_backoff_max.count()});
  return {};
}

void RedisRateLimiter::Link::failed(uint64_t seen_epoch) {
  std::lock_guard lock(health_mu_);
  if (!epoch_.compare_exchange_strong(seen_epoch, seen_epoch + 1)) return;  // old news
  if (broken_.exchange(true)) return;
  backoff_ms_ = options_.reconnect_backoff_min.count();
  retry_at_ms_ = clock_.monotonic_ms() + backoff_ms_;
}

void RedisRateLimiter::Link::succeeded() {
  if (!broken_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(health_mu_);
  broken_ = false;
  backoff_ms_ = options_.reconnect_backoff_min.count();
}

Status RedisRateLimiter::Link::connect(Connection& c) {
  Context ctx(redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                      to_timeval(options_.connect_timeout)));
  if (ctx == nullptr) return unavailable("out of memory for a hiredis context");
  if (ctx->err != 0) return unavailable(std::string("connect failed: ") + ctx->errstr);
  if (redisSetTimeout(ctx.get(), to_timeval(options_.command_timeout)) != REDIS_OK) {
    return io_error(ctx.get());
  }
  redisEnableKeepAlive(ctx.get());
  auto sha = command(ctx.get(), {"SCRIPT", "LOAD", script_});
  if (!sha.ok()) return sha.error();
  if ((*sha)->type != REDIS_REPLY_STRING) return unavailable("unexpected reply to SCRIPT LOAD");
  c.sha.assign((*sha)->str, (*sha)->len);
  c.ctx = std::move(ctx);
  return {};
}

RedisRateLimiter::Link::Connection& RedisRateLimiter::Link::acquire(
    std::unique_lock<std::mutex>& lock) {
  size_t n = pool_.size();
  size_t start = next_.fetch_add(1, std::memory_order_relaxed) % n;
  for (size_t i = 0; i < n; ++i) {
    Connection& c = *pool_[(start + i) % n];
    std::unique_lock<std::mutex> attempt(c.mu, std::try_to_lock);
    if (attempt.owns_lock()) {
      lock = std::move(attempt);
      return c;
    }
  }
  Connection& c = *pool_[start];  // all busy: queue on one
  lock = std::unique_lock<std::mutex>(c.mu);
  return c;
}

// fn(connection) on a pooled, connected connection. A failed call drops the
// connection (a reply may still be in flight) and marks the pool stale.
template <typename Fn>
Result<Reply> RedisRateLimiter::Link::with_connection(Fn&& fn) {
  redis_link::SigpipeGuard sigpipe_guard;
  std::unique_lock<std::mutex> lock;
  Connection& c = acquire(lock);
  uint64_t epoch = epoch_.load(std::memory_order_acquire);
  if (c.ctx == nullptr || c.epoch != epoch) {
    c.ctx.reset();
    if (Status s = admit_connect(); !s.ok()) return s.error();  // fail fast
    if (Status s = connect(c); !s.ok()) {
      failed(epoch);
      return s.error();
    }
    c.epoch = epoch;
  }
  Result<Reply> result = fn(c);
  if (c.ctx->err != 0 || (!result.ok() && result.error().code == "redis_unavailable")) {
    c.ctx.reset();
    failed(epoch);
  } else {
    succeeded();
  }
  return result;
}

Result<Reply> RedisRateLimiter::Link::eval(const std::vector<std::string>& keys,
                                           const std::vector<std::string>& args) {
  std::string numkeys = std::to_string(keys.size());
  return with_connection([&](Connection& c) -> Result<Reply> {
    for (int attempt = 0;; ++attempt) {
      std::vector<std::string_view> argv = {"EVALSHA", c.sha, numkeys};
      argv.insert(argv.end(), keys.begin(), keys.end());
      argv.insert(argv.end(), args.begin(), args.end());
      auto reply = command(c.ctx.get(), argv);
      if (!reply.ok() || !is_noscript(**reply)) return reply;
      if (attempt == 1) return make_error("redis_error", "NOSCRIPT right after SCRIPT LOAD");
      auto sha = command(c.ctx.get(), {"SCRIPT", "LOAD", script_});
      if (!sha.ok()) return sha.error();
      if ((*sha)->type != REDIS_REPLY_STRING) return unavailable("unexpected reply to SCRIPT LOAD");
      c.sha.assign((*sha)->str, (*sha)->len);
    }
  });
}

Status RedisRateLimiter::Link::ping() {
  auto reply = with_connection([&](Connection& c) { return command(c.ctx.get(), {"PING"}); });
  if (!reply.ok()) return reply.error();
  return {};
}

}  // namespace vend::agent
