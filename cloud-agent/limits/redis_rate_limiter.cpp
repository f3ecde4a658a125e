#include "limits/redis_rate_limiter.hpp"

#include <cstdio>

#include "limits/redis_link.hpp"

namespace vend::agent {

namespace {

constexpr const char* kLog = "rate_limiter";

// KEYS: the buckets; ARGV: rate_per_s and burst of each, in turn. Mirrors
// take_all() of EmbeddedRateLimiter (rate_limiter.hpp, bucket::*) on
// Redis's clock in µs. Returns {index of the refusing bucket with the
// longest wait (1-based; 0: allowed and taken), that wait in ms}. Numbers
// are written with string.format: Redis turns a Lua number into text with
// 14 digits only, too few for a µs timestamp.
constexpr std::string_view kTakeAllLua = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tokens, used, rate, burst = {}, {}, {}, {}
local denied, wait = 0, 0
for i = 1, #KEYS do
  local k = KEYS[i]
  local r, b = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  rate[k], burst[k] = r, b
  if tokens[k] == nil then
    local s = redis.call('HMGET', k, 't', 'ts')
    local v = b
    if s[1] and s[2] then
      local e = math.max(0, now - tonumber(s[2]))
      v = math.min(b, tonumber(s[1]) + e * r / 1000000)
    end
    tokens[k], used[k] = v, 0
  else
    tokens[k] = math.min(b, tokens[k])
  end
  local have = tokens[k] - used[k]
  used[k] = used[k] + 1
  if have < 1 then
    local w = math.max(1, math.ceil((1 - have) * 1000 / r - 1e-6))
    if w > wait then denied, wait = i, w end
  end
end
if denied == 0 then
  for k, n in pairs(used) do
    local left = tokens[k] - n
    redis.call('HSET', k, 't', string.format('%.6f', left), 'ts', string.format('%.0f', now))
    redis.call('PEXPIRE', k, math.max(1, math.ceil((burst[k] - left) * 1000 / rate[k] - 1e-6)))
  end
end
return {denied, wait}
)lua";

std::string number_arg(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

RedisRateLimiter::RedisRateLimiter(RedisLimiterOptions options, const Clock& clock, Logger& log)
    : options_(std::move(options)),
      clock_(clock),
      log_(log),
      link_(std::make_unique<Link>(options_, clock_, std::string(kTakeAllLua))),
      failure_log_(clock_, log_, RateLimitedLog::Options{options_.log_interval_ms, 16}) {}

RedisRateLimiter::~RedisRateLimiter() = default;

RateDecision RedisRateLimiter::failed_open(const Error& error) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  failing_.store(true, std::memory_order_relaxed);
  std::lock_guard lock(log_mu_);
  failure_log_.log(LogLevel::kWarn, kLog, options_.address(), error.code,
                   "rate limits not enforced, request allowed: " + error.to_string());
  RateDecision d;
  d.failed_open = true;
  return d;
}

void RedisRateLimiter::log_restored() {
  if (!failing_.exchange(false, std::memory_order_relaxed)) return;
  std::lock_guard lock(log_mu_);
  failure_log_.flush();
  log_.info(kLog, "redis " + options_.address() + " answers again: rate limits enforced");
}

RateDecision RedisRateLimiter::take_all(const std::vector<BucketRequest>& buckets) {
  if (buckets.empty()) return RateDecision{};
  std::vector<std::string> keys;
  std::vector<std::string> args;
  for (const BucketRequest& b : buckets) {
    keys.push_back(options_.key_prefix + b.key);
    args.push_back(number_arg(b.limit.rate_per_s));
    args.push_back(std::to_string(b.limit.burst));
  }
  auto reply = link_->eval(keys, args);
  if (!reply.ok()) return failed_open(reply.error());
  const redisReply& r = **reply;
  bool shaped = r.type == REDIS_REPLY_ARRAY && r.elements == 2 &&
                r.element[0]->type == REDIS_REPLY_INTEGER &&
                r.element[1]->type == REDIS_REPLY_INTEGER && r.element[0]->integer >= 0 &&
                r.element[0]->integer <= static_cast<long long>(buckets.size());
  if (!shaped) {
    return failed_open(make_error(
        "redis_error", "redis " + options_.address() + ": unexpected reply to the take script"));
  }
  log_restored();
  RateDecision d;
  if (r.element[0]->integer == 0) return d;
  d.allowed = false;
  d.limited = static_cast<size_t>(r.element[0]->integer - 1);
  d.retry_after_ms = std::max<int64_t>(1, r.element[1]->integer);
  return d;
}

Status RedisRateLimiter::ping() { return link_->ping(); }

}  // namespace vend::agent
