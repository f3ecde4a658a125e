#include "vend/agent/stock_store.hpp"

namespace vend::agent {

const char* to_string(ReserveResult result) {
  switch (result) {
    case ReserveResult::kOk: return "ok";
    case ReserveResult::kInsufficient: return "insufficient";
    case ReserveResult::kMissing: return "missing";
  }
  return "?";
}

std::string stock_key(std::string_view device, int slot) {
  std::string key;
  key.reserve(4 + device.size() + 1 + 11);
  key.append("inv:").append(device).push_back(':');
  key.append(std::to_string(slot));
  return key;
}

Result<std::vector<ReserveResult>> StockStore::reserve_many(const std::vector<ReserveItem>& items) {
  for (const auto& [key, n] : items) {  // validate all first: a bad batch changes nothing
    if (n <= 0) return make_error("invalid_argument", "reserve n = " + std::to_string(n));
  }
  std::vector<ReserveResult> results;
  results.reserve(items.size());
  for (const auto& [key, n] : items) {
    auto r = reserve(key, n);
    if (!r.ok()) return r.error();
    results.push_back(*r);
  }
  return results;
}

}  // namespace vend::agent
