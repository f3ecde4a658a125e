#include "vend/agent/redis_stock_store.hpp"

#include <algorithm>

#include "redis_commands.hpp"

namespace vend::agent {

using namespace redis;  // NOLINT(google-build-using-namespace): our own internals

struct RedisStockStore::Connection {
  std::mutex mu;
  Context ctx;         // null when not connected
  uint64_t epoch = 0;  // Health epoch at connect time
  std::array<std::string, kScripts.size()> sha;
};

// Failure state shared by the pool: whether the store is broken, the
// reconnect backoff, and the epoch. Any failure bumps the epoch, which makes
// every connection opened before it stale: after an outage no pooled socket
// that predates it is trusted (each would fail once more otherwise).
class RedisStockStore::Health {
 public:
  Health(const RedisOptions& o, const Clock& clock, Logger& log)
      : options_(o), clock_(clock), log_(log), backoff_ms_(o.reconnect_backoff_min.count()) {}

  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

  // OK when a (re)connect may be attempted now; the first caller after a
  // backoff period is the probe and starts the next, doubled period.
  Status admit_reconnect() {
    if (!broken_.load(std::memory_order_acquire)) return {};
    std::lock_guard lock(mu_);
    if (!broken_) return {};
    int64_t now = clock_.monotonic_ms();
    if (now < retry_at_ms_) {
      return make_error("store_unavailable", "redis " + options_.address() +
                                                 ": reconnect backoff, next attempt in " +
                                                 std::to_string(retry_at_ms_ - now) +
                                                 " ms (last error: " + last_error_ + ")");
    }
    retry_at_ms_ = now + backoff_ms_;
    backoff_ms_ = std::min(backoff_ms_ * 2, int64_t{options_.reconnect_backoff_max.count()});
    return {};
  }

  // A connect or a command failed on a connection of epoch `seen_epoch`:
  // every connection of that epoch is stale now, and reconnects wait for the
  // backoff. A failure from an older epoch is old news and changes nothing.
  void failed(uint64_t seen_epoch, const std::string& cause) {
    std::lock_guard lock(mu_);
    if (!epoch_.compare_exchange_strong(seen_epoch, seen_epoch + 1, std::memory_order_acq_rel)) {
      return;
    }
    mark_broken(cause);
  }

  void connected() {
    if (!broken_.load(std::memory_order_acquire)) return;
    std::lock_guard lock(mu_);
    if (!broken_) return;
    broken_ = false;
    backoff_ms_ = options_.reconnect_backoff_min.count();
    log_.info("redis_store", "connection to " + options_.address() + " restored");
  }

 private:
  // REQUIRES: mu_ held.
  void mark_broken(const std::string& cause) {
    last_error_ = cause;
    if (broken_) return;
    broken_ = true;
    backoff_ms_ = options_.reconnect_backoff_min.count();
    retry_at_ms_ = clock_.monotonic_ms() + backoff_ms_;
    log_.warn("redis_store", "connection lost: " + cause);
  }

  const RedisOptions& options_;
  const Clock& clock_;
  Logger& log_;
  std::mutex mu_;
  std::atomic<bool> broken_{false};
  std::atomic<uint64_t> epoch_{1};
  int64_t retry_at_ms_ = 0;
  int64_t backoff_ms_;
  std::string last_error_;
};

RedisStockStore::RedisStockStore(RedisOptions options, const Clock& clock, Logger& logger)
    : options_(std::move(options)), clock_(clock), logger_(logger) {
  int n = std::max(1, options_.pool_size);
  for (int i = 0; i < n; ++i) pool_.push_back(std::make_unique<Connection>());
  health_ = std::make_unique<Health>(options_, clock_, logger_);
}

RedisStockStore::~RedisStockStore() = default;

RedisStockStore::Connection& RedisStockStore::acquire(std::unique_lock<std::mutex>& lock) {
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

Status RedisStockStore::ensure_connected(Connection& c) {
  uint64_t epoch = health_->epoch();
  if (c.ctx != nullptr && c.epoch == epoch) return {};
  c.ctx.reset();
  if (auto s = health_->admit_reconnect(); !s.ok()) return s;
  Context ctx(redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                      to_timeval(options_.connect_timeout)));
  Status s;
  if (ctx == nullptr || ctx->err != 0) {
    s = unavailable(options_, std::string("connect failed: ") +
                                  (ctx != nullptr ? ctx->errstr : "out of memory"));
  } else if (redisSetTimeout(ctx.get(), to_timeval(options_.command_timeout)) != REDIS_OK) {
    s = io_error(options_, ctx.get());
  } else {
    redisEnableKeepAlive(ctx.get());
    s = load_script(options_, ctx.get(), kReserveScript, &c.sha[kReserveScript]);
    if (s.ok()) s = load_script(options_, ctx.get(), kReleaseScript, &c.sha[kReleaseScript]);
  }
  if (!s.ok()) {
    health_->failed(epoch, s.error().message);
    return s;
  }
  c.ctx = std::move(ctx);
  c.epoch = epoch;
  health_->connected();
  return {};
}

// Runs fn(connection) on a pooled, connected connection. When the connection
// broke during fn (hiredis sets ctx->err), it is dropped and the pool marked
// stale: its state is unknown (a reply may still be in flight).
template <typename T, typename Fn>
Result<T> RedisStockStore::with_connection(Fn&& fn) {
  SigpipeGuard sigpipe_guard;
  std::unique_lock<std::mutex> lock;
  Connection& c = acquire(lock);
  if (auto s = ensure_connected(c); !s.ok()) return s.error();
  Result<T> result = fn(c);
  if (c.ctx->err != 0) {
    std::string cause = result.ok() ? "I/O error" : result.error().message;
    c.ctx.reset();
    health_->failed(c.epoch, cause);
  }
  return result;
}

Result<ReserveResult> RedisStockStore::reserve(std::string_view key, int64_t n) {
  if (n <= 0) return make_error("invalid_argument", "reserve n = " + std::to_string(n));
  IntArg arg(n);
  return with_connection<ReserveResult>([&](Connection& c) -> Result<ReserveResult> {
    auto reply =
        eval_script(options_, c.ctx.get(), &c.sha[kReserveScript], kReserveScript, key, arg.view());
    if (!reply.ok()) return reply.error();
    return to_reserve_result(options_, **reply);
  });
}

Result<std::vector<ReserveResult>> RedisStockStore::reserve_many(
    const std::vector<ReserveItem>& items) {
  using Results = std::vector<ReserveResult>;
  for (const auto& [key, n] : items) {
    if (n <= 0) return make_error("invalid_argument", "reserve n = " + std::to_string(n));
  }
  if (items.empty()) return Results{};
  return with_connection<Results>([&](Connection& c) -> Result<Results> {
    Results out(items.size(), ReserveResult::kMissing);
    for (size_t begin = 0; begin < items.size(); begin += kPipelineChunk) {
      size_t end = std::min(items.size(), begin + kPipelineChunk);
      auto s =
          reserve_chunk(options_, c.ctx.get(), &c.sha[kReserveScript], items, begin, end, &out);
      if (!s.ok()) return s.error();
    }
    return out;
  });
}

Status RedisStockStore::release(std::string_view key, int64_t n) {
  if (n <= 0) return make_error("invalid_argument", "release n = " + std::to_string(n));
  IntArg arg(n);
  return with_connection<void>([&](Connection& c) -> Status {
    auto reply =
        eval_script(options_, c.ctx.get(), &c.sha[kReleaseScript], kReleaseScript, key, arg.view());
    if (reply.ok() && (*reply)->type == REDIS_REPLY_ERROR) return reply_error(options_, **reply);
    return expect_type(options_, reply, REDIS_REPLY_INTEGER, "the release script");
  });
}

Status RedisStockStore::load(std::string_view key, int64_t value) {
  if (value < 0) return make_error("invalid_argument", "load value " + std::to_string(value));
  IntArg arg(value);
  return with_connection<void>([&](Connection& c) -> Status {
    Argv args{"SET", key, arg.view()};
    return expect_type(options_, exec_checked(options_, c.ctx.get(), args), REDIS_REPLY_STATUS,
                       "SET");
  });
}

Result<std::vector<std::optional<int64_t>>> RedisStockStore::mget(
    const std::vector<std::string>& keys) {
  using Values = std::vector<std::optional<int64_t>>;
  if (keys.empty()) return Values{};
  return with_connection<Values>([&](Connection& c) -> Result<Values> {
    Argv args{"MGET"};
    for (const std::string& k : keys) args.add(k);
    auto reply = exec_checked(options_, c.ctx.get(), args);
    if (auto s = expect_type(options_, reply, REDIS_REPLY_ARRAY, "MGET"); !s.ok()) return s.error();
    if ((*reply)->elements != keys.size()) return store_error(options_, "MGET: wrong reply size");
    Values values;
    for (size_t i = 0; i < keys.size(); ++i) {
      const redisReply& e = *(*reply)->element[i];
      if (e.type == REDIS_REPLY_NIL) {
        values.emplace_back();
        continue;
      }
      auto v = parse_int({e.str, e.len});
      if (e.type != REDIS_REPLY_STRING || !v.ok()) {
        return store_error(options_, "key '" + keys[i] + "' does not hold an integer");
      }
      values.emplace_back(*v);
    }
    return values;
  });
}

Status RedisStockStore::remove(std::string_view key) {
  return with_connection<void>([&](Connection& c) -> Status {
    Argv args{"DEL", key};
    return expect_type(options_, exec_checked(options_, c.ctx.get(), args), REDIS_REPLY_INTEGER,
                       "DEL");
  });
}

Status RedisStockStore::flush_all() {
  return with_connection<void>([&](Connection& c) -> Status {
    Argv args{"FLUSHDB"};
    return expect_type(options_, exec_checked(options_, c.ctx.get(), args), REDIS_REPLY_STATUS,
                       "FLUSHDB");
  });
}

Status RedisStockStore::ping() {
  return with_connection<void>([&](Connection& c) -> Status {
    Argv args{"PING"};
    return expect_type(options_, exec_checked(options_, c.ctx.get(), args), REDIS_REPLY_STATUS,
                       "PING");
  });
}

}  // namespace vend::agent
