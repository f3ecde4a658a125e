#include "limits/embedded_rate_limiter.hpp"

#include <algorithm>
#include <cassert>

namespace vend::agent {

EmbeddedRateLimiter::EmbeddedRateLimiter(const Clock& clock, Options options)
    : clock_(clock), options_(options) {
  options_.max_buckets = std::max<size_t>(1, options_.max_buckets);
}

size_t EmbeddedRateLimiter::bucket_count() const {
  std::lock_guard lock(mu_);
  return buckets_.size();
}

uint64_t EmbeddedRateLimiter::evicted_total() const {
  std::lock_guard lock(mu_);
  return evicted_;
}

void EmbeddedRateLimiter::forget_idle(int64_t now_ms, size_t room) {
  while (!lru_.empty()) {
    auto it = buckets_.find(*lru_.back());
    const Bucket& b = it->second;
    bool full = now_ms - b.updated_ms >= bucket::full_after_ms(b.tokens, b.limit);
    bool over = buckets_.size() + std::min(room, options_.max_buckets) > options_.max_buckets;
    if (!full && !over) return;
    if (!full) ++evicted_;
    lru_.pop_back();
    buckets_.erase(it);
  }
}

EmbeddedRateLimiter::Bucket& EmbeddedRateLimiter::bucket_of(const std::string& key,
                                                            const RateLimit& limit,
                                                            int64_t now_ms) {
  auto [it, fresh] = buckets_.try_emplace(key);
  Bucket& b = it->second;
  if (fresh) {
    b.tokens = static_cast<double>(limit.burst);
    b.updated_ms = now_ms;
    lru_.push_front(&it->first);
    b.lru = lru_.begin();
  } else {
    lru_.splice(lru_.begin(), lru_, b.lru);
  }
  b.tokens = bucket::refill(b.tokens, static_cast<double>(now_ms - b.updated_ms), limit);
  b.updated_ms = now_ms;
  b.limit = limit;
  return b;
}

RateDecision EmbeddedRateLimiter::take_all(const std::vector<BucketRequest>& requests) {
  for ([[maybe_unused]] const BucketRequest& r : requests) {
    assert(r.limit.rate_per_s > 0 && r.limit.burst >= 1);
  }
  std::lock_guard lock(mu_);
  int64_t now_ms = clock_.monotonic_ms();
  forget_idle(now_ms, 0);
  // Decided before any bucket is created: a key without one holds a full
  // bucket's tokens (burst >= 1) and never refuses. So a refused request
  // leaves no bucket behind, and a flood of refused requests under ever new
  // keys (client ids) pushes no other key's bucket out.
  RateDecision d;
  std::vector<Bucket*> found(requests.size(), nullptr);
  for (size_t i = 0; i < requests.size(); ++i) {
    const BucketRequest& r = requests[i];
    double tokens = static_cast<double>(r.limit.burst);
    if (auto it = buckets_.find(r.key); it != buckets_.end()) {
      Bucket& b = it->second;
      found[i] = &b;
      b.tokens = bucket::refill(b.tokens, static_cast<double>(now_ms - b.updated_ms), r.limit);
      b.updated_ms = now_ms;
      b.limit = r.limit;
      lru_.splice(lru_.begin(), lru_, b.lru);
      tokens = b.tokens;
    }
    // A key seen earlier in this call needs one more token per repeat.
    auto before = static_cast<double>(
        std::count_if(requests.begin(), requests.begin() + static_cast<std::ptrdiff_t>(i),
                      [&](const BucketRequest& o) { return o.key == r.key; }));
    double have = tokens - before;
    if (have >= 1.0) continue;
    int64_t wait = bucket::wait_ms(have, r.limit);
    if (d.allowed || wait > d.retry_after_ms) {
      d.allowed = false;
      d.retry_after_ms = wait;
      d.limited = i;
    }
  }
  if (!d.allowed) return d;
  if (std::find(found.begin(), found.end(), nullptr) == found.end()) {
    for (Bucket* b : found) b->tokens -= 1.0;  // all exist: nothing to create or evict
    return d;
  }
  forget_idle(now_ms, requests.size());  // may drop a found one: look them up again
  for (const BucketRequest& r : requests) bucket_of(r.key, r.limit, now_ms).tokens -= 1.0;
  return d;
}

}  // namespace vend::agent
