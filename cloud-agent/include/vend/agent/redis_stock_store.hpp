// RedisStockStore: the StockStore on a real Redis through hiredis, for agents
// that share stock across machines. reserve/release run as Lua scripts
// (EVALSHA; reloaded once on NOSCRIPT), load = SET, mget = MGET,
// flush_all = FLUSHDB. See docs/stock-store.md.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "vend/agent/stock_store.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"

namespace vend::agent {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::chrono::milliseconds connect_timeout{200};
  // Per-command socket timeout; a timed-out call fails with store_unavailable
  // and its outcome is unknown.
  std::chrono::milliseconds command_timeout{200};
  // After a connection failure the store fails fast for reconnect_backoff_min,
  // doubling per failed reconnect up to reconnect_backoff_max.
  std::chrono::milliseconds reconnect_backoff_min{50};
  std::chrono::milliseconds reconnect_backoff_max{2000};
  // Connections in the pool (each used by one call at a time).
  int pool_size = 4;

  // Parses "redis://host[:port][/]" (IPv6 as "[::1]"; port defaults to 6379)
  // into host and port; other fields keep their defaults. Errors have code
  // "bad_url" and say what is wrong. Credentials and database numbers are
  // not supported yet and are rejected.
  static Result<RedisOptions> parse_url(std::string_view url);

  // "host:port", for messages.
  std::string address() const;
};

// Thread-safety: safe from many threads. A pool of `pool_size` connections,
// each guarded by its own mutex; a call takes a free connection (or waits for
// one), so at most pool_size commands are in flight.
//
// Failure handling: connections are opened lazily. When an open connection
// fails (reset, EOF, timeout) every connection of the pool is treated as
// stale and is reopened before its next use; reopening is gated by a backoff
// (fail fast with store_unavailable meanwhile, one reconnect probe per
// backoff period), so a dead Redis is not hammered. Lost data is not
// recovered here: after a Redis restart, reserve() answers kMissing until
// the agent warms the store up again.
//
// hiredis writes with write(2): SIGPIPE is blocked in the calling thread
// around each call (and a pending one consumed), so a peer reset never kills
// the process, whatever the process-wide disposition is.
//
// `clock` (backoff timing) and `logger` (connection lost / restored, once per
// transition) must outlive the store. Non-copyable, non-movable.
class RedisStockStore final : public StockStore {
 public:
  RedisStockStore(RedisOptions options, const Clock& clock, Logger& logger);
  ~RedisStockStore() override;
  RedisStockStore(const RedisStockStore&) = delete;
  RedisStockStore& operator=(const RedisStockStore&) = delete;

  Result<ReserveResult> reserve(std::string_view key, int64_t n) override;
  // Pipelined: EVALSHA x N sent together (in chunks), then N replies read.
  Result<std::vector<ReserveResult>> reserve_many(const std::vector<ReserveItem>& items) override;
  Status release(std::string_view key, int64_t n) override;
  Status load(std::string_view key, int64_t value) override;
  Result<std::vector<std::optional<int64_t>>> mget(const std::vector<std::string>& keys) override;
  Status remove(std::string_view key) override;
  Status flush_all() override;
  Status ping() override;

  const RedisOptions& options() const { return options_; }

 private:
  struct Connection;  // hiredis context + loaded script SHAs (redis_stock_store.cpp)
  class Health;       // shared failure state: backoff, pool epoch

  template <typename T, typename Fn>
  Result<T> with_connection(Fn&& fn);
  Connection& acquire(std::unique_lock<std::mutex>& lock);
  Status ensure_connected(Connection& c);

  RedisOptions options_;
  const Clock& clock_;
  Logger& logger_;
  std::vector<std::unique_ptr<Connection>> pool_;
  std::unique_ptr<Health> health_;
  std::atomic<unsigned> next_{0};
};

}  // namespace vend::agent
