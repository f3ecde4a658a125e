// Restocks alone: requested until minted, per device, in order.
#include "stock/restocks.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using vend::agent::Restocks;
using vend::agent::StoredRestock;

namespace {

std::vector<std::string> ids(const std::vector<StoredRestock>& rs) {
  std::vector<std::string> out;
  for (const auto& r : rs) out.push_back(r.device + "/" + r.restock_id);
  return out;
}

}  // namespace

TEST_CASE("a restock is requested until its tokens are minted") {
  Restocks restocks;
  CHECK(restocks.known("vm-1", "rst-a") == Restocks::Known::kUnknown);
  restocks.put(StoredRestock{"rst-a", "vm-1", 1, 5, false});
  CHECK(restocks.known("vm-1", "rst-a") == Restocks::Known::kRequested);
  CHECK(ids(restocks.requested("vm-1")) == std::vector<std::string>{"vm-1/rst-a"});
  restocks.put(StoredRestock{"rst-a", "vm-1", 1, 5, true});
  CHECK(restocks.known("vm-1", "rst-a") == Restocks::Known::kMinted);
  CHECK(restocks.requested("vm-1").empty());
  CHECK(restocks.size() == 1);
}

TEST_CASE("restock ids are per device; the requested ones come in (device, id) order") {
  Restocks restocks;
  restocks.put(StoredRestock{"r2", "vm-b", 1, 1, false});
  restocks.put(StoredRestock{"r1", "vm-a", 1, 1, false});
  restocks.put(StoredRestock{"r1", "vm-b", 2, 3, false});  // the same id on another machine
  restocks.put(StoredRestock{"r3", "vm-a", 1, 1, true});
  CHECK(restocks.known("vm-c", "r1") == Restocks::Known::kUnknown);
  CHECK(restocks.known("vm-a", "r3") == Restocks::Known::kMinted);
  CHECK(ids(restocks.requested("")) == std::vector<std::string>{"vm-a/r1", "vm-b/r1", "vm-b/r2"});
  CHECK(ids(restocks.requested("vm-b")) == std::vector<std::string>{"vm-b/r1", "vm-b/r2"});
  CHECK(ids(restocks.requested("vm-")).empty());  // a prefix is not a device
  CHECK(restocks.requested("vm-b")[0].count == 3);
}
