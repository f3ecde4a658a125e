#include "cluster/shard_map.hpp"

#include <cassert>

namespace vend::agent {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t stable_hash(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;  // FNV prime
  }
  return splitmix64(h);
}

int shard_of(std::string_view device_id, int shard_count) {
  assert(shard_count > 0);
  return static_cast<int>(stable_hash(device_id) % static_cast<uint64_t>(shard_count));
}

uint64_t rendezvous_weight(std::string_view instance, int shard) {
  // The shard number is mixed in after the instance's hash, so weights of one
  // instance across shards are independent draws.
  return splitmix64(stable_hash(instance) ^ splitmix64(static_cast<uint64_t>(shard)));
}

std::string rendezvous_owner(int shard, const std::vector<std::string>& instances) {
  const std::string* best = nullptr;
  uint64_t best_weight = 0;
  for (const auto& instance : instances) {
    uint64_t weight = rendezvous_weight(instance, shard);
    if (!best || weight > best_weight || (weight == best_weight && instance < *best)) {
      best = &instance;
      best_weight = weight;
    }
  }
  return best ? *best : std::string();
}

std::vector<int> shards_won(const std::string& instance, const std::vector<std::string>& instances,
                            int shard_count) {
  std::vector<int> won;
  for (int shard = 0; shard < shard_count; ++shard) {
    if (rendezvous_owner(shard, instances) == instance) won.push_back(shard);
  }
  return won;
}

std::optional<ShardEpochs> gained_only(const ShardEpochs& loaded, const ShardEpochs& held) {
  for (const auto& [shard, epoch] : loaded) {
    auto now = held.find(shard);
    if (now == held.end() || now->second != epoch) return std::nullopt;
  }
  ShardEpochs gained;
  for (const auto& [shard, epoch] : held) {
    if (loaded.count(shard) == 0) gained[shard] = epoch;
  }
  if (gained.empty()) return std::nullopt;
  return gained;
}

}  // namespace vend::agent
