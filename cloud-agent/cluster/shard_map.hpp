// Shards: which agent instance owns which machine when several agents share
// one database (docs/deployment.md, "Several agents").
//
// A machine belongs to one of `shard_count` shards for ever (a stable hash of
// its id; the count is fixed per database). A shard belongs to one live
// instance, chosen by rendezvous hashing (highest random weight): each
// instance scores each shard, the highest score wins. When an instance joins
// or leaves only the shards it wins or held move (about 1/n of them); the
// others keep their owner. Every instance computes the same answer from the
// same member list, with no coordination.
//
// The hashes are part of the on-disk contract (a database's shard numbers):
// FNV-1a 64 with a splitmix64 finaliser, never std::hash.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vend::agent {

// 64-bit FNV-1a of `bytes`, finalised with splitmix64 (well mixed low bits).
uint64_t stable_hash(std::string_view bytes);

// The shard of a machine. REQUIRES: shard_count > 0.
int shard_of(std::string_view device_id, int shard_count);

// The rendezvous weight of `instance` for `shard`.
uint64_t rendezvous_weight(std::string_view instance, int shard);

// The owner of `shard` among `instances` (highest weight; ties, which need
// equal 64-bit hashes, go to the smaller id). "" when `instances` is empty.
std::string rendezvous_owner(int shard, const std::vector<std::string>& instances);

// The shards in [0, shard_count) whose rendezvous owner is `instance`.
std::vector<int> shards_won(const std::string& instance, const std::vector<std::string>& instances,
                            int shard_count);

// Shard -> the epoch of its lease.
using ShardEpochs = std::map<int, uint64_t>;

// What a core built for the leases `loaded` needs to serve `held`: the
// shards only gained (every loaded shard still held at its epoch, at least
// one new), or nullopt when a shard left or changed epoch (a rebuild).
std::optional<ShardEpochs> gained_only(const ShardEpochs& loaded, const ShardEpochs& held);

}  // namespace vend::agent
