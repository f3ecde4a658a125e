#include "redis_commands.hpp"

#include <pthread.h>

#include <cerrno>

namespace vend::agent::redis {

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

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000),
                 static_cast<suseconds_t>(ms.count() % 1000 * 1000)};
}

namespace {

bool starts_with(const redisReply& r, std::string_view prefix) {
  return std::string_view(r.str, r.len).starts_with(prefix);
}

}  // namespace

bool is_noscript(const redisReply& r) {
  return r.type == REDIS_REPLY_ERROR && starts_with(r, "NOSCRIPT");
}

Result<int64_t> parse_int(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return make_error("store_error", "value '" + std::string(s) + "' is not an integer");
  }
  return v;
}

Error unavailable(const RedisOptions& o, std::string_view cause) {
  return make_error("store_unavailable", "redis " + o.address() + ": " + std::string(cause));
}

Error store_error(const RedisOptions& o, std::string_view cause) {
  return make_error("store_error", "redis " + o.address() + ": " + std::string(cause));
}

// The error of a failed hiredis call on `ctx`. Call right after the failure
// (reads errno to tell a timeout from other I/O errors).
Error io_error(const RedisOptions& o, const redisContext* ctx) {
  int saved_errno = errno;
  if (ctx == nullptr) return unavailable(o, "out of memory for a hiredis context");
  std::string cause = ctx->errstr[0] != '\0' ? ctx->errstr : "I/O error";
  if (ctx->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK)) {
    cause = "command timed out after " + std::to_string(o.command_timeout.count()) + " ms";
  } else if (ctx->err == REDIS_ERR_EOF) {
    cause = "connection closed by server";
  }
  return unavailable(o, cause);
}

// An error reply: "server busy" kinds are unavailability, the rest mean a
// contract violation (WRONGTYPE, a non-integer value, a script error).
Error reply_error(const RedisOptions& o, const redisReply& r) {
  std::string_view msg(r.str, r.len);
  for (std::string_view busy :
       {"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "OOM"}) {
    if (msg.starts_with(busy)) return unavailable(o, msg);
  }
  return store_error(o, msg);
}

Result<Reply> exec(const RedisOptions& o, redisContext* ctx, Argv& args) {
  void* raw = redisCommandArgv(ctx, args.argc(), args.argv(), args.lens());
  if (raw == nullptr) return io_error(o, ctx);
  return Reply(static_cast<redisReply*>(raw));
}

// exec() with error replies turned into errors.
Result<Reply> exec_checked(const RedisOptions& o, redisContext* ctx, Argv& args) {
  auto reply = exec(o, ctx, args);
  if (reply.ok() && (*reply)->type == REDIS_REPLY_ERROR) return reply_error(o, **reply);
  return reply;
}

Result<ReserveResult> to_reserve_result(const RedisOptions& o, const redisReply& r) {
  if (r.type == REDIS_REPLY_ERROR) return reply_error(o, r);
  if (r.type == REDIS_REPLY_INTEGER) {
    if (r.integer == 1) return ReserveResult::kOk;
    if (r.integer == 0) return ReserveResult::kInsufficient;
    if (r.integer == -1) return ReserveResult::kMissing;
  }
  return store_error(o, "unexpected reply to the reserve script");
}

Status expect_type(const RedisOptions& o, const Result<Reply>& reply, int type, const char* what) {
  if (!reply.ok()) return reply.error();
  if ((*reply)->type != type) return store_error(o, std::string("unexpected reply to ") + what);
  return {};
}

Status load_script(const RedisOptions& o, redisContext* ctx, Script which, std::string* sha) {
  Argv args{"SCRIPT", "LOAD", kScripts[which]};
  auto reply = exec_checked(o, ctx, args);
  if (auto s = expect_type(o, reply, REDIS_REPLY_STRING, "SCRIPT LOAD"); !s.ok()) return s;
  sha->assign((*reply)->str, (*reply)->len);
  return {};
}

// EVALSHA of a loaded script; on NOSCRIPT (SCRIPT FLUSH, a restarted server
// behind a proxy) loads it again and retries once.
Result<Reply> eval_script(const RedisOptions& o, redisContext* ctx, std::string* sha, Script which,
                          std::string_view key, std::string_view arg) {
  for (int attempt = 0;; ++attempt) {
    Argv args{"EVALSHA", *sha, "1", key, arg};
    auto reply = exec(o, ctx, args);
    if (!reply.ok() || !is_noscript(**reply) || attempt == 1) return reply;
    if (auto s = load_script(o, ctx, which, sha); !s.ok()) return s.error();
  }
}

namespace {

// One pipelined round: EVALSHA for each of `indices`, then their replies.
// Indices answered NOSCRIPT go to *retry. Every reply is read even after an
// error reply, so the connection stays in sync; an I/O error leaves ctx->err.
Status pipeline_reserves(const RedisOptions& o, redisContext* ctx, const std::string& sha,
                         const std::vector<StockStore::ReserveItem>& items,
                         const std::vector<size_t>& indices, std::vector<ReserveResult>* out,
                         std::vector<size_t>* retry) {
  for (size_t i : indices) {
    IntArg arg(items[i].second);
    Argv args{"EVALSHA", sha, "1", items[i].first, arg.view()};
    if (redisAppendCommandArgv(ctx, args.argc(), args.argv(), args.lens()) != REDIS_OK) {
      return io_error(o, ctx);
    }
  }
  Status first_error;
  for (size_t i : indices) {
    void* raw = nullptr;
    if (redisGetReply(ctx, &raw) != REDIS_OK) return io_error(o, ctx);
    Reply reply(static_cast<redisReply*>(raw));
    if (is_noscript(*reply)) {
      retry->push_back(i);
      continue;
    }
    auto r = to_reserve_result(o, *reply);
    if (r.ok()) {
      (*out)[i] = *r;
    } else if (first_error.ok()) {
      first_error = r.error();
    }
  }
  return first_error;
}

}  // namespace

// items[begin, end) pipelined; NOSCRIPT answers are retried once after a reload.
Status reserve_chunk(const RedisOptions& o, redisContext* ctx, std::string* sha,
                     const std::vector<StockStore::ReserveItem>& items, size_t begin, size_t end,
                     std::vector<ReserveResult>* out) {
  std::vector<size_t> pending;
  pending.reserve(end - begin);
  for (size_t i = begin; i < end; ++i) pending.push_back(i);
  for (int attempt = 0; !pending.empty(); ++attempt) {
    if (attempt == 2) return store_error(o, "NOSCRIPT right after loading the reserve script");
    if (attempt == 1) {
      if (auto s = load_script(o, ctx, kReserveScript, sha); !s.ok()) return s;
    }
    std::vector<size_t> retry;
    if (auto s = pipeline_reserves(o, ctx, *sha, items, pending, out, &retry); !s.ok()) return s;
    pending = std::move(retry);
  }
  return {};
}

}  // namespace vend::agent::redis
