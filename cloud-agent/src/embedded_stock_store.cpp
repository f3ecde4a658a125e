#include "vend/agent/embedded_stock_store.hpp"

namespace vend::agent {

namespace {

Error invalid(const char* what, std::string_view key, int64_t v) {
  return make_error("invalid_argument", std::string(what) + " " + std::to_string(v) + " for key '" +
                                            std::string(key) + "'");
}

}  // namespace

EmbeddedStockStore::Stripe& EmbeddedStockStore::stripe_of(std::string_view key) {
  // The map buckets by hash modulo a prime; the stripe takes the high bits so
  // the two choices stay independent.
  uint64_t h = KeyHash{}(key);
  return stripes_[((h >> 32) ^ (h >> 13)) & (kStripes - 1)];
}

Result<ReserveResult> EmbeddedStockStore::reserve(std::string_view key, int64_t n) {
  if (n <= 0) return invalid("reserve n =", key, n);
  Stripe& s = stripe_of(key);
  std::lock_guard lock(s.mu);
  auto it = s.counters.find(key);
  if (it == s.counters.end()) return ReserveResult::kMissing;
  if (it->second < n) return ReserveResult::kInsufficient;
  it->second -= n;
  return ReserveResult::kOk;
}

Status EmbeddedStockStore::release(std::string_view key, int64_t n) {
  if (n <= 0) return invalid("release n =", key, n);
  Stripe& s = stripe_of(key);
  std::lock_guard lock(s.mu);
  auto it = s.counters.find(key);
  if (it == s.counters.end()) {
    s.counters.emplace(std::string(key), n);
  } else {
    it->second += n;
  }
  return {};
}

Status EmbeddedStockStore::load(std::string_view key, int64_t value) {
  if (value < 0) return invalid("load value", key, value);
  Stripe& s = stripe_of(key);
  std::lock_guard lock(s.mu);
  auto it = s.counters.find(key);
  if (it == s.counters.end()) {
    s.counters.emplace(std::string(key), value);
  } else {
    it->second = value;
  }
  return {};
}

Result<std::vector<std::optional<int64_t>>> EmbeddedStockStore::mget(
    const std::vector<std::string>& keys) {
  std::vector<std::optional<int64_t>> values;
  values.reserve(keys.size());
  for (const std::string& key : keys) {
    Stripe& s = stripe_of(key);
    std::lock_guard lock(s.mu);
    auto it = s.counters.find(std::string_view(key));
    values.push_back(it == s.counters.end() ? std::nullopt : std::optional<int64_t>(it->second));
  }
  return values;
}

Status EmbeddedStockStore::remove(std::string_view key) {
  Stripe& s = stripe_of(key);
  std::lock_guard lock(s.mu);
  auto it = s.counters.find(key);
  if (it != s.counters.end()) s.counters.erase(it);
  return {};
}

Status EmbeddedStockStore::flush_all() {
  for (Stripe& s : stripes_) {
    std::lock_guard lock(s.mu);
    s.counters.clear();
  }
  return {};
}

}  // namespace vend::agent
