#include "devices/known_devices.hpp"

#include <mutex>

namespace vend::agent {

bool KnownDevices::contains(const std::string& id) const {
  std::shared_lock lock(mu_);
  return ids_.count(id) != 0;
}

size_t KnownDevices::size() const {
  std::shared_lock lock(mu_);
  return ids_.size();
}

void KnownDevices::add(const std::vector<std::string>& ids) {
  std::unique_lock lock(mu_);
  ids_.insert(ids.begin(), ids.end());
}

void KnownDevices::replace(const std::vector<std::string>& ids) {
  std::unordered_set<std::string> fresh(ids.begin(), ids.end());
  std::unique_lock lock(mu_);
  ids_.swap(fresh);
}

}  // namespace vend::agent
