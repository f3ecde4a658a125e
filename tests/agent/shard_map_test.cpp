#include "cluster/shard_map.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

using vend::agent::gained_only;
using vend::agent::rendezvous_owner;
using vend::agent::shard_of;
using vend::agent::ShardEpochs;
using vend::agent::shards_won;
using vend::agent::stable_hash;

namespace {

std::vector<std::string> ids(std::initializer_list<const char*> names) {
  return std::vector<std::string>(names.begin(), names.end());
}

std::map<int, std::string> owners(const std::vector<std::string>& instances, int shard_count) {
  std::map<int, std::string> out;
  for (int shard = 0; shard < shard_count; ++shard) out[shard] = rendezvous_owner(shard, instances);
  return out;
}

}  // namespace

TEST_CASE("shard numbers are a stable on-disk contract") {
  // Pinned: a database's shard numbers must not change with the compiler,
  // the platform or a refactoring.
  // (Values computed independently, in Python, from the definition.)
  CHECK(stable_hash("") == 0xc3817c016ba4ff30ULL);  // splitmix64 of the FNV-1a basis
  CHECK(stable_hash("vm-1") == 0x569f5c29eba06b58ULL);
  CHECK(shard_of("vm-1", 64) == 24);
  for (int count : {1, 7, 64, 4096}) {
    int shard = shard_of("vm-42", count);
    CHECK(shard >= 0);
    CHECK(shard < count);
  }
}

TEST_CASE("machines spread evenly over the shards") {
  constexpr int kShards = 16;
  constexpr int kMachines = 16'000;
  std::vector<int> per_shard(kShards, 0);
  for (int i = 0; i < kMachines; ++i) ++per_shard[shard_of("vm-" + std::to_string(i), kShards)];
  for (int n : per_shard) {
    CHECK(n > 800);  // expected 1000 each
    CHECK(n < 1200);
  }
}

TEST_CASE("rendezvous: every shard has one owner, and shards spread over the instances") {
  auto three = ids({"agent-a", "agent-b", "agent-c"});
  std::map<std::string, int> per_instance;
  for (const auto& [shard, owner] : owners(three, 300)) ++per_instance[owner];
  REQUIRE(per_instance.size() == 3);
  for (const auto& [owner, n] : per_instance) {
    CHECK(n > 70);  // expected 100 each
    CHECK(n < 130);
  }
  CHECK(rendezvous_owner(5, {}).empty());
  CHECK(rendezvous_owner(5, ids({"only"})) == "only");
  // The member list's order does not matter.
  CHECK(owners(three, 64) == owners(ids({"agent-c", "agent-a", "agent-b"}), 64));
}

TEST_CASE("rendezvous: a join or a leave moves only the shards it must") {
  constexpr int kShards = 256;
  auto three = ids({"agent-a", "agent-b", "agent-c"});
  auto four = ids({"agent-a", "agent-b", "agent-c", "agent-d"});
  auto before = owners(three, kShards);
  auto after_join = owners(four, kShards);
  int moved = 0;
  for (int shard = 0; shard < kShards; ++shard) {
    if (before[shard] != after_join[shard]) {
      CHECK(after_join[shard] == "agent-d");  // a shard moves only to the newcomer
      ++moved;
    }
  }
  CHECK(moved > kShards / 4 - 25);  // about a quarter
  CHECK(moved < kShards / 4 + 25);

  auto after_leave = owners(ids({"agent-a", "agent-c"}), kShards);
  for (int shard = 0; shard < kShards; ++shard) {
    if (before[shard] != "agent-b") CHECK(after_leave[shard] == before[shard]);
    CHECK(after_leave[shard] != "agent-b");
  }
  CHECK(shards_won("agent-d", four, kShards).size() == static_cast<size_t>(moved));
}

TEST_CASE("gained_only: shards only gained, or a rebuild when one left or changed epoch") {
  ShardEpochs loaded{{1, 7}, {4, 2}};
  auto gained = gained_only(loaded, {{1, 7}, {3, 9}, {4, 2}, {8, 1}});
  REQUIRE(gained.has_value());
  CHECK(*gained == ShardEpochs{{3, 9}, {8, 1}});
  CHECK_FALSE(gained_only(loaded, loaded).has_value());                    // nothing new
  CHECK_FALSE(gained_only(loaded, {{1, 7}, {3, 9}}).has_value());          // 4 left
  CHECK_FALSE(gained_only(loaded, {{1, 8}, {3, 9}, {4, 2}}).has_value());  // 1 lost and won again
  auto first = gained_only({}, {{5, 1}});
  REQUIRE(first.has_value());
  CHECK(*first == ShardEpochs{{5, 1}});
}
