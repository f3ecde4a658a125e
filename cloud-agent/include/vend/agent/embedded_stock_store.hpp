// EmbeddedStockStore: the in-process StockStore, the default of a one-machine
// deployment (no server). Counters live only in memory: a restart empties the
// store, and the agent warms it up from the database (load()).
#pragma once

#include <array>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "vend/agent/stock_store.hpp"

namespace vend::agent {

// Thread-safe. The map is split into kStripes stripes by key hash, each with
// its own mutex and hash map, so threads working on different keys rarely
// meet. reserve() and release() of an existing key do not allocate (lookup by
// string_view). Non-copyable, non-movable (holds mutexes).
class EmbeddedStockStore final : public StockStore {
 public:
  EmbeddedStockStore() = default;
  EmbeddedStockStore(const EmbeddedStockStore&) = delete;
  EmbeddedStockStore& operator=(const EmbeddedStockStore&) = delete;

  Result<ReserveResult> reserve(std::string_view key, int64_t n) override;
  Status release(std::string_view key, int64_t n) override;
  Status load(std::string_view key, int64_t value) override;
  Result<std::vector<std::optional<int64_t>>> mget(const std::vector<std::string>& keys) override;
  Status remove(std::string_view key) override;
  Status flush_all() override;
  Status ping() override { return {}; }

 private:
  static constexpr size_t kStripes = 64;  // power of two

  struct KeyHash {
    using is_transparent = void;  // NOLINT(readability-identifier-naming): std name
    size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  struct KeyEqual {
    using is_transparent = void;  // NOLINT(readability-identifier-naming): std name
    bool operator()(std::string_view a, std::string_view b) const noexcept { return a == b; }
  };
  using Map = std::unordered_map<std::string, int64_t, KeyHash, KeyEqual>;

  // One cache line (or more) per stripe, so stripe locks do not false-share.
  struct alignas(64) Stripe {
    std::mutex mu;
    Map counters;
  };

  Stripe& stripe_of(std::string_view key);

  std::array<Stripe, kStripes> stripes_;
};

}  // namespace vend::agent
