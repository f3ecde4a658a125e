// Restocks (restocks.hpp).
#include "stock/restocks.hpp"

namespace vend::agent {

Restocks::Known Restocks::known(const std::string& device, const std::string& restock_id) const {
  auto it = by_id_.find({device, restock_id});
  if (it == by_id_.end()) return Known::kUnknown;
  return it->second.minted ? Known::kMinted : Known::kRequested;
}

void Restocks::put(const StoredRestock& restock) {
  by_id_[{restock.device, restock.restock_id}] = restock;
}

std::vector<StoredRestock> Restocks::requested(const std::string& device) const {
  std::vector<StoredRestock> out;
  auto it = device.empty() ? by_id_.begin() : by_id_.lower_bound({device, ""});
  for (; it != by_id_.end() && (device.empty() || it->first.first == device); ++it) {
    if (!it->second.minted) out.push_back(it->second);
  }
  return out;
}

}  // namespace vend::agent
