// KnownDevices: the ids of the machines the agent core holds in memory (all
// it serves; in cluster mode, those of its shards), readable from any
// thread without waiting for the core: the HTTP edge answers a request
// about any other id (404, under one shared rate limit) without handing it
// to the core. Written by AgentCore after its steps; a machine provisioned
// is here before its provisioning is answered.
//
// Thread-safe (a shared mutex: many readers, one writer). Non-copyable.
#pragma once

#include <cstddef>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace vend::agent {

class KnownDevices {
 public:
  KnownDevices() = default;
  KnownDevices(const KnownDevices&) = delete;
  KnownDevices& operator=(const KnownDevices&) = delete;

  bool contains(const std::string& id) const;
  size_t size() const;
  void add(const std::vector<std::string>& ids);
  // Now exactly `ids` (a rebuilt core).
  void replace(const std::vector<std::string>& ids);

 private:
  mutable std::shared_mutex mu_;
  std::unordered_set<std::string> ids_;
};

}  // namespace vend::agent
