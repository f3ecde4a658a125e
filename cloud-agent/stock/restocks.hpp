// The restocks the agent knows: each one an operator requested (its command
// sent to the machine, its tokens not minted yet) and each one minted this
// run, by (device, restock id): ids confirmed locally at a machine are only
// unique on that machine. A requested restock is sent again until its tokens
// arrive (a command lost while the broker was down, or by a restart, still
// reaches the machine, which keeps one restock per id). Memory only: the
// core writes each restock to the log and, for one memory does not know
// (minted before a restart), asks the log. Single-threaded (the core's
// thread).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "contracts/repository_types.hpp"

namespace vend::agent {

class Restocks {
 public:
  enum class Known { kUnknown, kRequested, kMinted };
  Known known(const std::string& device, const std::string& restock_id) const;
  // Requested or minted (a later put of the same id replaces it).
  void put(const StoredRestock& restock);
  // The requested ones (not minted) of `device` ("" = every device), in
  // (device, id) order.
  std::vector<StoredRestock> requested(const std::string& device) const;
  size_t size() const { return by_id_.size(); }

 private:
  std::map<std::pair<std::string, std::string>, StoredRestock> by_id_;
};

}  // namespace vend::agent
