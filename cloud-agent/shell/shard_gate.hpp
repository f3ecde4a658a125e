// ShardGate: the shards whose leases this instance may act on now, as the
// lease thread last renewed them, read by the core's ownership predicate
// (ClusterNode) on the core's thread.
//
// The lease thread opens a shard with its epoch and the end of its local
// validity (LeaseKeeper: round start + lease - safety margin) after every
// round that won or renewed it, and closes it when the lease leaves this
// instance. Between rounds nothing needs to run: a lease whose renewals
// fail (or whose lease thread is paused) closes by itself at its validity
// end, so the core stops acting on a shard before the store's lease can
// lapse, whatever the core, the writer or a rebuild are doing.
//
// Thread-safety: every method may be called from any thread (one mutex,
// held for a map look-up). Non-copyable.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace vend::agent {

class ShardGate {
 public:
  ShardGate() = default;
  ShardGate(const ShardGate&) = delete;
  ShardGate& operator=(const ShardGate&) = delete;

  // The lease of `shard` at `epoch` is held until valid_until_mono_ms.
  void open(int shard, uint64_t epoch, int64_t valid_until_mono_ms) {
    std::lock_guard lock(mu_);
    open_[shard] = {epoch, valid_until_mono_ms};
  }
  // The lease of `shard` left this instance (dropped, lost or lapsed).
  void close(int shard) {
    std::lock_guard lock(mu_);
    open_.erase(shard);
  }
  void close_all() {
    std::lock_guard lock(mu_);
    open_.clear();
  }
  // True when `shard` is held at `epoch` and its validity has not ended at
  // now_mono_ms.
  bool allows(int shard, uint64_t epoch, int64_t now_mono_ms) const {
    std::lock_guard lock(mu_);
    auto it = open_.find(shard);
    return it != open_.end() && it->second.first == epoch && now_mono_ms < it->second.second;
  }

 private:
  mutable std::mutex mu_;
  std::map<int, std::pair<uint64_t, int64_t>> open_;  // shard -> (epoch, valid until)
};

}  // namespace vend::agent
