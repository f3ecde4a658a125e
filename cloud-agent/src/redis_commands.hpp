// Internal to vend_agent_store: hiredis plumbing of RedisStockStore (argument
// building, error mapping, script calls, pipelining). Not a public header.
#pragma once

#include <hiredis/hiredis.h>
#include <signal.h>

#include <array>
#include <charconv>
#include <chrono>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vend/agent/redis_stock_store.hpp"

namespace vend::agent::redis {

// The classic scripts. reserve: -1 missing, 0 insufficient, 1 ok.
constexpr std::string_view kReserveLua =
    "local v = redis.call('GET', KEYS[1]) if not v then return -1 end v = tonumber(v) "
    "local n = tonumber(ARGV[1]) if v < n then return 0 end redis.call('DECRBY', KEYS[1], n) "
    "return 1";
constexpr std::string_view kReleaseLua =
    "if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('INCRBY', KEYS[1], ARGV[1]) "
    "else redis.call('SET', KEYS[1], ARGV[1]) return tonumber(ARGV[1]) end";
constexpr std::array<std::string_view, 2> kScripts = {kReserveLua, kReleaseLua};
enum Script : size_t { kReserveScript = 0, kReleaseScript = 1 };

// reserve_many() sends at most this many commands before reading replies,
// which bounds the client-side buffers.
constexpr size_t kPipelineChunk = 512;

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

timeval to_timeval(std::chrono::milliseconds ms);

// A decimal integer argument without allocation.
class IntArg {
 public:
  explicit IntArg(int64_t v) { len_ = std::to_chars(buf_, buf_ + sizeof buf_, v).ptr - buf_; }
  std::string_view view() const { return {buf_, len_}; }

 private:
  char buf_[24];
  size_t len_;
};

// Command arguments as hiredis wants them (binary-safe).
class Argv {
 public:
  explicit Argv(std::initializer_list<std::string_view> args) {
    for (std::string_view a : args) add(a);
  }
  void add(std::string_view a) {
    ptrs_.push_back(a.data());
    lens_.push_back(a.size());
  }
  int argc() const { return static_cast<int>(ptrs_.size()); }
  const char** argv() { return ptrs_.data(); }
  const size_t* lens() const { return lens_.data(); }

 private:
  std::vector<const char*> ptrs_;
  std::vector<size_t> lens_;
};

bool is_noscript(const redisReply& r);
Result<int64_t> parse_int(std::string_view s);

// Errors naming "redis host:port".
Error unavailable(const RedisOptions& o, std::string_view cause);
Error store_error(const RedisOptions& o, std::string_view cause);
// The error of a failed hiredis call on `ctx`. Call right after the failure
// (reads errno to tell a timeout from other I/O errors).
Error io_error(const RedisOptions& o, const redisContext* ctx);
// An error reply: "server busy" kinds are store_unavailable, the rest
// store_error (WRONGTYPE, a non-integer value, a script error).
Error reply_error(const RedisOptions& o, const redisReply& r);

// One command; an I/O failure is an error (ctx->err set), error replies are
// returned as replies.
Result<Reply> exec(const RedisOptions& o, redisContext* ctx, Argv& args);
// exec() with error replies turned into errors.
Result<Reply> exec_checked(const RedisOptions& o, redisContext* ctx, Argv& args);
// OK when `reply` holds a reply of `type` (REDIS_REPLY_*).
Status expect_type(const RedisOptions& o, const Result<Reply>& reply, int type, const char* what);
Result<ReserveResult> to_reserve_result(const RedisOptions& o, const redisReply& r);

// SCRIPT LOAD; stores the SHA in *sha.
Status load_script(const RedisOptions& o, redisContext* ctx, Script which, std::string* sha);
// EVALSHA of a loaded script with one key and one argument; on NOSCRIPT
// (SCRIPT FLUSH, a failover) loads it again into *sha and retries once.
Result<Reply> eval_script(const RedisOptions& o, redisContext* ctx, std::string* sha, Script which,
                          std::string_view key, std::string_view arg);
// The reserve script for items[begin, end), pipelined, results into *out.
Status reserve_chunk(const RedisOptions& o, redisContext* ctx, std::string* sha,
                     const std::vector<StockStore::ReserveItem>& items, size_t begin, size_t end,
                     std::vector<ReserveResult>* out);

}  // namespace vend::agent::redis
