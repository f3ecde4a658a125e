// RateLimiter: token buckets for the access layer (docs/agent.md "Rate
// limits"). A bucket named by a key holds up to `burst` tokens and refills at
// `rate_per_s`; a new (or forgotten) bucket starts full. An order takes one
// token from each of its buckets (the machine's and the client's).
//
// Implementations: EmbeddedRateLimiter (in process, one agent) and
// RedisRateLimiter (shared by every agent behind one load balancer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace vend::agent {

struct RateLimit {
  double rate_per_s = 0;  // tokens added per second; > 0
  int64_t burst = 0;      // capacity of the bucket; >= 1
};

// One bucket of a take_all() call.
struct BucketRequest {
  std::string key;  // any bytes; implementations may prefix it
  RateLimit limit;
};

struct RateDecision {
  static constexpr size_t kNone = std::numeric_limits<size_t>::max();

  bool allowed = true;
  // When denied: ms until every refusing bucket holds a token again (>= 1).
  int64_t retry_after_ms = 0;
  // When denied: the index (in the request) of the refusing bucket with the
  // longest wait, the first one on a tie. kNone when allowed.
  size_t limited = kNone;
  // The limiter could not decide (Redis down, slow or answering nonsense)
  // and let the request through; counted in errors_total().
  bool failed_open = false;
};

// Thread-safety: every implementation is safe from many threads at once.
class RateLimiter {
 public:
  virtual ~RateLimiter() = default;

  // Atomically, all or nothing: when every bucket holds at least one token,
  // takes one from each and allows; otherwise takes none and denies with the
  // wait. So a request refused by one bucket never drains the others.
  // The same key twice in one call is two takes from one bucket.
  // REQUIRES: every limit has rate_per_s > 0 and burst >= 1; a limit that
  // differs from the one a bucket was last used with applies from now on.
  // An empty request is allowed.
  virtual RateDecision take_all(const std::vector<BucketRequest>& buckets) = 0;

  // take_all() of one bucket.
  RateDecision take(std::string_view key, double rate_per_s, int64_t burst) {
    return take_all({BucketRequest{std::string(key), RateLimit{rate_per_s, burst}}});
  }

  // True when take_all() may wait on the network (a Redis round trip): the
  // caller must not be a thread that serves other requests meanwhile.
  virtual bool may_block() const { return false; }

  // Calls that failed open since construction.
  virtual uint64_t errors_total() const = 0;
};

// The token-bucket arithmetic both implementations use (the Redis script
// mirrors it in Lua).
namespace bucket {

// Tokens of a bucket that held `tokens` `elapsed_ms` ago (negative elapsed
// counts as 0: clocks may step), capped at the burst.
double refill(double tokens, double elapsed_ms, const RateLimit& limit);
// ms until a bucket holding `tokens` (< 1) holds one: ceil, >= 1.
int64_t wait_ms(double tokens, const RateLimit& limit);
// ms until a bucket holding `tokens` is full again: ceil, >= 1. A bucket
// idle that long can be forgotten: a new one starts full.
int64_t full_after_ms(double tokens, const RateLimit& limit);

}  // namespace bucket

}  // namespace vend::agent
