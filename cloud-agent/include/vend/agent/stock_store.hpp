// StockStore: the sellable-stock counters of the agent, with the semantics of
// the classic Redis Lua scripts (docs/stock-store.md). One counter per slot,
// keyed `inv:{device}:{slot}`, equal to the size of the slot's token pool.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vend/result.hpp"

namespace vend::agent {

enum class ReserveResult {
  kOk,            // the counter held >= n and was decremented by n
  kInsufficient,  // the counter held < n; unchanged
  kMissing,       // no counter for the key (not warmed up, or the store was wiped)
};

const char* to_string(ReserveResult result);

// "inv:{device}:{slot}", e.g. stock_key("vm-0042", 3) == "inv:vm-0042:3".
std::string stock_key(std::string_view device, int slot);

// Error codes of every StockStore (Error::code):
//   "store_unavailable"  the store cannot be reached (refused, reset, timeout,
//                        reconnect backoff); the message names host:port and
//                        the cause. The outcome of the call is UNKNOWN: a
//                        reserve that timed out may have been applied.
//   "store_error"        the store answered, but not as the contract says
//                        (a key holding a non-integer, an unexpected reply).
//   "invalid_argument"   n <= 0 for reserve/release, value < 0 for load.
// No method throws.
//
// Thread-safety: every implementation is safe to call from many threads.
class StockStore {
 public:
  using ReserveItem = std::pair<std::string, int64_t>;  // key, n

  virtual ~StockStore() = default;

  // One atomic check-and-decrement: missing key -> kMissing; value < n ->
  // kInsufficient (no change); otherwise value -= n -> kOk.
  virtual Result<ReserveResult> reserve(std::string_view key, int64_t n) = 0;

  // reserve() of each item in order, each atomic on its own (not all-or-
  // nothing). On an error the outcome of every item of the batch is unknown.
  // The default calls reserve() in a loop; RedisStockStore pipelines.
  virtual Result<std::vector<ReserveResult>> reserve_many(const std::vector<ReserveItem>& items);

  // value += n; a missing key is SET to n (as a warm-up would).
  virtual Status release(std::string_view key, int64_t n) = 0;

  // value = `value` (warm-up from the database, repair by reconciliation).
  virtual Status load(std::string_view key, int64_t value) = 0;

  // The values of `keys`, in order; std::nullopt for a missing key.
  virtual Result<std::vector<std::optional<int64_t>>> mget(
      const std::vector<std::string>& keys) = 0;

  // Deletes one counter (a missing key is not an error).
  virtual Status remove(std::string_view key) = 0;

  // Deletes every counter: ops and tests ("store emptied" fault). Not atomic
  // with respect to concurrent calls.
  virtual Status flush_all() = 0;

  // Cheap liveness probe (health checks, circuit-breaker probes).
  virtual Status ping() = 0;
};

}  // namespace vend::agent
