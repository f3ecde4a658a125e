// EmbeddedRateLimiter: the RateLimiter in process memory, for one agent (the
// default without --redis). Time comes from the injected Clock (monotonic).
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "limits/rate_limiter.hpp"
#include "vend/clock.hpp"

namespace vend::agent {

// Thread-safe (one mutex). Bounded memory: a bucket that has refilled to
// full is forgotten (a new one starts full, so nothing changes), checked
// from the least recently used end on every call; and at most max_buckets
// are kept: past that the least recently used bucket is dropped even when
// not full (counted in evicted_total(); its key then starts full again, so
// the bound errs towards allowing). `clock` must outlive the limiter.
// Non-copyable.
class EmbeddedRateLimiter final : public RateLimiter {
 public:
  struct Options {
    size_t max_buckets = 100'000;  // >= 1; ~100 bytes each plus the key
  };

  explicit EmbeddedRateLimiter(const Clock& clock) : EmbeddedRateLimiter(clock, Options{}) {}
  EmbeddedRateLimiter(const Clock& clock, Options options);
  EmbeddedRateLimiter(const EmbeddedRateLimiter&) = delete;
  EmbeddedRateLimiter& operator=(const EmbeddedRateLimiter&) = delete;

  RateDecision take_all(const std::vector<BucketRequest>& buckets) override;
  uint64_t errors_total() const override { return 0; }  // it cannot fail

  size_t bucket_count() const;
  uint64_t evicted_total() const;

 private:
  struct Bucket {
    double tokens = 0;
    int64_t updated_ms = 0;
    RateLimit limit;
    std::list<const std::string*>::iterator lru;  // its place in lru_
  };
  using Map = std::unordered_map<std::string, Bucket>;

  // REQUIRES: mu_ held. The bucket of `key`, created full, moved to the
  // most recently used end.
  Bucket& bucket_of(const std::string& key, const RateLimit& limit, int64_t now_ms);
  // REQUIRES: mu_ held. Forgets full buckets from the LRU end, then evicts
  // until `room` more buckets fit.
  void forget_idle(int64_t now_ms, size_t room);

  const Clock& clock_;
  Options options_;
  mutable std::mutex mu_;
  Map buckets_;
  std::list<const std::string*> lru_;  // keys of buckets_; front: most recently used
  uint64_t evicted_ = 0;
};

}  // namespace vend::agent
